"""Free play in a real headless Chromium at 1920x1080, on the cluster the dashboard starts.

The test starts the stream, clicks each button the 1-node cluster offers, and for each waits
until the live view names the fault (from the run's history) and the counts table moves.
Killing the partition leader needs 3 nodes: on this cluster its button is disabled with the
reason on screen (tests/integration/test_free_play.py kills a leader on 3 nodes).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from engine.base import paths
from engine.commands.dashboard import serve_dashboard

pytestmark = pytest.mark.kafka

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = paths.REPO_ROOT / "test-artifacts"
LEVELS = ("at-most-once", "at-least-once", "exactly-once")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[str]:
    if CHROMIUM is None:
        pytest.fail("Chromium is installed by `./lab test` (Debian package chromium)")
    state = tmp_path_factory.mktemp("free-play")
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(state / "state"),
        "LAB_RUNS_DIR": str(state / "runs"),
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "0",  # this page needs no Spark
    }
    server, url = serve_dashboard(env)
    try:
        yield url
    finally:
        server.terminate()
        server.wait(30)


@pytest.fixture(scope="module")
def tab(dashboard) -> Iterator:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"],
        )
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        page.set_default_timeout(120_000)
        expect.set_options(timeout=120_000)
        yield page
        browser.close()


def counts(tab, row: str) -> dict[str, int]:
    """One row of the live counts table: level -> count, as the page shows it now."""
    table = tab.locator("[data-testid='stTable'] table").first
    header = table.locator("thead th").all_inner_texts()[1:]
    cells = table.locator("tbody tr", has_text=row).first.locator("td").all_inner_texts()
    return dict(zip(header, (int(c) for c in cells), strict=True))


def wait_for_counts(
    tab, row: str, holds: Callable[[dict[str, int]], bool], timeout: float = 90.0
) -> dict[str, int]:
    """Read a row of the counts table until `holds` is true of it (the fragment redraws it)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, int] = {}
    while time.monotonic() < deadline:
        try:
            seen = counts(tab, row)
        except (PlaywrightError, ValueError):  # redrawn at that moment, or not there yet
            seen = {}
        if set(seen) == set(LEVELS) and holds(seen):
            return seen
        time.sleep(0.25)
    raise AssertionError(f"'{row}' not as expected within {timeout:.0f} s: {seen}")


def grew(before: dict[str, int], by: int = 1) -> Callable[[dict[str, int]], bool]:
    return lambda now: all(now[level] >= before[level] + by for level in LEVELS)


def strike(tab, label: str, fault_line: str) -> None:
    """Click a button and wait until the live view shows the fault, read from the history."""
    tab.get_by_role("button", name=label).click()
    expect(tab.get_by_text(fault_line).filter(visible=True).first).to_be_visible()


def test_free_play_strikes_each_fault_and_the_counts_change(tab, dashboard):
    tab.goto(f"{dashboard}/free_play")
    tab.get_by_role("heading", name="Free play").wait_for()
    tab.get_by_text("node 1: running").wait_for(timeout=180_000)
    # The longest time limit: on a busy machine the clicks below must not outlast the stream.
    limit = tab.locator("[data-testid='stSlider']", has_text="Stops by itself after")
    limit.get_by_role("slider").press("End")
    expect(limit.get_by_role("slider")).to_have_value("300")
    tab.get_by_role("button", name="▶ Start free play").click()
    sent = wait_for_counts(tab, "Sent", lambda c: min(c.values()) >= 10)

    # 1 node: the leader cannot be killed, and the page says why.
    expect(tab.get_by_role("button", name="🔌 Kill the partition leader")).to_be_disabled()
    expect(tab.get_by_text("needs a 3-node cluster").filter(visible=True).first).to_be_visible()

    strike(tab, "📉 Drop the next ack", "ack of the Produce request with correlation id")
    # At-most-once does not retry: its producer reports the stored write as failed.
    wait_for_counts(tab, "Failed", lambda c: c["at-most-once"] == 1)

    outputs = counts(tab, "Outputs written")
    strike(tab, "💀 Kill the processor", "processor killed (SIGKILL)")
    replaced = tab.get_by_text("processor 2 started (a replacement)")
    expect(replaced.filter(visible=True).first).to_be_visible()
    wait_for_counts(tab, "Outputs written", grew(outputs, 5))

    strike(tab, "🧊 Freeze the processor", "processor 2 frozen (SIGSTOP)")
    seen = counts(tab, "Seen by the sink")
    strike(tab, "☀️ Wake it", "processor 2 woke (SIGCONT)")
    wait_for_counts(tab, "Seen by the sink", grew(seen, 5))
    wait_for_counts(tab, "Sent", grew(sent, 20))
    tab.screenshot(path=str(ARTIFACTS / "free-play.png"))

    tab.get_by_role("button", name="⏹ Stop").click()
    tab.get_by_text("Free play ended: run").wait_for(timeout=180_000)
    tab.locator("[data-testid='stMetric']").first.wait_for()
    assert tab.locator("[data-testid='stException']").count() == 0
    errors = tab.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, errors.all_inner_texts()
    tab.screenshot(path=str(ARTIFACTS / "free-play-ended.png"), full_page=True)
