"""A voting room: 60 viewers vote on a lesson step; the tally's delay and the run's.

    .venv/bin/python -m benchmarks.room_votes [--voters 60] [--repeats 5]

Serves the dashboard as a room (bound to 0.0.0.0 with a presenter key, reached through
127.0.0.1) with its own 1-node cluster. The presenter is a Chromium page on the Lesson page,
at the first step of the 45-minute lesson (ack-loss). The voters are websocket clients of
Streamlit's protocol (benchmarks/ws_viewer.py) on the Lesson page: each draws the step's
question and votes as a browser does (a rerun carrying the radio's value).

1. **The tally on the presenter's screen**: the voters vote one after another, 0.3 s apart;
   an in-page poll on the presenter's page (every 50 ms) notes when "The room's vote: N
   votes" first shows each N. The delay of vote N is that moment minus when the N-th vote
   left its client. Issue 62's target: within 1 s.
2. **Click-to-verdict**: the presenter locks the vote and runs the step once (untimed), then
   "▶ Run this step again" is timed (click until "Run K (the latest)" shows), alternating
   alone (the voters disconnected) and with the voters on the Lesson page, `--repeats` times
   each. Issue 62's target: with 60 voting viewers within 25% of alone (median).

Also the dashboard process's own CPU seconds per run. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

from benchmarks.room_load import Room, cpu_s, serve_room, stop_room

QUESTION = "How many copies of message 2 end up in the topic?"
OPTIONS = ("one", "two", "none")
TALLY_WATCH = """
window.__tally = {};
setInterval(() => {
  const text = document.body ? document.body.innerText : "";
  const m = text.match(/The room's vote: (\\d+) votes?/);
  if (m && !(m[1] in window.__tally)) window.__tally[m[1]] = Date.now() / 1000;
}, 50);
"""


def timed_again(lead, number: int) -> float:
    """Click "Run this step again" until the page shows the new run as the latest."""
    began = time.monotonic()
    lead.get_by_role("button", name="▶ Run this step again").click()
    lead.get_by_text(f"Run {number} (the latest)").wait_for(timeout=300_000)
    return time.monotonic() - began


def connect(url: str, voters: int, *, ballot: bool) -> Room:
    """The voters on the Lesson page; with `ballot`, once each has the vote's radio."""
    room = Room(url, voters, "ws", None, ("lesson",))
    room.open()
    deadline = time.time() + 120
    while ballot and time.time() < deadline and not all(v.ballot for v in room.viewers):
        time.sleep(0.2)
    return room


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voters", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    server, url, key, state = serve_room("lab-votes-")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    loads = [os.getloadavg()[0]]
    delays: list[float] = []
    alone: list[float] = []
    crowd: list[float] = []
    cpu: dict[str, list[float]] = {"alone": [], "crowd": []}
    missing_votes = 0
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1920, "height": 1080})
            context.add_init_script(TALLY_WATCH)
            lead = context.new_page()
            lead.set_default_timeout(300_000)
            lead.goto(f"{url}/lesson?key={key}")
            lead.get_by_text("node 1: running").wait_for(timeout=300_000)
            lead.get_by_text(QUESTION).wait_for()

            room = connect(url, args.voters, ballot=True)
            sent: list[float] = []
            for number, viewer in enumerate(room.viewers):
                viewer.vote("one" if number % 3 == 0 else "two")  # two thirds say "two"
                deadline = time.time() + 10
                while viewer.voted_at is None and time.time() < deadline:
                    time.sleep(0.01)
                sent.append(viewer.voted_at or time.time())
                time.sleep(0.3)
            time.sleep(3)
            shown = lead.evaluate("window.__tally")
            for n, at in enumerate(sent, 1):
                # Two votes between the tally's redraws show together: vote n is on the
                # screen from the first count of n or more.
                seen = [float(t) for count, t in shown.items() if int(count) >= n]
                if seen:
                    delays.append(min(seen) - at)
                else:
                    missing_votes += 1
            print(f"tally delays (s): {[round(d, 2) for d in delays]}", flush=True)

            lead.get_by_role("button", name="Lock the vote").click()
            lead.get_by_role("button", name="▶ Run the scenario").click()
            lead.get_by_role("heading", name="3 · Explain").wait_for(timeout=300_000)
            room.close()
            runs = 1
            for repeat in range(args.repeats):
                for with_voters in (False, True):
                    # After the lock: the voters' pages follow the run.
                    room = connect(url, args.voters, ballot=False) if with_voters else None
                    before = cpu_s(server.pid)
                    runs += 1
                    elapsed = timed_again(lead, runs)
                    cpu["crowd" if with_voters else "alone"].append(cpu_s(server.pid) - before)
                    (crowd if with_voters else alone).append(elapsed)
                    if room is not None:
                        room.close()
                    print(
                        f"repeat {repeat + 1}, {'with' if with_voters else 'without'} the "
                        f"voters: {elapsed:.1f} s",
                        flush=True,
                    )
            loads.append(os.getloadavg()[0])
            browser.close()
    finally:
        stop_room(server, state)

    print()
    print(f"Load average (1 min): {loads[0]:.1f} at the start, {loads[-1]:.1f} at the end.")
    print()
    print("| measure | median | max | samples |")
    print("|---|---|---|---|")
    print(
        f"| the tally on the presenter's screen after a vote (s) | "
        f"{statistics.median(delays):.2f} | {max(delays):.2f} | {len(delays)} of "
        f"{args.voters} votes ({missing_votes} never shown) |"
    )
    a, c = statistics.median(alone), statistics.median(crowd)
    print(f"| click-to-verdict, alone (s) | {a:.1f} | {max(alone):.1f} | {len(alone)} |")
    print(
        f"| click-to-verdict, {args.voters} voters on the Lesson page (s) | {c:.1f} | "
        f"{max(crowd):.1f} | {len(crowd)} ({100 * (c - a) / a:+.0f}% at the median) |"
    )
    print(
        f"| the dashboard's CPU per run, alone / with the voters (s) | "
        f"{statistics.median(cpu['alone']):.2f} / {statistics.median(cpu['crowd']):.2f} | | |"
    )


if __name__ == "__main__":
    main()
