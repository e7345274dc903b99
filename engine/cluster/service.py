"""The dashboard's one cluster, shared by every browser session: found, or started in the
background; runs share it and a broker fault takes it alone (SharedExclusiveLock); node
faults are announced to every session. Streamlit keeps one per server process
(pages._shared.cluster_service), and says who may act (`authorize`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from engine.base.errors import ClusterError, ClusterNotRunningError, LabError
from engine.cluster import (
    Cluster,
    current_cluster,
    forget_current,
    make_cluster,
    require_same_version,
    start_cluster,
)
from engine.cluster.base import ClusterStatus


class SharedExclusiveLock:
    """Many holders at once in shared mode, or one alone in exclusive mode.

    Runs whose faults stay inside their own clients share the cluster; a run that kills or
    pauses brokers, or slows or cuts the whole proxy, needs it alone, and so does a node
    action from the sidebar. The standard library has no such lock and these few lines are
    not worth a dependency. A waiting exclusive holder stops new shared ones from entering,
    so it cannot be starved by a stream of ordinary runs.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._exclusive or self._exclusive_waiting > 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._exclusive_waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._exclusive_waiting += 1
            try:
                self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


@dataclass
class Announcement:
    at: float
    text: str


class ClusterService:
    """The dashboard's one cluster: found, or started in the background, then shared."""

    def __init__(self, authorize: Callable[[str], None] | None = None) -> None:
        # Asked before every action that changes the cluster, with what it would do; it
        # raises to refuse (the dashboard's: only the presenter may act, pages._roles).
        self.authorize = authorize or (lambda _action: None)
        self._lock = threading.Lock()  # guards starting and stopping
        self.usage = SharedExclusiveLock()  # runs share the cluster; broker faults take it alone
        self.cluster: Cluster | None = None
        self.state = "idle"  # idle | starting | ready | failed
        self.starting_backend = "local"  # the backend of the start under way (the sidebar says)
        self.steps: list[str] = []
        self.error: str | None = None
        self.owned = False
        self.autostarted = False  # the first page view starts a cluster; later ones never do
        self.announcements: deque[Announcement] = deque(maxlen=50)
        self._status_lock = threading.Lock()
        self._status: tuple[float, Cluster, ClusterStatus] | None = None

    def status(self, max_age_s: float = 1.5) -> ClusterStatus:
        """The cluster's status, asked of the brokers at most every `max_age_s` for everyone.

        Every session's sidebar shows it every 2 s: thirty viewers asking the brokers on their
        own would be fifteen admin clients a second, on the brokers the run under way uses.
        """
        cluster = self.cluster
        if cluster is None:
            raise ClusterNotRunningError("No cluster is running; start one first.")
        with self._status_lock:
            held = self._status
            if held is None or held[1] is not cluster or time.time() - held[0] > max_age_s:
                held = self._status = (time.time(), cluster, cluster.status(timeout=2.0))
            return held[2]

    def find_running(self) -> bool:
        """Adopt a cluster started earlier (e.g. by `python -m engine cluster up`); True when
        one was found, adopted or (of another Kafka version) refused with the reason."""
        try:
            cluster = current_cluster()
        except (ClusterNotRunningError, LabError):
            return False
        if not cluster.status(timeout=2.0).reachable:
            return False
        try:
            require_same_version(cluster)
        except ClusterError as exc:
            # Not adopted, and no second cluster started beside it: the sidebar says why.
            self.state, self.error = "failed", str(exc)
            return True
        self.cluster, self.state, self.owned = cluster, "ready", False
        return True

    def ensure_started(
        self, *, backend: str = "local", nodes: int = 1, bootstrap: str | None = None
    ) -> None:
        """Start a cluster, as a person asks from the sidebar (the presenter, in a room)."""
        self.authorize("start a cluster")
        self._ensure_started(backend=backend, nodes=nodes, bootstrap=bootstrap)

    def _ensure_started(
        self, *, backend: str = "local", nodes: int = 1, bootstrap: str | None = None
    ) -> None:
        with self._lock:
            if self.state in ("starting", "ready"):
                return
            if self.find_running():
                return
            self.state, self.steps, self.error = "starting", [], None
            self.starting_backend = backend
        thread = threading.Thread(
            target=self._start, args=(backend, nodes, bootstrap), daemon=True, name="lab-start"
        )
        thread.start()

    def autostart(self, *, backend: str = "local", nodes: int = 1) -> None:
        """Start (or adopt) a cluster the first time a page asks, once per server process.

        A cluster a person stopped in the sidebar stays stopped: the start controls there let
        them choose the next one.
        """
        with self._lock:
            if self.autostarted:
                return
            self.autostarted = True
        # The dashboard's own start, whoever opened it.
        self._ensure_started(backend=backend, nodes=nodes)

    def restart(self, *, nodes: int) -> None:
        """Replace the dashboard's own local cluster with one of `nodes` nodes, in the background.

        The state is "starting" at once, so no new run begins; stopping waits for the runs in
        progress (the exclusive lock). Only a cluster the dashboard started is stopped.
        """
        self.authorize("restart the cluster")
        with self._lock:
            cluster = self.cluster
            if self.state != "ready" or cluster is None:
                raise ClusterNotRunningError("No cluster is running; start one in the sidebar.")
            if not self.owned or cluster.backend != "local":
                raise LabError(
                    "The dashboard did not start this cluster, so it does not stop it; restart "
                    f"it yourself with `python -m engine cluster up --nodes {nodes}`."
                )
            old = len(cluster.node_ids)
            self.state, self.error = "starting", None
            self.steps = ["Waiting for the runs in progress to finish…"]
        thread = threading.Thread(
            target=self._restart, args=(cluster, old, nodes), daemon=True, name="lab-restart"
        )
        thread.start()

    def _restart(self, cluster: Cluster, old: int, nodes: int) -> None:
        try:
            with self.usage.exclusive():
                self.steps.append(f"Stopping the {old}-node cluster…")
                cluster.stop()
                forget_current()
                self.cluster, self.owned = None, False
                self.announce(f"{cluster.backend} cluster stopped, to start one with {nodes} nodes")
        except Exception as exc:
            self.state, self.error = "failed", f"The cluster could not be stopped: {exc}"
            return
        self._start("local", nodes, None)

    def _start(self, backend: str, nodes: int, bootstrap: str | None) -> None:
        try:
            cluster = make_cluster(
                backend, nodes=nodes, name="dashboard", bootstrap=bootstrap, owner_pid=os.getpid()
            )
            if hasattr(cluster, "on_progress"):
                cluster.on_progress = self.steps.append
            start_cluster(cluster)
            self.cluster, self.owned, self.state = cluster, True, "ready"
            self.announce(f"{backend} cluster with {len(cluster.node_ids)} node(s) is ready")
        except LabError as exc:
            self.state, self.error = "failed", str(exc)
        except Exception as exc:
            self.state, self.error = "failed", f"The cluster could not start: {exc}"

    def stop(self) -> None:
        self.authorize("stop the cluster")
        with self.usage.exclusive(), self._lock:
            if self.cluster is not None:
                self.cluster.stop()
                forget_current()
                self.announce(f"{self.cluster.backend} cluster stopped")
            self.cluster, self.state, self.owned = None, "idle", False

    def node_action(self, action: str, node_id: int) -> None:
        """Kill, pause, resume or restart a node; one at a time, announced to every session."""
        self.authorize(f"{action} a broker")
        with self.usage.exclusive():
            if self.cluster is None:
                raise ClusterNotRunningError("No cluster is running; start one first.")
            getattr(self.cluster, f"{action}_node")(node_id)
            self.announce(f"node {node_id}: {action}")

    @contextmanager
    def exclusive(self, why: str) -> Iterator[None]:
        """Hold the cluster alone for a run that hurts brokers or the whole proxy.

        It waits for the runs in progress to finish; other sessions see why they wait.
        """
        with self.usage.exclusive():
            self.announce(f"{why} (other runs and cluster actions wait)")
            try:
                yield
            finally:
                self.announce("the cluster is free again")

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Use the cluster alongside other sessions' runs (each run has its own topics)."""
        with self.usage.shared():
            yield

    def latest_announcement(self) -> str:
        return self.announcements[-1].text if self.announcements else "another run"

    def announce(self, text: str) -> None:
        self.announcements.append(Announcement(time.time(), text))


@dataclass(frozen=True)
class NodeAdvice:
    """What to tell a person whose scenario needs more nodes than the cluster has."""

    text: str
    restart_nodes: int | None  # offer a button that restarts the cluster with this many


def node_advice(
    needed: int, have: int | None, *, owned: bool, backend: str | None
) -> NodeAdvice | None:
    """None when a scenario that needs `needed` nodes can run on a cluster of `have`.

    Otherwise the reason, and whether the dashboard may restart the cluster itself: only a
    local cluster it started (one started from a terminal or elsewhere is left alone).
    """
    if have is None or have >= needed:
        return None
    text = f"This scenario needs a {needed}-node cluster; the running one has {have}."
    if owned and backend == "local":
        return NodeAdvice(f"{text} Restart it with {needed} nodes to run it.", needed)
    if backend == "local":
        how = (
            "it was started outside the dashboard, which leaves it alone: stop it with "
            f"`python -m engine cluster down`, start `python -m engine cluster up --nodes {needed}`"
            " and restart the dashboard."
        )
    else:
        how = (
            f"the {backend} backend's brokers are not the dashboard's to change: start a local "
            f"one with `python -m engine cluster up --nodes {needed}` and restart the dashboard."
        )
    return NodeAdvice(f"{text} It cannot be restarted from here: {how}", None)
