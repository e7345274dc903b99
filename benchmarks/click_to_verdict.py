"""Click to verdict in the browser: from pressing ▶ Run to the results on the page.

    .venv/bin/python -m benchmarks.click_to_verdict [--repeats 5] [--scenario NAME ...]

Serves the dashboard (`streamlit run`, its own embedded cluster: 1 node, then 3 for the
scenarios that need them), opens the Failure lab in Debian's Chromium at 1920x1080 through
Playwright, and for each scenario presses Run and waits until the page says "Done: run"
(said only after the results are drawn, pages._run_control.run_live) and a count card shows.
Each scenario is timed `--repeats` times with the levels side by side (the default), and as
many times with LAB_ONE_LEVEL_AT_A_TIME=1 (one level after the other, as before), after one
untimed warm-up run. Prints a Markdown table of medians, minima and maxima.

With --streaming-metrics, the two modes are instead: Spark up and warm, runs not followed
(LAB_STREAMING_METRICS=0), and Spark up with every run followed by Spark's streaming
queries (engine.metrics.streaming), levels side by side in both: what following a run
costs the run. Spark is started by the dashboard as in a class; the timed runs begin once
the Metrics page shows the warm-up run's final numbers (Spark up, warmed). With --settled
as well, each next run starts only once the followed run's final metrics are saved, as in
a class, where the next run comes after the results are discussed: without it the runs
start back to back, and the previous run's judgement (4 to 6 s of Spark) runs during the
next one. --pause S waits S seconds more after each run, in both modes alike.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.commands.dashboard import serve_dashboard
from engine.scenarios.scenario import list_scenarios, load_scenario

# Issue 18's targets, median of 5 on a warm cluster; aborted-transaction has none.
PRODUCER_TARGET = ("ack-loss", "network-blip", "producer-crash", "retry-reorder")


def target_of(name: str) -> float | None:
    """Issue 18's target for a scenario, or None for the scenarios it does not name."""
    if name in PRODUCER_TARGET:
        return 4.0
    if name == "broker-failover":
        return 20.0
    scenario = load_scenario(list_scenarios()[name])
    return 10.0 if scenario.pipeline == "processor" and scenario.nodes == 1 else None


@contextmanager
def dashboard(
    nodes: int, one_at_a_time: bool, streaming: bool | None = None
) -> Iterator[tuple[str, str]]:
    """The served dashboard: (its address, its runs folder)."""
    state = tempfile.mkdtemp(prefix="lab-ctv-")
    env = {
        **os.environ,
        "LAB_STATE_DIR": f"{state}/state",
        "LAB_RUNS_DIR": f"{state}/runs",
        "LAB_AUTOSTART": "1",
        "LAB_NODES": str(nodes),
        "LAB_SPARK_AUTOSTART": "0",  # Spark is not on the path measured here
        "LAB_ONE_LEVEL_AT_A_TIME": "1" if one_at_a_time else "0",
    }
    if streaming is not None:  # Spark up; runs followed by its streaming queries or not
        env["LAB_SPARK_AUTOSTART"] = "1"
        env["LAB_STREAMING_METRICS"] = "1" if streaming else "0"
    server, url = serve_dashboard(env)
    try:
        yield url, env["LAB_RUNS_DIR"]
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(state, ignore_errors=True)


def click_to_verdict(tab, url: str, name: str) -> float:
    from playwright.sync_api import expect

    tab.goto(f"{url}/failure_lab")
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name=re.compile(rf"^{re.escape(name)} — ")).click()
    run = tab.get_by_role("button", name="▶ Run")
    expect(run).to_be_enabled(timeout=300_000)  # the cluster is up
    began = time.monotonic()
    run.click()
    tab.get_by_text("Done: run").wait_for(timeout=300_000)
    tab.locator("[data-testid='stMetric']", has_text="Delivered").first.wait_for()
    return time.monotonic() - began


def settle(tab, runs_dir: str, timeout: float = 120.0) -> float:
    """Wait until the run just shown has its final metrics saved (a followed run's are
    finished in the background after the verdict); returns the seconds waited."""
    done = tab.get_by_text(re.compile(r"^Done: run ")).first.inner_text()
    metrics = Path(runs_dir) / done.removeprefix("Done: run ").strip() / "metrics.json"
    began = time.monotonic()
    while not metrics.exists() and time.monotonic() - began < timeout:
        time.sleep(0.2)
    return time.monotonic() - began


def wait_for_spark(tab, url: str) -> None:
    """Until the Metrics page shows the latest run's final numbers: Spark is up and warm."""
    tab.goto(f"{url}/metrics")
    tab.get_by_text("Final numbers").first.wait_for(timeout=600_000)


MODES = {
    "default": (("side by side", False, None), ("one at a time", True, None)),
    "streaming": (("not followed", False, False), ("followed", False, True)),
}


def measure(
    names: list[str],
    nodes: int,
    repeats: int,
    modes: str = "default",
    settled: bool = False,
    pause: float = 0.0,
) -> dict[tuple[str, str], list[float]]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    times: dict[tuple[str, str], list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for mode, one_at_a_time, streaming in MODES[modes]:
            with dashboard(nodes, one_at_a_time, streaming) as (url, runs_dir):
                tab = browser.new_page(viewport={"width": 1920, "height": 1080})
                tab.set_default_timeout(120_000)
                for name in names:
                    click_to_verdict(tab, url, name)  # warm-up: topics, JIT, page caches
                    if streaming is not None:
                        wait_for_spark(tab, url)
                    runs = []
                    for _ in range(repeats):
                        runs.append(click_to_verdict(tab, url, name))
                        if settled and streaming:
                            waited = settle(tab, runs_dir)
                            print(f"  metrics saved {waited:.1f} s after the verdict", flush=True)
                        time.sleep(pause)  # in every mode alike
                    times[(name, mode)] = runs
                    print(f"{name} ({mode}): {', '.join(f'{t:.1f}' for t in runs)}", flush=True)
                tab.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scenario", action="append", help="only these (repeatable)")
    parser.add_argument(
        "--streaming-metrics",
        action="store_true",
        help="Spark up in both modes: runs not followed, then followed by streaming queries",
    )
    parser.add_argument(
        "--settled",
        action="store_true",
        help="with --streaming-metrics: before each next run, wait until the followed run's "
        "final metrics are saved (without it, runs start back to back, and the previous "
        "run's judgement runs during the next one)",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds to wait after each timed run (after --settled's wait), in every mode "
        "alike: the talk between two runs in a class, in which the last run's aftermath "
        "(its Spark judgement, the JVM's clean-up) ends",
    )
    args = parser.parse_args()
    modes = "streaming" if args.streaming_metrics else "default"
    names_of = [m[0] for m in MODES[modes]]
    names = args.scenario or list(list_scenarios())
    by_nodes: dict[int, list[str]] = {}
    for name in names:
        by_nodes.setdefault(load_scenario(list_scenarios()[name]).nodes, []).append(name)
    times: dict[tuple[str, str], list[float]] = {}
    for nodes, group in sorted(by_nodes.items()):
        times.update(measure(group, nodes, args.repeats, modes, args.settled, args.pause))
    print()
    print(
        f"| scenario | nodes | target (s) | {names_of[0]}: median [min–max] (s) | "
        f"{names_of[1]}: median [min–max] (s) | target met |"
    )
    print("|---|---|---|---|---|---|")
    for nodes, group in sorted(by_nodes.items()):
        for name in group:
            cells = []
            for mode in names_of:
                runs = times[(name, mode)]
                cells.append(f"{statistics.median(runs):.1f} [{min(runs):.1f}–{max(runs):.1f}]")
            median = statistics.median(times[(name, names_of[0])])
            target = target_of(name)
            met = "—" if target is None else ("yes" if median <= target else "no")
            shown = "—" if target is None else f"{target:.0f}"
            print(f"| {name} | {nodes} | {shown} | {cells[0]} | {cells[1]} | {met} |")


if __name__ == "__main__":
    main()
