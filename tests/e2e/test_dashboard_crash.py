"""The dashboard killed by SIGKILL in the middle of a run, in a real headless Chromium.

For each pipeline (a producer scenario, a processor scenario with its processor frozen by the
zombie fault, free play with a frozen processor) the page starts a run, the test SIGKILLs the
Streamlit server (its pid only, not its process group, as `kill -9` would), and checks that
within 20 s no process of the run and none of the dashboard's cluster is left. A dashboard
started again on the same folders then lists the run as interrupted, and Replay does not
open on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from engine.commands.dashboard import serve_dashboard

pytestmark = pytest.mark.kafka

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
GONE_WITHIN_S = 20.0


def processes_under(folder: Path) -> dict[int, str]:
    """Live processes whose command line names `folder`, with their one-letter state."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder) in cmdline and state not in ("Z", "X"):
            found[int(proc.name)] = state
    return found


def wait_for(what: str, holds: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("Chromium is installed by `./lab test` (Debian package chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        yield browser
        browser.close()


def start_producer_scenario(tab, url: str) -> None:
    """producer-crash, with more messages so that the kill lands while it runs."""
    tab.goto(f"{url}/failure_lab")
    tab.get_by_role("heading", name="Failure lab").wait_for()
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name="producer-crash").click()
    tab.get_by_role("heading", name="The producer dies before its ack arrives").wait_for()
    tab.get_by_text("Parameters").click()
    messages = tab.get_by_role("spinbutton", name="Messages", exact=True)
    messages.fill("5000")
    messages.press("Enter")
    tab.get_by_role("button", name="▶ Run").click()


def start_zombie_scenario(tab, url: str) -> None:
    """zombie: the processor is frozen (SIGSTOP) for 4 s, and then the kill lands."""
    tab.goto(f"{url}/failure_lab")
    tab.get_by_role("heading", name="Failure lab").wait_for()
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name=re.compile(r"^zombie — ")).click()  # name, group, nodes
    tab.get_by_role("button", name="▶ Run").click()


def start_free_play(tab, url: str) -> None:
    """Free play, then 🧊 Freeze the processor: the kill lands on a frozen client."""
    tab.goto(f"{url}/free_play")
    tab.get_by_role("heading", name="Free play").wait_for()
    tab.get_by_role("button", name="▶ Start free play").click()
    tab.get_by_role("button", name="🧊 Freeze the processor").click(timeout=120_000)


PIPELINES = [
    ("producer", start_producer_scenario, False),
    ("processor", start_zombie_scenario, True),
    ("free play", start_free_play, True),
]


def test_a_killed_dashboard_leaves_nothing_running_and_its_runs_interrupted(browser, tmp_path):
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(tmp_path / "state"),
        "LAB_RUNS_DIR": str(tmp_path / "runs"),
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "0",
    }
    runs, state = tmp_path / "runs", tmp_path / "state"
    server, url = serve_dashboard(env)
    killed_runs: list[str] = []
    timings: list[str] = []
    try:
        for name, start, frozen in PIPELINES:
            tab = browser.new_page(viewport={"width": 1500, "height": 2000})
            tab.set_default_timeout(180_000)
            expect.set_options(timeout=180_000)
            tab.goto(url)
            tab.get_by_text("node 1: running").wait_for(timeout=240_000)
            if killed_runs:  # the dashboard started again: the last run is interrupted
                assert_interrupted(tab, url, runs / killed_runs[-1])
            before = {p.name for p in runs.iterdir()} if runs.is_dir() else set()
            start(tab, url)

            def started(before: set[str] = before, frozen: bool = frozen) -> bool:
                clients = processes_under(runs)
                return len(clients) >= 2 and (not frozen or "T" in clients.values())

            wait_for(f"{name}: clients running (one frozen: {frozen})", started, 180)
            (run_id,) = {p.name for p in runs.iterdir()} - before
            cluster = processes_under(state)
            assert cluster, "the dashboard's cluster (JVM, proxy) runs under its state folder"
            killed_at = time.monotonic()
            os.kill(server.pid, signal.SIGKILL)
            server.wait(10)
            tab.close()
            wait_for(
                f"{name}: no client, JVM or proxy left after the dashboard's SIGKILL",
                lambda: not processes_under(runs) and not processes_under(state),
                GONE_WITHIN_S,
            )
            timings.append(f"{name}: {time.monotonic() - killed_at:.1f} s")
            killed_runs.append(run_id)
            server, url = serve_dashboard(env)
        tab = browser.new_page(viewport={"width": 1500, "height": 2000})
        tab.goto(url)
        tab.get_by_role("heading", name="Kafka failure lab").wait_for(timeout=120_000)
        assert_interrupted(tab, url, runs / killed_runs[-1])
        tab.close()
        print("gone after the dashboard's SIGKILL:", "; ".join(timings))
    finally:
        server.terminate()
        server.wait(30)
        for pid in [*processes_under(runs), *processes_under(state)]:
            os.kill(pid, signal.SIGKILL)  # never left to the next test, even on failure


def assert_interrupted(tab, url: str, folder: Path) -> None:
    """run.json says interrupted; Replay lists it so, does not open on it, says so when chosen."""
    tab.goto(f"{url}/replay")
    tab.get_by_role("heading", name="Replay").wait_for()
    meta = json.loads((folder / "run.json").read_text())
    assert meta["status"] == "interrupted", meta
    assert not (folder / "result.json").exists()
    box = tab.get_by_role("combobox", name="Run")
    box.wait_for()
    shown = tab.locator("[data-testid='stSelectbox']").first.inner_text()
    assert "interrupted" not in shown, shown
    box.click()
    options = tab.get_by_role("option").all_inner_texts()
    chosen = [o for o in options if "interrupted" in o]
    assert chosen, options
    tab.get_by_role("option", name=chosen[0]).click()
    tab.get_by_text("This run was interrupted").first.wait_for()
    assert tab.locator("[data-testid='stException']").count() == 0
