"""A room's load: the presenter runs ack-loss and zombie while viewers follow in Chromium.

    .venv/bin/python -m benchmarks.room_load [--viewers 30] [--repeats 3] [--client ws|browser]

Serves the dashboard bound to 0.0.0.0 with a presenter key (reached through 127.0.0.1), as
`LAB_ADDRESS=0.0.0.0 ./lab dashboard` serves a room, with its own 1-node cluster. One
Chromium page is the presenter; the viewers are further pages, each in its own browser
context (its own Streamlit session), open on the Failure lab and following. The viewers are
clients of Streamlit's websocket protocol by default (benchmarks/ws_viewer.py): they ask of
the server exactly what a browser asks (the page, then each fragment at the interval the
server sets) without drawing anything. Thirty Chromium pages do not fit on two cores beside
the dashboard and the run: with 5 of them, the presenter's ack-loss went from 2.7 to 8.5 s,
the browsers' rendering taking the CPU the run needs. `--client browser` uses Chromium pages.

For each scenario: the presenter's click-to-verdict (Run pressed until "Done: run" and a count
card) with no viewers, then with the viewers following; for each viewer, when its page first
showed the presenter's run's result (an in-page poll every 50 ms notes the moment), minus the
moment the presenter's page showed it. Also the dashboard process's memory (VmRSS, with its
children excluded) with and without the viewers. Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.ws_viewer import WsViewer
from engine.dashboard import serve_dashboard
from engine.room import KEY_ENV, make_key

SCENARIOS = ("ack-loss", "zombie")
# In each viewer page: the first moment its text names a run's result, per run id.
WATCH_SCRIPT = """
window.__seen = {};
setInterval(() => {
  const text = document.body ? document.body.innerText : "";
  for (const m of text.matchAll(/The presenter's latest run[\\s\\S]*?Run (\\S+-[0-9a-f]{4})/g)) {
    if (!(m[1] in window.__seen)) window.__seen[m[1]] = Date.now() / 1000;
  }
}, 50);
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def presenter_run(tab, url: str, key: str, name: str) -> tuple[float, float, str]:
    """(click-to-verdict seconds, the moment the verdict showed, run id).

    Each load of the page is a new session, so it carries the presenter link's key.
    """
    from playwright.sync_api import expect

    tab.goto(f"{url}/failure_lab?key={key}")
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name=name, exact=True).click()
    run = tab.get_by_role("button", name="▶ Run")
    expect(run).to_be_enabled(timeout=300_000)
    began = time.monotonic()
    run.click()
    done = tab.get_by_text("Done: run")
    done.wait_for(timeout=300_000)
    tab.locator("[data-testid='stMetric']", has_text="Delivered").first.wait_for()
    shown_at, elapsed = time.time(), time.monotonic() - began
    return elapsed, shown_at, done.inner_text().split("Done: run")[-1].strip()


class Room:
    """The viewers: websocket clients on their own event loop, or Chromium pages."""

    def __init__(self, url: str, count: int, client: str, browser) -> None:
        self.url, self.count, self.client, self.browser = url, count, client, browser
        self.pages: list = []
        self.viewers: list[WsViewer] = []
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread: threading.Thread | None = None

    def open(self) -> None:
        if self.client == "browser":
            for _ in range(self.count):
                context = self.browser.new_context(viewport={"width": 1280, "height": 800})
                context.add_init_script(WATCH_SCRIPT)
                page = context.new_page()
                page.set_default_timeout(300_000)
                page.goto(f"{self.url}/failure_lab")
                self.pages.append(page)
            for page in self.pages:
                page.get_by_text("Follow the presenter").first.wait_for()
            return
        self.viewers = [WsViewer(self.url, "failure_lab") for _ in range(self.count)]

        async def serve() -> None:
            self.stop = asyncio.Event()
            await asyncio.gather(*(v.run(self.stop) for v in self.viewers))

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(serve(),))
        self.thread.start()
        deadline = time.time() + 120
        while time.time() < deadline and not all(v.timers for v in self.viewers):
            time.sleep(0.2)  # every viewer has its page and its fragment's timer

    def wait_for(self, run_id: str, timeout: float) -> list[float]:
        """When each viewer first showed the run's result (epoch s); those that did."""
        deadline = time.time() + timeout
        while True:
            if self.client == "browser":
                seen = [p.evaluate("window.__seen").get(run_id) for p in self.pages]
            else:
                seen = [v.seen.get(run_id) for v in self.viewers]
            done = [t for t in seen if t is not None]
            if len(done) == self.count or time.time() > deadline:
                return done
            time.sleep(0.2)

    def close(self) -> None:
        if self.thread is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
            self.thread.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--client", choices=("ws", "browser"), default="ws")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    args = parser.parse_args()
    scenarios = tuple(args.scenario or SCENARIOS)
    from playwright.sync_api import sync_playwright

    key = make_key()
    state = tempfile.mkdtemp(prefix="lab-room-")
    env = {
        **os.environ,
        "LAB_STATE_DIR": f"{state}/state",
        "LAB_RUNS_DIR": f"{state}/runs",
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "0",
        KEY_ENV: key,
    }
    server, url = serve_dashboard(env, address="0.0.0.0")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    results: dict[tuple[str, int], list[float]] = {}
    lags: dict[str, list[float]] = {name: [] for name in scenarios}
    missing: dict[str, int] = {name: 0 for name in scenarios}
    memory: dict[int, float] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            lead = browser.new_context(viewport={"width": 1920, "height": 1080}).new_page()
            lead.set_default_timeout(300_000)
            lead.goto(f"{url}/?key={key}")
            lead.get_by_text("node 1: running").wait_for(timeout=300_000)
            for name in scenarios:  # warm-up, untimed
                presenter_run(lead, url, key, name)
            memory[0] = rss_mb(server.pid)
            for name in scenarios:
                results[(name, 0)] = [
                    presenter_run(lead, url, key, name)[0] for _ in range(args.repeats)
                ]
                print(f"{name}, 0 viewers: {results[(name, 0)]}", flush=True)
            room = Room(url, args.viewers, args.client, browser)
            room.open()
            memory[args.viewers] = rss_mb(server.pid)
            for name in scenarios:
                times = []
                for _ in range(args.repeats):
                    elapsed, shown_at, run_id = presenter_run(lead, url, key, name)
                    times.append(elapsed)
                    meta = json.loads(Path(f"{state}/runs/{run_id}/run.json").read_text())
                    engine_s = meta["finished_at"] - meta["started_at"]
                    print(f"  {run_id}: the run itself {engine_s:.1f} s", flush=True)
                    seen = room.wait_for(run_id, timeout=60)
                    lags[name].extend(t - shown_at for t in seen)
                    missing[name] += args.viewers - len(seen)
                results[(name, args.viewers)] = times
                print(f"{name}, {args.viewers} viewers: {times}", flush=True)
            room.close()
            memory[-1] = rss_mb(server.pid)
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(state, ignore_errors=True)

    print()
    print(
        f"| scenario | click-to-verdict, 0 viewers (s) | with {args.viewers} viewers (s) | "
        "change | viewers' lag behind the presenter: median / max (s) | viewers that never "
        "showed it |"
    )
    print("|---|---|---|---|---|---|")
    for name in scenarios:
        alone = statistics.median(results[(name, 0)])
        crowd = statistics.median(results[(name, args.viewers)])
        lag = lags[name]
        lag_text = f"{statistics.median(lag):.2f} / {max(lag):.2f}" if lag else "none seen"
        print(
            f"| {name} | {alone:.1f} | {crowd:.1f} | {100 * (crowd - alone) / alone:+.0f}% | "
            f"{lag_text} | {missing[name]} of {args.viewers * args.repeats} |"
        )
    print()
    print(
        f"Dashboard memory (VmRSS of the Streamlit process): {memory[0]:.0f} MB with the "
        f"presenter alone, {memory[args.viewers]:.0f} MB with {args.viewers} viewers open, "
        f"{memory[-1]:.0f} MB after their runs."
    )


if __name__ == "__main__":
    main()
