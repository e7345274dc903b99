"""What a starting dashboard or run does about one that crashed before it.

A dashboard killed by SIGKILL runs no clean-up: its clients end themselves (engine/proc/leash.py)
and its cluster's watchdog ends the cluster, but its run folders still say "running". The
next dashboard (or `engine run`) ends any listed process whose owner is gone, and marks each
run whose owner is gone as interrupted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engine.proc import leash
from engine.run import record

log = logging.getLogger("lab.recovery")


@dataclass
class Recovered:
    killed: list[int] = field(default_factory=list)  # pids left by a dead owner
    interrupted: list[str] = field(default_factory=list)  # run ids marked interrupted


def recover() -> Recovered:
    """End what a crashed owner left running and mark its runs interrupted (best effort)."""
    done = Recovered()
    try:
        done.killed = leash.sweep()
        done.interrupted = record.interrupt_orphaned_runs()
    except OSError as exc:  # an unreadable state or runs folder must not stop a start
        log.warning("could not clean up after an earlier crash: %s", exc)
    if done.killed:
        log.warning("ended %d processes left by a crashed dashboard or run", len(done.killed))
    if done.interrupted:
        log.warning("runs interrupted by a crash: %s", ", ".join(done.interrupted))
    return done
