"""What a viewer opening Metrics costs the dashboard's process: CPU seconds per page load.

    .venv/bin/python -m benchmarks.metrics_page_cost --runs DIR [--viewers 20]

Streamlit's AppTest runs app.py in this process, one session per viewer, each opening the
Metrics page as a room's viewer does (the dashboard bound to 0.0.0.0 with a presenter key, no
key in the viewer's address), on the newest complete run of DIR that has saved metrics (a
runs folder: benchmarks/room_load.py's, or the lab's own `runs/`). `time.process_time()`
around each page load counts the CPU the process spent for it, whatever else the machine
runs: on a machine shared with other jobs, wall-clock times measure the machine. The first
session draws what later sessions may be given as it is; its cost is printed apart from the
median and maximum of the others.

This is the part of benchmarks/room_load.py's `--metrics-viewers` figure that the
dashboard's code decides (the Metrics page's own work per viewer), without Kafka or Spark.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

KEY = "metrics-page-cost-key-0123"


def newest_with_metrics(runs: Path) -> str:
    """The newest run folder name of `runs` that has a run.json and a metrics.json."""
    found = sorted(
        p.parent.name for p in runs.glob("*/metrics.json") if (p.parent / "run.json").is_file()
    )
    if not found:
        raise SystemExit(
            f"No run with saved metrics in {runs}: run room_load first, or pass --runs."
        )
    return found[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="a folder of recorded runs")
    parser.add_argument("--viewers", type=int, default=20)
    args = parser.parse_args()
    chosen = newest_with_metrics(args.runs)
    # A copy: the page may mark runs, and the copy holds only the runs of that scenario.
    copy = Path(tempfile.mkdtemp(prefix="lab-page-cost-"))
    for folder in args.runs.iterdir():
        if (folder / "run.json").is_file():
            shutil.copytree(folder, copy / folder.name)
    os.environ.update(
        LAB_RUNS_DIR=str(copy),
        LAB_STATE_DIR=str(copy / ".state"),
        LAB_AUTOSTART="0",
        LAB_SPARK_AUTOSTART="0",
        LAB_PRESENTER_KEY=KEY,
    )
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    from engine.base import paths

    config.set_option("server.address", "0.0.0.0")
    app = str(paths.REPO_ROOT / "app.py")
    costs, shown = [], 0
    try:
        for _ in range(args.viewers):
            viewer = AppTest.from_file(app, default_timeout=300).run()
            viewer.session_state["lab_run_id"] = chosen
            began = time.process_time()
            viewer.switch_page("pages/metrics.py").run()
            costs.append(time.process_time() - began)
            if viewer.exception:
                raise SystemExit(f"The page failed: {viewer.exception[0].value}")
            shown += any("computed at" in c.value for c in viewer.caption)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    later = costs[1:] or costs
    print(
        f"Metrics page of run {chosen}, {args.viewers} viewer sessions, CPU seconds of this "
        f"process per page load: first {costs[0]:.3f}; the others median "
        f"{statistics.median(later):.3f}, max {max(later):.3f}; total {sum(costs):.2f}. "
        f"Sessions that drew the saved metrics: {shown} of {args.viewers}. Load average "
        + " / ".join(f"{x:.1f}" for x in os.getloadavg())
        + f", {os.cpu_count()} cores."
    )


if __name__ == "__main__":
    main()
