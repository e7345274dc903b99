"""A room's load: the presenter runs ack-loss and zombie while viewers follow in Chromium.

    .venv/bin/python -m benchmarks.room_load [--viewers 30] [--repeats 3] [--client ws|browser]
        [--page PAGE | --spread]

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
card) with no viewers, then with the viewers on their pages (`--page`, all on one page, the
Failure lab by default, following; `--spread`, viewer i on page i mod 9 of every page in the
navigation), and the dashboard process's own CPU seconds during each run; on the Failure lab,
for each viewer, when its page first
showed the presenter's run's result (an in-page poll every 50 ms notes the moment), minus the
moment the presenter's page showed it. Also the dashboard process's memory (VmRSS, with its
children excluded) with and without the viewers. Prints Markdown.

    .venv/bin/python -m benchmarks.room_load --metrics-viewers 60 [--repeats 3]

The heavy reads instead (issue 37): after an ack-loss run, the presenter opens Metrics, where
Spark computes the run's metrics once (metrics.json); then, in each repeat, the presenter's
next ack-loss run is timed twice, alone and with N websocket viewers opening Metrics at the
moment Run is clicked (their page loads overlap the run). Counted while they load: the
metrics.json files written (a viewer's computation would write one) and the Java processes under
the dashboard; noted per viewer: when its page finished loading and whether it drew the
saved metrics. Repeats alternate alone and with viewers, so that the machine's drift falls
on both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.ws_viewer import WsViewer
from engine.commands.dashboard import serve_dashboard
from engine.teach.room import KEY_ENV, make_key

SCENARIOS = ("ack-loss", "zombie")
# Every page of app.py's st.navigation, by its URL path ("" is the default page, Start here).
PAGES = (
    "",
    "lesson",
    "failure_lab",
    "free_play",
    "zombie",
    "log_views",
    "replay",
    "metrics",
    "cost",
)
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


def cpu_s(pid: int) -> float:
    """The process's own CPU seconds so far (user + system, its children excluded)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def serve_room(prefix: str) -> tuple[subprocess.Popen, str, str, str]:
    """The dashboard as `LAB_ADDRESS=0.0.0.0 ./lab dashboard` serves a room, with its own
    1-node cluster and folders: (server, url, presenter key, state folder)."""
    key = make_key()
    state = tempfile.mkdtemp(prefix=prefix)
    env = {
        **os.environ,
        "LAB_STATE_DIR": f"{state}/state",
        "LAB_RUNS_DIR": f"{state}/runs",
        "LAB_AUTOSTART": "1",
        "LAB_SPARK_AUTOSTART": "0",
        KEY_ENV: key,
    }
    server, url = serve_dashboard(env, address="0.0.0.0")
    return server, url, key, state


def stop_room(server: subprocess.Popen, state: str) -> None:
    """Stop the dashboard and everything under it (Spark's JVM, when Metrics started it)."""
    left = descendants(server.pid)
    server.terminate()
    server.wait(30)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(state, ignore_errors=True)


def presenter_run(
    tab, url: str, key: str, name: str, before_click: Callable[[], None] | None = None
) -> tuple[float, float, str]:
    """(click-to-verdict seconds, the moment the verdict showed, run id).

    Each load of the page is a new session, so it carries the presenter link's key.
    `before_click` is called just before Run is pressed (the room's viewers open then).
    """
    from playwright.sync_api import expect

    tab.goto(f"{url}/failure_lab?key={key}")
    tab.get_by_role("combobox", name="Scenario").click()
    tab.get_by_role("option", name=re.compile(rf"^{re.escape(name)} — ")).click()
    run = tab.get_by_role("button", name="▶ Run")
    expect(run).to_be_enabled(timeout=300_000)
    if before_click is not None:
        before_click()
    began = time.monotonic()
    run.click()
    done = tab.get_by_text("Done: run")
    done.wait_for(timeout=300_000)
    tab.locator("[data-testid='stMetric']", has_text="Delivered").first.wait_for()
    shown_at, elapsed = time.time(), time.monotonic() - began
    return elapsed, shown_at, done.inner_text().split("Done: run")[-1].strip()


# What a Metrics page draws: the saved metrics' first line, or a viewer's line saying the
# presenter has not computed them (pages/metrics.py).
METRICS_SHOWN = "(computed at "
METRICS_NOT_YET = "The presenter has not computed this run's metrics yet"


def metrics_writes(runs_dir: Path, since: float) -> list[str]:
    """The runs whose metrics.json was written at or after `since` (epoch s), sorted."""
    return sorted(
        path.parent.name
        for path in runs_dir.glob("*/metrics.json")
        if path.stat().st_mtime >= since
    )


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (children, their children...), from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def jvms(pid: int) -> dict[int, str]:
    """The Java processes under the dashboard, each named: Spark's, the Kafka broker's of its
    cluster, or another (a log dump's)."""
    out = {}
    for child in descendants(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() != "java":
                continue
            command = Path(f"/proc/{child}/cmdline").read_text()
        except OSError:
            continue
        out[child] = "Spark" if "pyspark" in command else "Kafka" if "kafka" in command else "other"
    return out


# pages/metrics.py's line when Spark's computation failed (on a machine loaded enough,
# Spark's JVM can time out reading Kafka); the page computes again when opened again.
SPARK_FAILED = "Spark could not compute the metrics"


def presenter_metrics(tab, url: str, key: str, tries: int = 3) -> float:
    """The presenter opens Metrics on the latest run and waits for Spark's result (seconds),
    opening the page again after a failed computation, up to `tries` times."""
    began = time.monotonic()
    for attempt in range(1, tries + 1):
        tab.goto(f"{url}/metrics?key={key}")
        shown = tab.get_by_text(METRICS_SHOWN).first
        shown.or_(tab.get_by_text(SPARK_FAILED).first).wait_for(timeout=600_000)
        if shown.is_visible():
            return time.monotonic() - began
        print(f"Spark's computation failed (try {attempt} of {tries})", flush=True)
    raise RuntimeError(f"Spark's computation failed {tries} times in a row.")


class Room:
    """The viewers: websocket clients on their own event loop, or Chromium pages."""

    def __init__(
        self, url: str, count: int, client: str, browser, pages: tuple[str, ...] = ("failure_lab",)
    ):
        self.url, self.count, self.client, self.browser = url, count, client, browser
        self.pages_asked = pages  # viewer i opens pages[i % len(pages)]
        self.pages: list = []
        self.viewers: list[WsViewer] = []
        self.errors: list[str] = []  # the viewers whose connection ended in an error
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread: threading.Thread | None = None

    def open(self, wait: bool = True) -> None:
        """Connect the viewers; with `wait`, return once each has its page and fragment timers."""
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
        watch = (METRICS_SHOWN, METRICS_NOT_YET)
        self.viewers = [
            WsViewer(self.url, self.pages_asked[i % len(self.pages_asked)], watch)
            for i in range(self.count)
        ]

        async def serve() -> None:
            self.stop = asyncio.Event()
            # One viewer's dropped connection must not end the others' (as with browsers).
            ended = await asyncio.gather(
                *(v.run(self.stop) for v in self.viewers), return_exceptions=True
            )
            self.errors = [repr(e) for e in ended if isinstance(e, BaseException)]

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(serve(),))
        self.thread.start()
        if not wait:
            return
        deadline = time.time() + 120
        while time.time() < deadline and not all(v.loaded_at for v in self.viewers):
            time.sleep(0.2)  # every viewer has had its page's first full run
        time.sleep(2)  # and its fragments' timers, which arrive with that run

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

    def wait_loaded(self, timeout: float, server_pid: int) -> float:
        """Until each viewer's first full script run ended; the dashboard's peak VmRSS meanwhile."""
        deadline, peak = time.time() + timeout, rss_mb(server_pid)
        while time.time() < deadline and not all(v.loaded_at for v in self.viewers):
            time.sleep(0.2)
            peak = max(peak, rss_mb(server_pid))
        return peak

    def close(self) -> None:
        if self.thread is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
            self.thread.join(30)


def metrics_room(lead, url: str, key: str, server, state: str, viewers: int, repeats: int) -> None:
    """The presenter's next ack-loss run alone and with `viewers` opening Metrics at its click."""
    runs_dir = Path(f"{state}/runs")
    load = os.getloadavg()
    presenter_run(lead, url, key, "ack-loss")  # a run to look at, and the page warmed up
    first = presenter_metrics(lead, url, key)  # Spark starts, then computes
    print(f"Spark started and computed the first run in {first:.1f} s", flush=True)
    memory = {"alone": rss_mb(server.pid)}
    jvm_count = len(jvms(server.pid))
    alone: list[float] = []
    crowd: list[float] = []
    computes: list[float] = []
    loads: list[float] = []  # each viewer's page load, from the moment they connected (s)
    shown = {METRICS_SHOWN: 0, METRICS_NOT_YET: 0, "neither": 0, "page not found": 0}
    unloaded, dropped, writes, extra_jvms, peaks, late = 0, 0, [], 0, [], 0
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for repeat in range(repeats):
        for with_viewers in (False, True):
            # The latest run is the previous repeat's: the presenter computes it first, so
            # the viewers find saved metrics to draw (the heaviest page they can ask for).
            computes.append(presenter_metrics(lead, url, key))
            if not with_viewers:
                alone.append(presenter_run(lead, url, key, "ack-loss")[0])
                print(f"repeat {repeat + 1}, alone: {alone[-1]:.1f} s", flush=True)
                continue
            room = Room(url, viewers, "ws", None, pages=("metrics",))
            opened = {"at": 0.0}

            def open_room(room=room, opened=opened) -> None:
                opened["at"] = time.time()
                room.open(wait=False)

            try:
                try:
                    began = time.monotonic()
                    crowd.append(
                        presenter_run(lead, url, key, "ack-loss", before_click=open_room)[0]
                    )
                except PlaywrightTimeout:  # no verdict within presenter_run's 300 s
                    late += 1
                    crowd.append(time.monotonic() - began)
                peaks.append(room.wait_loaded(180, server.pid))
                # The presenter's run wrote no metrics.json (its page is on the Failure lab).
                writes.extend(metrics_writes(runs_dir, opened["at"]))
                extra_jvms = max(extra_jvms, len(jvms(server.pid)) - jvm_count)
                for v in room.viewers:
                    if v.loaded_at is None:
                        unloaded += 1
                    else:
                        loads.append(v.loaded_at - opened["at"])
                    if v.page_not_found:
                        shown["page not found"] += 1
                    elif METRICS_SHOWN in v.found:
                        shown[METRICS_SHOWN] += 1
                    elif METRICS_NOT_YET in v.found:
                        shown[METRICS_NOT_YET] += 1
                    else:
                        shown["neither"] += 1
            finally:
                room.close()
            dropped += len(room.errors)
            print(
                f"repeat {repeat + 1}, {viewers} viewers opening Metrics: {crowd[-1]:.1f} s "
                f"(runs that gave up waiting for the verdict so far: {late}); "
                f"their pages loaded in {max(loads, default=0):.1f} s at most; "
                f"metrics.json written meanwhile: {len(writes)}; dropped: {len(room.errors)}",
                flush=True,
            )
    memory["after"] = rss_mb(server.pid)
    after_load = os.getloadavg()

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} [{min(values):.1f}–{max(values):.1f}]"

    a, c = statistics.median(alone), statistics.median(crowd)
    print()
    print(
        f"| presenter's ack-loss click-to-verdict, alone (s) | with {viewers} viewers opening "
        "Metrics at the click (s) | change | viewers' Metrics page loaded after (s): median / "
        "max | viewers that drew the saved metrics | Spark computations started by viewers "
        "(metrics.json written) | JVMs started meanwhile |"
    )
    print("|---|---|---|---|---|---|---|")
    load_text = f"{statistics.median(loads):.1f} / {max(loads):.1f}" if loads else "none loaded"
    print(
        f"| {spread(alone)} | {spread(crowd)} | {100 * (c - a) / a:+.0f}% | {load_text} | "
        f"{shown[METRICS_SHOWN]} of {viewers * repeats} | {len(writes)} | {extra_jvms} |"
    )
    print()
    print(
        f"Median [min–max] of {repeats}. Presenter's runs whose verdict did not show within "
        f"300 s of the click (timed up to the give-up instead): {late} of {repeats}. "
        "Viewers whose page never finished loading within "
        f"180 s: {unloaded}; whose connection ended in an error: {dropped}; that showed "
        f"the 'not computed yet' line: {shown[METRICS_NOT_YET]}; "
        f"neither: {shown['neither']}; page not found: {shown['page not found']}. The "
        f"presenter's Spark computation before each run: {spread(computes)} s."
    )
    print(
        f"Dashboard memory (VmRSS of the Streamlit process, Spark's JVM excluded): "
        f"{memory['alone']:.0f} MB with the presenter alone and Spark up, "
        f"{max(peaks, default=0):.0f} MB at most while the viewers loaded, "
        f"{memory['after']:.0f} MB after. Java processes under it: "
        + ", ".join(f"{name} {rss_mb(pid):.0f} MB" for pid, name in jvms(server.pid).items())
        + "."
    )
    print(
        "Load average (1/5/15 min) at the start: "
        + " / ".join(f"{x:.2f}" for x in load)
        + "; at the end: "
        + " / ".join(f"{x:.2f}" for x in after_load)
        + f"; {os.cpu_count()} cores."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=30)
    parser.add_argument(
        "--metrics-viewers",
        type=int,
        default=0,
        help="instead: N viewers open Metrics at the presenter's ack-loss click",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--client", choices=("ws", "browser"), default="ws")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--page",
        choices=[p for p in PAGES if p],
        default="failure_lab",
        help="the page every viewer opens (by its URL path; default failure_lab)",
    )
    where.add_argument(
        "--spread",
        action="store_true",
        help="viewers spread over every page in turn (Start here, Lesson, ... Cost)",
    )
    args = parser.parse_args()
    pages = PAGES if args.spread else (args.page,)
    scenarios = tuple(args.scenario or SCENARIOS)
    from playwright.sync_api import sync_playwright

    server, url, key, state = serve_room("lab-room-")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    results: dict[tuple[str, int], list[float]] = {}
    lags: dict[str, list[float]] = {name: [] for name in scenarios}
    missing: dict[str, int] = {name: 0 for name in scenarios}
    memory: dict[int, float] = {}
    cpu: dict[tuple[str, int], list[float]] = {}  # the dashboard's CPU seconds per run
    loads = [os.getloadavg()[0]]
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            lead = browser.new_context(viewport={"width": 1920, "height": 1080}).new_page()
            lead.set_default_timeout(300_000)
            lead.goto(f"{url}/?key={key}")
            lead.get_by_text("node 1: running").wait_for(timeout=300_000)
            if args.metrics_viewers:
                metrics_room(lead, url, key, server, state, args.metrics_viewers, args.repeats)
                browser.close()
                return
            for name in scenarios:  # warm-up, untimed
                presenter_run(lead, url, key, name)
            memory[0] = rss_mb(server.pid)
            for name in scenarios:
                results[(name, 0)], cpu[(name, 0)] = [], []
                for _ in range(args.repeats):
                    before = cpu_s(server.pid)
                    results[(name, 0)].append(presenter_run(lead, url, key, name)[0])
                    cpu[(name, 0)].append(cpu_s(server.pid) - before)
                print(f"{name}, 0 viewers: {results[(name, 0)]}", flush=True)
            room = Room(url, args.viewers, args.client, browser, pages)
            room.open()
            memory[args.viewers] = rss_mb(server.pid)
            for name in scenarios:
                times, cpu[(name, args.viewers)] = [], []
                for _ in range(args.repeats):
                    before = cpu_s(server.pid)
                    elapsed, shown_at, run_id = presenter_run(lead, url, key, name)
                    cpu[(name, args.viewers)].append(cpu_s(server.pid) - before)
                    times.append(elapsed)
                    meta = json.loads(Path(f"{state}/runs/{run_id}/run.json").read_text())
                    engine_s = meta["finished_at"] - meta["started_at"]
                    print(f"  {run_id}: the run itself {engine_s:.1f} s", flush=True)
                    if pages == ("failure_lab",):  # only there does a viewer follow the run
                        seen = room.wait_for(run_id, timeout=60)
                        lags[name].extend(t - shown_at for t in seen)
                        missing[name] += args.viewers - len(seen)
                results[(name, args.viewers)] = times
                print(f"{name}, {args.viewers} viewers: {times}", flush=True)
            not_loaded = [v.page for v in room.viewers if v.loaded_at is None or v.page_not_found]
            room.close()
            memory[-1] = rss_mb(server.pid)
            loads.append(os.getloadavg()[0])
            browser.close()
    finally:
        stop_room(server, state)

    print()
    placed = "spread over every page" if args.spread else f"on {args.page}"
    print(
        f"Viewers {placed}; viewers whose page did not load: {len(not_loaded)} "
        f"{sorted(set(not_loaded))}; load average (1 min) {loads[0]:.1f} at the start, "
        f"{loads[-1]:.1f} at the end."
    )
    print()
    print(
        f"| scenario | click-to-verdict, 0 viewers (s) | with {args.viewers} viewers (s) | "
        "change | dashboard CPU per run, 0 / with viewers (s) | viewers' lag behind the "
        "presenter: median / max (s) | viewers that never showed it |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in scenarios:
        alone = statistics.median(results[(name, 0)])
        crowd = statistics.median(results[(name, args.viewers)])
        cpu_text = (
            f"{statistics.median(cpu[(name, 0)]):.2f} / "
            f"{statistics.median(cpu[(name, args.viewers)]):.2f}"
        )
        lag = lags[name]
        lag_text = f"{statistics.median(lag):.2f} / {max(lag):.2f}" if lag else "–"
        never = f"{missing[name]} of {args.viewers * args.repeats}" if lag else "–"
        print(
            f"| {name} | {alone:.1f} | {crowd:.1f} | {100 * (crowd - alone) / alone:+.0f}% | "
            f"{cpu_text} | {lag_text} | {never} |"
        )
    print()
    print(
        f"Dashboard memory (VmRSS of the Streamlit process): {memory[0]:.0f} MB with the "
        f"presenter alone, {memory[args.viewers]:.0f} MB with {args.viewers} viewers open, "
        f"{memory[-1]:.0f} MB after their runs."
    )


if __name__ == "__main__":
    main()
