"""End to end in a real headless Chromium: the dashboard served by `streamlit run`.

Opens every page, runs a scenario in the Failure lab on a real embedded cluster that the
dashboard starts itself, sees the verdicts and a rendered chart, and finds no error box.
Screenshots go to test-artifacts/ (README.md and docs/ show some of them).

Every check waits for what it asserts (Playwright's `expect`, or `wait_for_metric` below):
a busy machine renders late, and a person looking a moment later would see it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from engine.base import paths
from engine.commands.dashboard import serve_dashboard

pytestmark = pytest.mark.kafka

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SERVER: dict[str, Path] = {}  # the dashboard's runs folder, for checks behind the pages
ARTIFACTS = paths.REPO_ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[str]:
    if CHROMIUM is None:
        pytest.fail("Chromium is installed by `./lab test` (Debian package chromium)")
    state = tmp_path_factory.mktemp("dash")
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(state / "state"),
        "LAB_RUNS_DIR": str(state / "runs"),
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "1",
    }
    SERVER["runs"] = state / "runs"
    server, url = serve_dashboard(env)
    try:
        yield url
    finally:
        server.terminate()
        server.wait(30)
        # The dashboard's cluster ends with it (watchdog); give it the promised 10 s.
        time.sleep(2)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("Chromium is installed by `./lab test` (Debian package chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, dashboard) -> Iterator:
    tab = browser.new_page(viewport={"width": 1500, "height": 2600})
    tab.set_default_timeout(120_000)
    expect.set_options(timeout=120_000)
    yield tab
    tab.close()


def metric_texts(tab) -> list[str]:
    return tab.locator("[data-testid='stMetric']").all_inner_texts()


def wait_for_metric(
    tab, label: str, holds: Callable[[str], bool], timeout: float = 60.0
) -> list[str]:
    """Wait until a metric card labelled `label` shows a value for which `holds` is true."""
    deadline = time.monotonic() + timeout
    while True:
        texts = metric_texts(tab)
        values = [t.split()[-1] for t in texts if t.startswith(label) and t.split()]
        if any(holds(v) for v in values):
            return texts
        if time.monotonic() > deadline:
            raise AssertionError(f"no '{label}' card as expected within {timeout:.0f} s: {texts}")
        time.sleep(0.25)


def no_error_box(tab) -> None:
    assert tab.locator("[data-testid='stException']").count() == 0
    errors = tab.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, errors.all_inner_texts()


def test_home_shows_the_levels_and_the_cluster_comes_up(page, dashboard):
    page.goto(dashboard)
    page.get_by_role("heading", name="Kafka failure lab").wait_for()
    # The dashboard starts the embedded cluster by itself and says so in the sidebar.
    page.get_by_text("node 1: running").wait_for(timeout=180_000)
    for title in ("At most once", "At least once", "Exactly once"):
        expect(page.get_by_role("heading", name=title)).to_have_count(1)
    no_error_box(page)
    page.screenshot(path=str(ARTIFACTS / "home.png"), full_page=True)


def test_failure_lab_runs_ack_loss_and_shows_verdicts(page, dashboard):
    page.goto(f"{dashboard}/failure_lab")
    page.get_by_role("heading", name="Failure lab").wait_for()
    page.get_by_text("node 1: running").wait_for(timeout=180_000)
    page.get_by_role("button", name="▶ Run").click()
    page.get_by_text("Done: run").wait_for(timeout=180_000)
    # The page draws the results before it says "Done", so they are there already.
    assert page.locator("[data-testid='stMetric']").count() > 0
    page.locator("[data-testid='stDataFrame']").first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    wait_for_metric(page, "Duplicates", lambda v: v == "1")  # at-least-once's retried batch
    no_error_box(page)
    page.screenshot(path=str(ARTIFACTS / "failure-lab.png"), full_page=True)


def test_replay_shows_the_recorded_run(page, dashboard):
    page.goto(f"{dashboard}/replay")
    page.get_by_role("heading", name="Replay").wait_for()
    page.locator("[data-testid='stMetric']").first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    no_error_box(page)
    page.screenshot(path=str(ARTIFACTS / "replay.png"), full_page=True)


def test_metrics_page_charts_sparks_results_of_the_run(page, dashboard):
    page.goto(f"{dashboard}/metrics")
    page.get_by_role("heading", name="Metrics").wait_for()
    # Spark starts in the background when the dashboard opens, then computes the newest run.
    page.get_by_text("Spark's counts equal the engine's checker").wait_for(timeout=240_000)
    page.locator(".js-plotly-plot").nth(2).wait_for()
    expect(page.get_by_text("Spark read Kafka at")).to_have_count(1)
    no_error_box(page)
    page.screenshot(path=str(ARTIFACTS / "metrics.png"), full_page=True)


def lane(tab, title: str):
    """A level's lane in the live view: the bordered column headed by the level's title."""
    heading = tab.get_by_role("heading", name=title, exact=True)
    return tab.locator("[data-testid='stColumn']", has=heading).last


def live_readings(tab, title: str, label: str, timeout: float = 120.0) -> list[int]:
    """Read a live counter in one level's lane until it grows; every value read."""
    card = lane(tab, title).locator("[data-testid='stMetric']", has_text=label)
    value = card.locator("[data-testid='stMetricValue']").first
    readings: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reading = int(value.inner_text(timeout=2000))
        except (PlaywrightError, ValueError):  # redrawn at that moment, or not there yet
            time.sleep(0.1)
            continue
        if any(n < reading for n in readings):
            return [*readings, reading]
        readings.append(reading)
        time.sleep(0.15)
    raise AssertionError(f"'{label}' of {title} did not grow in {timeout:.0f} s: {readings}")


def test_failure_lab_shows_the_run_live_before_it_is_done(browser, dashboard):
    """On a projector-sized screen: every level's lane ticks, and the SIGKILL shows, before
    "Done"; the levels run side by side, so all their lanes are drawn at once."""
    tab = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        tab.set_default_timeout(120_000)
        tab.goto(f"{dashboard}/failure_lab")
        tab.get_by_role("heading", name="Failure lab").wait_for()
        tab.get_by_text("node 1: running").wait_for(timeout=180_000)
        tab.get_by_role("combobox", name="Scenario").click()
        tab.get_by_role("option", name="consumer-crash").click()
        tab.get_by_role("heading", name="The processor dies between its output").wait_for()
        # A slower processor (30 messages x 150 ms, about 5 s a level), so that a loaded
        # machine still draws the lanes while the counters move: at 60 ms a CI run under
        # load drew its first reading at the final value, and the lanes were gone.
        tab.get_by_text("Parameters").click()
        work = tab.get_by_role("spinbutton", name="Processing time per message (ms)")
        work.fill("150")
        work.press("Enter")
        tab.get_by_text("Parameters").click()  # folded again: the lanes need the screen
        tab.get_by_role("button", name="▶ Run").click()
        done = tab.get_by_text("Done: run")
        readings = live_readings(tab, "At least once", "Outputs written")
        expect(done).to_have_count(0)  # the counter grew while the run was still going
        for title in ("At most once", "Exactly once", "Idempotency key at the consumer"):
            expect(lane(tab, title).locator("[data-testid='stMetric']")).to_have_count(4)
        # The fault point in the room's words (its raw name, commit_gap #2, in small type).
        kill = tab.get_by_text("processor killed (SIGKILL) in the middle of its 2nd batch").first
        expect(kill).to_be_visible()
        tab.screenshot(path=str(ARTIFACTS / "failure-lab-live-1080.png"))
        done.wait_for(timeout=240_000)
        no_error_box(tab)
        tab.screenshot(path=str(ARTIFACTS / "failure-lab-done-1080.png"), full_page=True)
        assert readings[-1] > 0
    finally:
        tab.close()


def boxes(tab, selector: str) -> list[dict[str, float]]:
    return [b for b in (el.bounding_box() for el in tab.locator(selector).all()) if b]


def test_the_projector_view_puts_the_teaching_numbers_on_the_first_screen(browser, dashboard):
    """`?projector=1` at 1920x1080: no sidebar, and after Run every level's card (with the
    numbers ack-loss teaches and its verdict sentence) lies inside the first screen."""
    tab = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        tab.set_default_timeout(120_000)
        tab.goto(f"{dashboard}/failure_lab?projector=1")
        tab.get_by_role("heading", name="Failure lab").wait_for()
        expect(tab.locator("[data-testid='stSidebar']")).to_be_hidden()
        run = tab.get_by_role("button", name="▶ Run")
        expect(run).to_be_enabled(timeout=180_000)  # the cluster is up
        run.click()
        # The projector's words: no run id on it.
        tab.get_by_text("Done: every message judged").wait_for(timeout=180_000)
        cards = tab.locator(".lab-card")
        expect(cards).to_have_count(4)
        at_least_once = cards.filter(has_text="at-least-once")
        expect(at_least_once).to_contain_text("1 duplicate:")
        expect(at_least_once.locator(".lab-number.lab-alarm")).to_have_text("1")
        expect(cards.filter(has_text="idempotency-key")).to_contain_text("duplicates absorbed")
        tab.screenshot(path=str(ARTIFACTS / "presenter-1080.png"))
        for box in boxes(tab, ".lab-card"):
            assert box["y"] >= 0 and box["y"] + box["height"] <= 1080, box
        # The timeline follows on the same screen (its top at least).
        tab.locator(".js-plotly-plot").first.wait_for()
        assert boxes(tab, ".js-plotly-plot")[0]["y"] < 1080
        no_error_box(tab)
        # The address keeps the view across pages, and the way out is on the page.
        tab.get_by_role("button", name="Leave the projector view").click()
        expect(tab.locator("[data-testid='stSidebar']")).to_be_visible()
        # A link made when the view was called presenter mode opens it under its new name.
        tab.goto(f"{dashboard}/failure_lab?presenter=1")
        tab.get_by_role("heading", name="Failure lab").wait_for()
        expect(tab.locator("[data-testid='stSidebar']")).to_be_hidden()
        expect(tab).to_have_url(re.compile(r"projector=1"))
        assert "presenter=" not in tab.url
    finally:
        tab.close()


def test_the_lesson_scrolls_to_its_explanation_after_the_run(browser, dashboard):
    """After Run, the screen starts at "3 · Explain": the verdict, the count the answer rests
    on and the explanation, without scrolling by hand."""
    tab = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        tab.set_default_timeout(120_000)
        tab.goto(f"{dashboard}/lesson")
        tab.get_by_role("heading", name="Delivery guarantees").first.wait_for()
        tab.get_by_text("node 1: running").wait_for(timeout=180_000)
        tab.get_by_role("radiogroup").get_by_text("two", exact=True).click()
        tab.get_by_role("button", name="Lock in the prediction").click()
        tab.get_by_role("button", name="▶ Run the scenario").click()
        tab.get_by_text("The room was right: the run shows “two”.").wait_for(timeout=180_000)
        heading = tab.get_by_role("heading", name="3 · Explain")
        expect(heading).to_be_in_viewport(timeout=10_000)
        # The page keeps the heading at the top while it settles (up to 12 s): wait for the
        # heading to reach the top, then check it is there.
        tab.wait_for_function(
            "() => { const h = document.getElementById('explain');"
            " if (!h) return false; const y = h.getBoundingClientRect().top;"
            " return 0 <= y && y < 300; }",
            timeout=15_000,
        )
        box = heading.bounding_box()
        assert box is not None and 0 <= box["y"] < 300, box
        tab.screenshot(path=str(ARTIFACTS / "lesson-explain-1080.png"))
        no_error_box(tab)
        # The guide sends the teacher to Metrics mid-class: through the sidebar (the same
        # session) to three other pages and back, the step, the vote and the run are kept.
        for page, heading in (
            ("Free play", "Free play"),
            ("Metrics", "Metrics"),
            ("Replay", "Replay"),
            ("Lesson", "Delivery guarantees"),
        ):
            tab.get_by_role("link", name=page, exact=True).click()
            tab.get_by_role("heading", name=heading).first.wait_for()
        tab.get_by_text("The room was right: the run shows “two”.").wait_for()
        expect(tab.get_by_role("radiogroup").get_by_role("radio", name="two")).to_be_checked()
        expect(tab.get_by_role("button", name="▶ Run this step again")).to_be_visible()
        no_error_box(tab)
    finally:
        tab.close()


def cut_labels(tab) -> list[str]:
    """Metric labels whose text does not fit their box (shown with an ellipsis)."""
    return tab.evaluate(
        """() => [...document.querySelectorAll("[data-testid='stMetricLabel'] *")]
            .filter(el => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
            .map(el => el.innerText)"""
    )


@pytest.mark.parametrize(("width", "height", "zoom"), [(1920, 1080, 1.0), (1280, 720, 1.5)])
def test_no_card_label_is_cut_off_at_1080p_or_at_150_percent_zoom(
    browser, dashboard, width, height, zoom
):
    """150% zoom of a 1920x1080 screen is a 1280x720 CSS viewport at 1.5 device pixels."""
    tab = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=zoom)
    try:
        tab.set_default_timeout(120_000)
        tab.goto(f"{dashboard}/failure_lab")
        run = tab.get_by_role("button", name="▶ Run")
        expect(run).to_be_enabled(timeout=180_000)
        run.click()
        tab.get_by_text("Done: run").wait_for(timeout=180_000)
        # (The live lanes' cards are folded away in the status box by now.)
        delivered = tab.locator("[data-testid='stMetric']", has_text="Delivered")
        expect(delivered).to_have_count(4)  # 4 levels, 6 cards each
        expect(delivered.first).to_be_visible()
        assert cut_labels(tab) == []
        tab.goto(f"{dashboard}/replay")
        expect(tab.locator("[data-testid='stMetric']", has_text="Delivered").first).to_be_visible()
        assert cut_labels(tab) == []
        tab.screenshot(path=str(ARTIFACTS / f"labels-{width}.png"), full_page=True)
    finally:
        tab.close()


def test_two_sessions_run_scenarios_at_once_and_their_runs_do_not_mix(browser, dashboard):
    """Two people on the same dashboard press Run at the same moment, on different scenarios."""
    tabs = [browser.new_page(viewport={"width": 1500, "height": 2600}) for _ in "ab"]
    try:
        for tab in tabs:
            tab.set_default_timeout(120_000)
            tab.goto(f"{dashboard}/failure_lab")
            tab.get_by_role("heading", name="Failure lab").wait_for()
            tab.get_by_text("node 1: running").wait_for(timeout=180_000)
        tabs[1].get_by_role("combobox", name="Scenario").click()
        tabs[1].get_by_role("option", name="network-blip").click()
        tabs[1].get_by_role("heading", name="A network blip while a batch is in flight").wait_for()
        for tab in tabs:
            tab.get_by_role("button", name="▶ Run").click()
        done = []
        for tab in tabs:
            tab.get_by_text("Done: run").wait_for(timeout=240_000)
            done.append(tab.get_by_text("Done: run").inner_text().split("Done: run")[-1].strip())
            no_error_box(tab)
        assert done[0] != done[1]
        # Each page shows its own run: 20 messages for ack-loss, 47 for network-blip.
        for tab, delivered in zip(tabs, ("20", "47"), strict=True):
            wait_for_metric(tab, "Delivered", lambda v, d=delivered: v == d)
        runs = {}
        for run_id in done:
            meta = json.loads((SERVER["runs"] / run_id / "run.json").read_text())
            result = json.loads((SERVER["runs"] / run_id / "result.json").read_text())
            runs[meta["scenario"]] = (meta, result)
        assert set(runs) == {"ack-loss", "network-blip"}
        (a, a_result), (b, b_result) = runs["ack-loss"], runs["network-blip"]
        assert a["status"] == b["status"] == "complete"
        assert a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"], (
            "the two runs overlapped in time"
        )
        for result, run_id in ((a_result, a["run_id"]), (b_result, b["run_id"])):
            for level in result["results"].values():
                assert run_id in level["sink_topic"], "each run reads only its own topics"
        assert b_result["results"]["exactly-once"]["duplicates"] == 0
        assert a_result["results"]["at-least-once"]["duplicates"] >= 1
        tabs[1].screenshot(path=str(ARTIFACTS / "two-sessions.png"), full_page=True)
    finally:
        for tab in tabs:
            tab.close()


@pytest.mark.parametrize(
    ("path", "heading"),
    [
        ("zombie", "Zombie fencing"),
        ("log_views", "Log views"),
        ("lesson", "Delivery guarantees"),
        ("cost", "Cost of guarantees"),
    ],
)
def test_every_other_page_opens_without_an_error(page, dashboard, path, heading):
    page.goto(f"{dashboard}/{path}")
    page.get_by_role("heading", name=heading).first.wait_for()
    page.get_by_text("node 1: running").wait_for(timeout=180_000)
    no_error_box(page)
    page.screenshot(path=str(ARTIFACTS / f"{path}.png"), full_page=True)


PAGES = [
    ("", "Kafka failure lab"),
    ("failure_lab", "Failure lab"),
    ("free_play", "Free play"),
    ("metrics", "Metrics"),
    ("cost", "Cost of guarantees"),
    ("zombie", "Zombie fencing"),
    ("log_views", "Log views"),
    ("lesson", "Delivery guarantees"),
    ("replay", "Replay"),
]


@pytest.mark.parametrize(("path", "heading"), PAGES)
def test_a_link_to_a_page_opens_that_page_on_a_new_servers_first_visit(
    browser, tmp_path, path, heading
):
    """A link handed to a class is the first request a freshly started dashboard gets."""
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(tmp_path / "state"),
        "LAB_RUNS_DIR": str(tmp_path / "runs"),
        "LAB_AUTOSTART": "0",  # the page, not the cluster, is under test
        "LAB_SPARK_AUTOSTART": "0",
    }
    server, url = serve_dashboard(env)
    tab = browser.new_page(viewport={"width": 1500, "height": 1200})
    try:
        tab.goto(f"{url}/{path}")
        tab.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
        assert tab.url.rstrip("/") == f"{url}/{path}".rstrip("/"), "the address stayed the same"
        # Still that page a moment later: nothing sent the browser elsewhere.
        time.sleep(1.0)
        expect(tab.get_by_role("heading", name=heading).first).to_be_visible()
        assert tab.url.rstrip("/") == f"{url}/{path}".rstrip("/")
        if path:  # the sidebar marks the page as the current one
            current = tab.locator("[data-testid='stSidebarNav'] a[aria-current='page']")
            expect(current).to_have_count(1)
    finally:
        tab.close()
        server.terminate()
        server.wait(30)


def test_restart_with_3_nodes_then_runs_broker_failover(browser, dashboard):
    """The button a scenario that needs 3 nodes offers: restart, with progress, then the run.

    Last in this file: the module's dashboard has 3 nodes afterwards.
    """
    tab = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        tab.set_default_timeout(120_000)
        tab.goto(f"{dashboard}/failure_lab")
        tab.get_by_text("node 1: running").wait_for(timeout=180_000)
        tab.get_by_role("combobox", name="Scenario").click()
        tab.get_by_role("option", name="broker-failover").click()
        expect(tab.get_by_text("needs a 3-node cluster; the running one has 1")).to_be_visible()
        expect(tab.get_by_role("button", name="▶ Run")).to_be_disabled()
        tab.get_by_role("button", name="Restart the cluster with 3 nodes and run").click()
        expect(tab.get_by_text("Restarting the cluster, then running the scenario")).to_be_visible()
        tab.get_by_text("Done: run").wait_for(timeout=400_000)
        for node in (1, 2, 3):
            expect(tab.get_by_text(f"node {node}: running")).to_be_visible(timeout=60_000)
        wait_for_metric(tab, "Lost", lambda v: v == "0")  # at-least-once kept every message
        no_error_box(tab)
    finally:
        tab.close()
