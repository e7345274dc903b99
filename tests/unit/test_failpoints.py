"""Fault points stop a real process exactly after the armed event, and SIGCONT resumes it there.

No Kafka: a child Python process writes numbered events through HistoryWriter with a point
armed, as a role does; the test waits for the kernel to report it stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from engine.base.paths import REPO_ROOT
from engine.model.history import read_jsonl
from engine.proc.failpoints import FailPoint, process_state, wait_stopped

CHILD = textwrap.dedent(
    """
    import sys
    from engine.proc.failpoints import ArmedFailPoint, FailPoint
    from engine.model.history import HistoryWriter

    history = HistoryWriter(sys.argv[1], "child", ArmedFailPoint(FailPoint("step", 3)))
    for i in range(6):
        history.write("step", n=i)
        history.write("other", n=i)
    history.write("done")
    """
)


def test_a_process_stops_itself_right_after_the_armed_event_and_resumes_there(tmp_path):
    path = tmp_path / "child.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert wait_stopped(child.pid, timeout=30), "the child never stopped"
        assert process_state(child.pid) in ("T", "t")
        events = read_jsonl(path)
        # Exactly after the third "step": nothing after it but the failpoint's own line.
        assert [e["ev"] for e in events][-2:] == ["step", "failpoint_reached"]
        assert [e["n"] for e in events if e["ev"] == "step"] == [0, 1, 2]
        reached = events[-1]
        assert reached["point"] == "after step #3"
        assert reached["at"] == {"ev": "step", "n": 2}
        os.kill(child.pid, signal.SIGCONT)
        assert child.wait(30) == 0
        events = read_jsonl(path)
        assert [e["n"] for e in events if e["ev"] == "step"] == list(range(6))
        assert events[-1]["ev"] == "done"
        assert sum(1 for e in events if e["ev"] == "failpoint_reached") == 1
    finally:
        if child.poll() is None:
            child.kill()


def test_wait_stopped_is_false_for_a_process_that_exits():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert wait_stopped(child.pid, timeout=10) is False
    child.wait(10)


def test_a_point_round_trips_through_a_spec():
    point = FailPoint("commit_gap", 2)
    assert FailPoint.from_spec(point.to_spec()) == point
    assert FailPoint.from_spec(None) is None
    assert point.name == "after commit_gap #2"
