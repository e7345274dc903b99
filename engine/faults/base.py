"""What a fault kind declares, and what it may touch when it fires.

Modelled on Jepsen's nemesis packages (one package per way of hurting a system, each with
its own setup, invocation and teardown) and etcd's robustness failpoints (each `Failpoint`
says its `Name()`, whether it is `Available()` on a given cluster and member, and how to
`Inject()` it). A kind here says, in one file:

- its name and the scenario parameters it takes (engine.faults.params.FaultParams),
  refused at parse time when a scenario gives another;
- where it is available (backends, node count, pipelines);
- how it fires, given the nemesis's state (`fire`);
- its words: the short name the room reads, the live line (`live`), a chart's label
  (`short`) and the evidence sentence under a result (`evidence`);
- its colour on the run's timeline, and its Free play control if it has one.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from engine.base.errors import UnsupportedFaultError
from engine.faults.params import FaultParams
from engine.model.history import HistoryFanOut, HistoryWriter

if TYPE_CHECKING:  # named in annotations only: no run-time dependency
    from engine.cluster.base import Cluster
    from engine.proc.processes import RoleProcess

Backend = Literal["local", "docker", "external"]
Pipeline = Literal["producer", "processor"]
# What a kind touches: one level's own clients (or its own proxy rules), the proxy as a whole
# (every connection), or the brokers. Beyond "level", the runner runs levels one at a time
# unless the scenario shares its faults (engine.run.runner.schedule_of).
Reach = Literal["level", "proxy", "brokers"]

EVERY_BACKEND: frozenset[Backend] = frozenset({"local", "docker", "external"})
# The backends whose broker processes the lab owns (engine.cluster.base.Cluster.kill_node).
OWN_BROKERS: frozenset[Backend] = frozenset({"local", "docker"})
EVERY_PIPELINE: frozenset[Pipeline] = frozenset({"producer", "processor"})

# The timeline's colours (pages/_run_view.py): a kill is red, a freeze amber, the rest orange.
KILLED = "#c62828"
FROZEN = "#f9a825"
HURT = "#ef6c00"


@dataclass
class NemesisContext:
    """What the nemesis may touch during one level's run."""

    cluster: Cluster
    topic: str  # the topic whose leader broker faults aim at
    client_ids: dict[str, str]  # role base name -> client.id prefix, for proxy targeting
    processes: Callable[[str], RoleProcess | None]  # the live instance of a role
    replace: Callable[[str, FaultParams], None]  # start a replacement instance of a role
    history: HistoryWriter | HistoryFanOut
    started_at: float = field(default_factory=time.time)
    # Called after every fault on a node, so that a watcher reads the partition again.
    node_changed: Callable[[], None] = lambda: None


class NemesisState(Protocol):
    """The part of engine.run.nemesis.Nemesis a kind's `fire` uses: what it set, froze and killed,
    so that a later fault (resume, restart) and `heal` can undo it."""

    ctx: NemesisContext
    proxy_rules: list[int]
    proxy_wide: bool
    frozen: list[RoleProcess]
    undos: list[tuple[str, Callable[[], None]]]  # residues kinds registered (on_heal)
    timed_resumes: list[tuple[float, Callable[[], None]]]
    paused_nodes: set[int]
    killed_nodes: set[int]
    node_roles: dict[str, int]  # "leader" / "follower" -> the node kill-<role> took down
    restarting: list[threading.Thread]
    stopped_at: dict[str, dict[str, Any]]  # role -> its failpoint_reached event

    def record(self, kind: str, **attrs: Any) -> None: ...

    def wake(self, process: RoleProcess) -> None: ...

    def on_heal(self, what: str, undo: Callable[[], None]) -> None:
        """Have `heal` call `undo` (a kind's own residue: what it left in force, `what` in
        words), after the level and before the next; the last registered is undone first."""


@dataclass(frozen=True)
class Availability:
    """Where a kind can fire: on which backends, from how many nodes, in which pipelines."""

    backends: frozenset[Backend]
    min_nodes: int = 1
    pipelines: frozenset[Pipeline] = EVERY_PIPELINE
    why: str = ""  # said when it is not available: what it needs

    def refused_in(self, nodes: int, pipeline: str) -> str | None:
        """Why a scenario of `nodes` and `pipeline` cannot have this kind; None if it can."""
        if nodes < self.min_nodes:
            return f"it needs at least {self.min_nodes} nodes ({self.why}): use nodes: 3"
        if pipeline not in self.pipelines:
            return f"it needs pipeline: {' or '.join(sorted(self.pipelines))}"
        return None

    def refused_on(self, backend: str) -> str | None:
        """Why this kind cannot fire on a cluster of `backend`; None if it can."""
        if backend in self.backends:
            return None
        return (
            f"it needs the {' or '.join(sorted(self.backends))} backend ({self.why}), and "
            f"this cluster's is {backend}"
        )


@dataclass(frozen=True)
class FreePlayControl:
    """A Free play button that strikes this kind on every level at once (engine.run.freeplay)."""

    strike: str  # the strike's name, as the page and FreePlay.strike know it
    label: str  # the button
    help: str  # what it does for real, under the button
    order: int  # where the button sits among the others
    # The fault's parameters, from the session's settings (engine.run.freeplay.FreePlaySettings).
    params: Callable[[Any], Mapping[str, Any]] = lambda settings: {}
    # The notice once struck, from the same settings.
    note: Callable[[Any], str] = lambda settings: ""
    needs_broker_faults: bool = False  # only in a session started with broker faults on
    # A strike on the brokers: "down" takes one node down for every level (fired once,
    # recorded in each; free play remembers the node), "back" brings that node back.
    broker_step: Literal["down", "back"] | None = None


class FaultKind(ABC):
    """One way of hurting the system. A subclass in engine/faults/NAME.py, as `KIND = Sub()`."""

    name: ClassVar[str]
    takes: ClassVar[frozenset[str]]  # its parameters (engine.faults.params.PARAMS)
    available: ClassVar[Availability]
    reach: ClassVar[Reach]
    words: ClassVar[str]  # the room's short name of it ("killed", "network cut")
    colour: ClassVar[str]  # its band on the run's timeline
    # Whether the timeline draws it as a band (a proxy rule's set-up is shown by its drops).
    drawn: ClassVar[bool] = True
    free_play: ClassVar[FreePlayControl | None] = None
    default_target: ClassVar[str] = "producer"  # whom it strikes when `target` is not given
    # A crash or pause that a role's own events trigger stops at an armed fault point
    # (engine.proc.failpoints) instead of being signalled a little late.
    stops_at_point: ClassVar[bool] = False
    # A fault that lasts until another kind's record ends it for the same target (a pause
    # until its resume): the timeline draws one band from the one to the other.
    ended_by: ClassVar[str | None] = None
    # It takes the partition's leader away (killed or shut down): writes it held may be gone,
    # and an answer from another node before the election is not a stale one.
    takes_leader_away: ClassVar[bool] = False
    # The partition role ("leader", "follower") of the broker it kills: the replication
    # sentences (engine.judging.explain) pair a killed leader with a killed follower by it.
    kills_node: ClassVar[str | None] = None
    # It acts on one client process (a crash, a pause, a resume): a chart marks it on that
    # process's line.
    on_process: ClassVar[bool] = False
    # Parameters only this kind takes, beyond the shared ones (engine.faults.params): a
    # pydantic model whose fields `takes` names too. A scenario gives them as any other, and
    # `fault.<name>` reads them, defaults filled in (engine.faults.Fault).
    own_params: ClassVar[type[BaseModel] | None] = None

    @abstractmethod
    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        """Do it, for real, and record what was done (nemesis.record)."""

    @abstractmethod
    def live(self, event: dict[str, Any], point: str) -> str:
        """The live line for its nemesis record; `point`: where a fault point stopped the
        target, in words with a leading space, or ""."""

    def short(self, event: dict[str, Any]) -> str | None:
        """A chart's label when `live` runs long; None: the live line is short already."""
        return None

    def lasting(self, event: dict[str, Any]) -> tuple[str, str]:
        """A lasting fault's band (`ended_by`): its label and its raw name, in small type."""
        return f"{event.get('target')} {self.words}", self.name

    @abstractmethod
    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        """The evidence sentence under a level's result; None when the record says nothing a
        room needs beyond what another line shows (a proxy rule: its drops are the evidence).
        `where`: the fault point's sentence, for a crash or pause that stopped at one."""

    def settle_s(self, fault: FaultParams) -> float:
        """How long after it fires the fault is wholly in force. A fault at 0 s is in force
        before the first message: the run waits this long after firing it to let the
        clients start (engine.run.nemesis.Nemesis.wait_settled)."""
        return 0.0

    def check(self, fault: FaultParams) -> None:
        """Raise ValueError for a parameter this kind cannot use; called when parsing."""
        return None  # most kinds' parameters are checked by their types alone

    def cannot_teach(
        self, fault: FaultParams, messages: int, batched: bool, commit_every: int = 1
    ) -> str | None:
        """Why this fault would never happen in a workload of `messages`; None if it would."""
        return None


def require_proxy(nemesis: NemesisState, kind: str) -> Any:
    """The cluster's fault proxy control, or a clear error when this backend runs none."""
    proxy = nemesis.ctx.cluster.proxy_control()
    if proxy is None:
        raise UnsupportedFaultError(
            f"The fault '{kind}' needs the fault proxy, which the "
            f"{nemesis.ctx.cluster.backend} backend does not run."
        )
    return proxy
