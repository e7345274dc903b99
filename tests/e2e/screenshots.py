"""Make the README's screenshots again, at 1920x1080, from today's pages:

    .venv/bin/python -m tests.e2e.screenshots [NAME...]

It starts its own dashboard (headless, a fresh runs folder, the embedded 1-node cluster and
Spark, as `./lab dashboard` does) and drives Chromium through real runs, then writes
docs/screenshots/NAME.png, the first screen of each (no full-page shots: the first screen is
what the room sees):

- home: the Guarantees page with the cluster panel;
- live-view: the Failure lab while consumer-crash runs (a 150 ms processor, so the lanes are
  caught mid-run);
- failure-lab: the Failure lab after ack-loss, normal view;
- presenter: the same after ack-loss in the projector view (`?projector=1`);
- viewer-following: a rehearsal viewer's tab (`?rehearse=viewer`) while the presenter's tab
  runs consumer-crash;
- lesson-explain: the Lesson's first step right after its run;
- free-play: Free play mid-stream, after a dropped ack and a killed processor;
- metrics: the Metrics page once Spark has computed the newest run;
- metrics-live (only when named, alone): the Metrics page while Spark's streaming queries
  follow consumer-crash (150 ms processor), on a dashboard with LAB_STREAMING_METRICS=1.

Names given on the command line make only those. Chromium is Debian's (`./lab test` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

from engine.base import paths
from engine.commands.dashboard import serve_dashboard
from engine.scenarios.scenario import list_scenarios, load_scenario
from tests.e2e.walk_checks import wait_until_drawn

OUT = paths.REPO_ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1920, "height": 1080}
WAIT_MS = 300_000
SETTLE_S = 2.0  # the page's own scroll to its results settles within 1.5 s (SCROLL_SCRIPT)


def settle(tab: Page) -> None:
    """Let the page finish drawing and scrolling its results into view before the picture."""
    wait_until_drawn(tab, WAIT_MS)
    tab.wait_for_timeout(SETTLE_S * 1000)


def new_tab(browser, url: str, path: str) -> Page:
    tab = browser.new_context(viewport=VIEWPORT).new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.goto(f"{url}/{path}")
    tab.get_by_text("node 1: running").first.wait_for(state="attached")
    wait_until_drawn(tab, WAIT_MS)
    return tab


def choose(tab: Page, scenario: str, processing_ms: int | None = None) -> None:
    tab.get_by_role("combobox", name="Scenario").click()
    # The picker's line starts with the name, then its group, nodes and length.
    tab.get_by_role("option", name=re.compile(rf"^{re.escape(scenario)}\b")).first.click()
    # The page redrawn for it first: a fold opened during the rerun is folded again.
    title = load_scenario(list_scenarios()[scenario]).title
    tab.get_by_role("heading", name=title).wait_for()
    if processing_ms is not None:
        tab.get_by_text("Parameters").click()
        work = tab.get_by_role("spinbutton", name="Processing time per message (ms)")
        work.fill(str(processing_ms))
        work.press("Enter")
        tab.get_by_text("Parameters").click()  # folded again: the lanes need the screen
    wait_until_drawn(tab, WAIT_MS)  # the page redrawn for that choice before Run is pressed


def lane_counter_moved(tab: Page) -> None:
    """Wait until the live lanes show an output written: the run is under way."""
    heading = tab.get_by_role("heading", name="At least once", exact=True)
    lane = tab.locator("[data-testid='stColumn']", has=heading).last
    card = lane.locator("[data-testid='stMetric']", has_text="Outputs written")
    value = card.locator("[data-testid='stMetricValue']").first
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        try:
            if int(value.inner_text(timeout=2000)) >= 3:
                return
        except (ValueError, Exception):  # not drawn yet, or redrawn at that moment
            pass
        time.sleep(0.2)
    raise TimeoutError("the live lanes never showed an output written")


def home(browser, url: str) -> None:
    tab = new_tab(browser, url, "")
    tab.get_by_role("heading", name="Kafka failure lab").wait_for()
    tab.screenshot(path=str(OUT / "home.png"))


def live_view(browser, url: str) -> None:
    tab = new_tab(browser, url, "failure_lab")
    choose(tab, "consumer-crash", processing_ms=150)
    tab.get_by_role("button", name="▶ Run").click()
    lane_counter_moved(tab)
    tab.screenshot(path=str(OUT / "live-view.png"))
    tab.get_by_text("Done:").first.wait_for()


def failure_lab(browser, url: str) -> None:
    tab = new_tab(browser, url, "failure_lab")
    tab.get_by_role("button", name="▶ Run").click()
    tab.get_by_text("Done: run").wait_for()
    settle(tab)
    tab.screenshot(path=str(OUT / "failure-lab.png"))


def presenter(browser, url: str) -> None:
    tab = new_tab(browser, url, "failure_lab?projector=1")
    tab.get_by_role("button", name="▶ Run").click()
    tab.get_by_text("Done: every message judged").wait_for()
    settle(tab)
    tab.screenshot(path=str(OUT / "presenter.png"))


def viewer_following(browser, url: str) -> None:
    lead = new_tab(browser, url, "failure_lab")
    viewer = new_tab(browser, url, "failure_lab?rehearse=viewer")
    # A viewer, following (what it shows before the run depends on the runs made before).
    viewer.get_by_text("Rehearsal: this tab is a viewer").first.wait_for()
    choose(lead, "consumer-crash", processing_ms=150)
    lead.get_by_role("button", name="▶ Run").click()
    lane_counter_moved(viewer)
    viewer.screenshot(path=str(OUT / "viewer-following.png"))
    lead.get_by_text("Done:").first.wait_for()


def lesson_explain(browser, url: str) -> None:
    tab = new_tab(browser, url, "lesson")
    tab.get_by_role("radiogroup").get_by_text("two", exact=True).click()
    tab.get_by_role("button", name="Lock in the prediction").click()
    tab.get_by_role("button", name="▶ Run the scenario").click()
    tab.get_by_role("heading", name="3 · Explain").wait_for()
    settle(tab)
    tab.screenshot(path=str(OUT / "lesson-explain.png"))


def free_play(browser, url: str) -> None:
    tab = new_tab(browser, url, "free_play")
    tab.get_by_role("button", name="▶ Start free play").click()
    strikes = tab.locator("[class*='st-key-fp_strike_'] button")
    expect(strikes.first).to_be_enabled(timeout=120_000)  # the stream has started
    for _ in range(2):  # the first two strikes the page offers now, in its order
        enabled = tab.locator("[class*='st-key-fp_strike_'] button:enabled").first
        expect(enabled).to_be_visible(timeout=60_000)
        enabled.click()
        tab.wait_for_timeout(3000)  # a person's pause between two strikes, for the picture
    tab.locator("[data-testid='stTable']").first.wait_for()
    tab.screenshot(path=str(OUT / "free-play.png"))
    tab.get_by_role("button", name="⏹ Stop").click()
    tab.get_by_text("Free play ended").wait_for()


def metrics(browser, url: str) -> None:
    tab = new_tab(browser, url, "metrics")
    tab.get_by_text("Spark's counts equal the engine's checker").wait_for()
    settle(tab)
    tab.screenshot(path=str(OUT / "metrics.png"))


def metrics_live(browser, url: str) -> None:
    lead = new_tab(browser, url, "failure_lab")
    lead.get_by_role("button", name="▶ Run").click()  # a first run: Spark is up after it
    lead.get_by_text("Done: run").wait_for()
    watch = new_tab(browser, url, "metrics")
    watch.get_by_text("Final numbers").first.wait_for()  # Spark up: the next run is followed
    choose(lead, "consumer-crash", processing_ms=150)
    lead.get_by_role("button", name="▶ Run").click()
    watch.get_by_text("what Spark has read so far").wait_for()
    watch.get_by_text("Counted by Spark").wait_for()  # Spark has read some records
    watch.wait_for_timeout(3000)  # a refresh or two later, while the run still runs
    watch.get_by_text("what Spark has read so far").wait_for()
    watch.screenshot(path=str(OUT / "metrics-live.png"))
    lead.get_by_text("Done:").first.wait_for()


SHOTS: dict[str, Callable] = {
    "home": home,
    "live-view": live_view,
    "failure-lab": failure_lab,
    "presenter": presenter,
    "viewer-following": viewer_following,
    "lesson-explain": lesson_explain,
    "free-play": free_play,
    "metrics": metrics,  # last: Spark computes the newest run, made above
}
# Made only when named, alone: their dashboard follows runs with Spark's streaming queries
# (LAB_STREAMING_METRICS=1), which would change the other pictures.
FOLLOWED_SHOTS: dict[str, Callable] = {"metrics-live": metrics_live}


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - set(SHOTS) - set(FOLLOWED_SHOTS))
    if unknown:
        every = [*SHOTS, *FOLLOWED_SHOTS]
        print(f"No such screenshot: {', '.join(unknown)}; they are {', '.join(every)}.")
        return 2
    followed = bool(names) and set(names) <= set(FOLLOWED_SHOTS)
    if set(names) & set(FOLLOWED_SHOTS) and not followed:
        print(f"Make {', '.join(FOLLOWED_SHOTS)} on its own: its dashboard follows runs.")
        return 2
    shots = FOLLOWED_SHOTS if followed else SHOTS
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("Chromium is missing: `./lab test` installs it (Debian package chromium).")
        return 2
    state = Path(tempfile.mkdtemp(prefix="lab-screenshots-"))
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(state / "state"),
        "LAB_RUNS_DIR": str(state / "runs"),
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "1",
        "LAB_STREAMING_METRICS": "1" if followed else "0",
    }
    server, url = serve_dashboard(env)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for name, shoot in shots.items():
                if names and name not in names:
                    continue
                began = time.monotonic()
                shoot(browser, url)
                print(f"{OUT / name}.png ({time.monotonic() - began:.0f} s)", flush=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(60)
        # The cluster's watchdog ends the cluster and removes its state file; a state folder
        # deleted before that would tell it the cluster was stopped already.
        deadline = time.monotonic() + 60
        while any((state / "state").glob("*/cluster.json")) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not any((state / "state").glob("*/cluster.json")):
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
