"""Two dashboard sessions running scenarios at the same time, under background load.

    .venv/bin/python -m benchmarks.concurrent_sessions [--rounds 5] [--load-rate 2000]

It serves the dashboard with `streamlit run` (it starts its own embedded cluster), opens two
sessions in Debian's headless Chromium, and in every round has both press Run at the same
moment on different scenarios. Meanwhile Kafka's own ProducerPerformance writes 1 KB records
to a topic of its own at `--load-rate` records/s, so the cluster is busy with a third client.

It checks that nothing mixed and nothing hung: each session's page names its own run, each
run is complete, reads only its own topics and keeps its scenario's promises (the `expect`
block), and the two runs of a round overlapped in time. It prints one row per round and a
summary (Markdown tables, pasted into the README).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.base.tools import find_java
from engine.commands.dashboard import serve_dashboard
from engine.kafka.admin import create_topic
from engine.kafka.jars import ensure_kafka_jars
from engine.scenarios.scenario import list_scenarios, load_scenario

# Pairs that run together: each side's faults stay inside its own clients, so they share.
PAIRS = [
    ("ack-loss", "network-blip"),
    ("producer-crash", "retry-reorder"),
    ("consumer-crash", "aborted-transaction"),
    ("commit-before-process", "zombie"),
]


def start_dashboard(state: Path) -> tuple[subprocess.Popen, str]:
    return serve_dashboard(
        {
            **os.environ,
            "LAB_STATE_DIR": str(state / "state"),
            "LAB_RUNS_DIR": str(state / "runs"),
            "LAB_AUTOSTART": "1",
            "LAB_SPARK_AUTOSTART": "0",
        }
    )


def cluster_bootstrap(state: Path) -> str:
    """The dashboard's cluster's direct listener, as `engine cluster status` reports it."""
    out = subprocess.run(
        [sys.executable, "-m", "engine", "cluster", "status", "--json"],
        env={**os.environ, "LAB_STATE_DIR": str(state / "state")},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)["direct_bootstrap"]


def start_load(bootstrap: str, rate: int, seconds: int) -> subprocess.Popen:
    """Kafka's ProducerPerformance writing 1 KB records at `rate`/s for `seconds`."""
    libs = ensure_kafka_jars()
    # The lab's brokers do not create topics on first use; a producer would block on it.
    create_topic(bootstrap, "background-load", partitions=3)
    return subprocess.Popen(
        [
            *(find_java(), "-Xmx256m", "-cp", f"{libs}/*"),
            "org.apache.kafka.tools.ProducerPerformance",
            *("--topic", "background-load", "--num-records", str(rate * seconds)),
            *("--record-size", "1024", "--throughput", str(rate)),
            *("--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def choose(tab, scenario: str) -> None:
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name=re.compile(rf"^{re.escape(scenario)} — ")).click()
    title = load_scenario(list_scenarios()[scenario]).title
    tab.get_by_role("heading", name=title).wait_for()


def run_id_after(tab, scenario: str, previous: str | None, timeout_s: float) -> str:
    """Wait for the page's "Done: run ID" naming a new run of `scenario`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        label = tab.get_by_text("Done: run")
        if label.count():
            run_id = label.first.inner_text().split("Done: run")[-1].strip()
            if run_id != previous and f"-{scenario}-" in run_id:
                return run_id
        if tab.locator("[data-testid='stAlertContentError']").count():
            raise RuntimeError(tab.locator("[data-testid='stAlertContentError']").inner_text())
        time.sleep(0.5)
    raise TimeoutError(f"no run of {scenario} finished within {timeout_s:.0f} s (a deadlock?)")


def check_run(runs_dir: Path, run_id: str, scenario: str) -> list[str]:
    """What is wrong with a run: incomplete, someone else's topics, or broken promises."""
    meta = json.loads((runs_dir / run_id / "run.json").read_text())
    result = json.loads((runs_dir / run_id / "result.json").read_text())["results"]
    problems = [] if meta["status"] == "complete" else [f"status {meta['status']}"]
    problems += [
        f"{level} read {r['sink_topic']}"
        for level, r in result.items()
        if run_id not in r["sink_topic"]
    ]
    problems += load_scenario(list_scenarios()[scenario]).unmet_expectations(result)
    return problems


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=len(PAIRS))
    parser.add_argument("--load-rate", type=int, default=2000, help="background records/s")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Chromium is needed (Debian: apt-get install chromium; ./lab setup --test).")
    state = Path(tempfile.mkdtemp(prefix="lab-concurrent-"))
    server, url = start_dashboard(state)
    load = None
    rows = []
    began = time.monotonic()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            first = browser.new_page()
            first.goto(url)  # the first request goes to app.py, which sets up st.navigation
            first.get_by_text("node 1: running").wait_for(timeout=240_000)
            tabs = [browser.new_page(viewport={"width": 1400, "height": 2000}) for _ in "ab"]
            for tab in tabs:
                tab.set_default_timeout(120_000)
                tab.goto(f"{url}/failure_lab")
                tab.get_by_role("heading", name="Failure lab").wait_for()
            load = start_load(cluster_bootstrap(state), args.load_rate, 3600)
            previous: list[str | None] = [None, None]
            for round_no in range(1, args.rounds + 1):
                pair = PAIRS[(round_no - 1) % len(PAIRS)]
                for tab, scenario in zip(tabs, pair, strict=True):
                    choose(tab, scenario)
                clicked = time.monotonic()
                for tab in tabs:
                    tab.get_by_role("button", name="▶ Run").click()
                ids = []
                for i, (tab, scenario) in enumerate(zip(tabs, pair, strict=True)):
                    ids.append(run_id_after(tab, scenario, previous[i], 300))
                wall = time.monotonic() - clicked
                previous = ids
                metas = [json.loads((state / "runs" / r / "run.json").read_text()) for r in ids]
                overlap = min(m["finished_at"] for m in metas) - max(m["started_at"] for m in metas)
                problems = [
                    f"{s}: {p}"
                    for r, s in zip(ids, pair, strict=True)
                    for p in check_run(state / "runs", r, s)
                ]
                rows.append((round_no, pair, wall, overlap, problems))
                print(
                    f"round {round_no}: {pair[0]} + {pair[1]} in {wall:.1f} s, overlapped "
                    f"{overlap:.1f} s, problems: {problems or 'none'}",
                    flush=True,
                )
            browser.close()
    finally:
        if load is not None:
            load.terminate()
            load.wait(10)
            lines = load.stdout.read().splitlines()
            reports = [line for line in lines if "records/sec" in line]
            print("background load, last report:", reports[-1] if reports else lines[-5:])
        server.terminate()
        server.wait(30)
    print(
        "\n| round | session A | session B | both done after (s) | runs overlapped (s) | problems |"
    )
    print("|---|---|---|---|---|---|")
    for round_no, (a, b), wall, overlap, problems in rows:
        found = "; ".join(problems) or "none"
        print(f"| {round_no} | {a} | {b} | {wall:.1f} | {overlap:.1f} | {found} |")
    bad = sum(1 for row in rows if row[4])
    print(
        f"\n{len(rows)} rounds, {2 * len(rows)} runs in {time.monotonic() - began:.0f} s with "
        f"{args.load_rate} background records/s; rounds with a problem: {bad}. "
        f"Load average at the end: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}."
    )


if __name__ == "__main__":
    main()
