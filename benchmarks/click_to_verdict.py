"""Click to verdict in the browser: from pressing ▶ Run to the results on the page.

    .venv/bin/python -m benchmarks.click_to_verdict [--repeats 5] [--scenario NAME ...]

Serves the dashboard (`streamlit run`, its own embedded cluster: 1 node, then 3 for the
scenarios that need them), opens the Failure lab in Debian's Chromium at 1920x1080 through
Playwright, and for each scenario presses Run and waits until the page says "Done: run"
(said only after the results are drawn, pages._run_control.run_live) and a count card shows.
Each scenario is timed `--repeats` times with the levels side by side (the default), and as
many times with LAB_ONE_LEVEL_AT_A_TIME=1 (one level after the other, as before), after one
untimed warm-up run. Prints a Markdown table of medians, minima and maxima.
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

from engine.dashboard import serve_dashboard
from engine.scenario import list_scenarios, load_scenario

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
def dashboard(nodes: int, one_at_a_time: bool) -> Iterator[str]:
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
    server, url = serve_dashboard(env)
    try:
        yield url
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


def measure(names: list[str], nodes: int, repeats: int) -> dict[tuple[str, str], list[float]]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    times: dict[tuple[str, str], list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for mode, one_at_a_time in (("side by side", False), ("one at a time", True)):
            with dashboard(nodes, one_at_a_time) as url:
                tab = browser.new_page(viewport={"width": 1920, "height": 1080})
                tab.set_default_timeout(120_000)
                for name in names:
                    click_to_verdict(tab, url, name)  # warm-up: topics, JIT, page caches
                    runs = [click_to_verdict(tab, url, name) for _ in range(repeats)]
                    times[(name, mode)] = runs
                    print(f"{name} ({mode}): {', '.join(f'{t:.1f}' for t in runs)}", flush=True)
                tab.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scenario", action="append", help="only these (repeatable)")
    args = parser.parse_args()
    names = args.scenario or list(list_scenarios())
    by_nodes: dict[int, list[str]] = {}
    for name in names:
        by_nodes.setdefault(load_scenario(list_scenarios()[name]).nodes, []).append(name)
    times: dict[tuple[str, str], list[float]] = {}
    for nodes, group in sorted(by_nodes.items()):
        times.update(measure(group, nodes, args.repeats))
    print()
    print(
        "| scenario | nodes | target (s) | side by side: median [min–max] (s) | "
        "one at a time: median [min–max] (s) | target met |"
    )
    print("|---|---|---|---|---|---|")
    for nodes, group in sorted(by_nodes.items()):
        for name in group:
            cells = []
            for mode in ("side by side", "one at a time"):
                runs = times[(name, mode)]
                cells.append(f"{statistics.median(runs):.1f} [{min(runs):.1f}–{max(runs):.1f}]")
            median = statistics.median(times[(name, "side by side")])
            target = target_of(name)
            met = "—" if target is None else ("yes" if median <= target else "no")
            shown = "—" if target is None else f"{target:.0f}"
            print(f"| {name} | {nodes} | {shown} | {cells[0]} | {cells[1]} | {met} |")


if __name__ == "__main__":
    main()
