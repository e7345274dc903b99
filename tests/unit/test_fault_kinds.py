"""Every fault kind is complete, and a new one is one file (engine/faults/NAME.py).

The registry (engine/faults/__init__.py) finds the kinds by their files and refuses one that
leaves something undeclared; these tests keep every registered kind complete, every kind a
scenario file names registered, and show the refusal on kinds that are not.
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import faults
from engine.faults import KINDS, discover, incomplete
from engine.faults.base import EVERY_BACKEND, HURT, Availability, FaultKind
from engine.faults.params import PARAMS, FaultParams
from engine.model.words import from_name
from engine.run import freeplay
from engine.run.nemesis import Nemesis, NemesisContext
from engine.scenarios.scenario import ScenarioError, list_scenarios, parse_scenario
from engine.teach.live import nemesis_text


@pytest.mark.parametrize("name", list(KINDS))
def test_every_registered_kind_is_complete(name):
    kind = KINDS[name]
    assert incomplete(kind) == []
    assert kind.name == name
    assert Path(sys.modules[type(kind).__module__].__file__).stem == name.replace("-", "_")
    # Its words are its own, not the fallback made from its name.
    assert faults.fault_words(name) == kind.words != from_name(name)
    assert kind.available.backends <= EVERY_BACKEND


def test_the_registry_holds_the_kinds_the_nemesis_had():
    """The kinds Nemesis.fire's if/elif carried out before the registry (e8795d3), each still
    reaching as far as it did; a new kind adds to them without editing this list."""
    assert {
        "drop-produce-response", "drop-response", "crash", "pause", "resume",
    } <= {name for name, kind in KINDS.items() if kind.reach == "level"}  # fmt: skip
    assert {
        "kill-leader", "kill-follower", "stop-leader", "wipe-partition",
        "pause-followers", "pause-follower", "resume-nodes", "restart-nodes",
    } <= faults.BROKER_FAULTS  # fmt: skip
    assert {"blackhole", "latency", "reset-connections"} <= faults.PROXY_WIDE_FAULTS


def test_every_kind_a_scenario_file_names_is_registered():
    named = {
        fault["kind"]
        for path in list_scenarios().values()
        for fault in (yaml.safe_load(path.read_text()).get("faults") or [])
    }
    assert named, "the scan found no fault in scenarios/*.yaml"
    assert named <= set(KINDS), f"unregistered: {sorted(named - set(KINDS))}"


def test_every_parameter_a_scenario_may_give_is_taken_by_some_kind():
    taken = set().union(*(kind.takes for kind in KINDS.values()))
    assert taken == PARAMS


def test_free_play_buttons_come_from_the_kinds_in_their_order():
    before = [
        "drop-ack", "kill-processor", "freeze-processor", "wake-processor", "kill-leader",
        "restart",
    ]  # fmt: skip  # the page's buttons before the registry (e8795d3), in their order
    assert [strike for _, strike, _ in freeplay.BUTTONS if strike in before] == before
    assert [label for label, _, _ in freeplay.BUTTONS][:2] == [
        "📉 Drop the next ack",
        "💀 Kill the processor",
    ]
    assert freeplay.CONTROLS["kill-leader"][1].needs_broker_faults


# ---- a kind that is not complete is refused ------------------------------------------------


class Tiny(FaultKind):
    """A complete kind, the smallest there is; the cases below each take one thing away."""

    name = "tiny"
    takes = frozenset({"target"})
    available = Availability(EVERY_BACKEND, why="only a record")
    reach = "level"
    words = "a tiny fault"
    colour = HURT

    def fire(self, fault: FaultParams, nemesis: Any) -> None:
        nemesis.record(self.name, target=fault.target or self.default_target)

    def live(self, event: dict[str, Any], point: str) -> str:
        return f"a tiny fault struck {event.get('target')}"

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return f"A tiny fault struck {event.get('target')}."


def test_the_smallest_kind_is_complete():
    assert incomplete(Tiny()) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"colour": None}, "declares no `colour`"),
        ({"words": None}, "declares no `words`"),
        ({"available": None}, "declares no `available`"),
        ({"words": "  "}, "has no words for the room"),
        ({"colour": "red"}, "colour 'red' is not #rrggbb"),
        ({"takes": frozenset({"nht"})}, "takes parameters no scenario can give: nht"),
        ({"available": Availability(frozenset())}, "is available on no backend"),
        ({"reach": "everything"}, "reach 'everything' is not level, proxy or brokers"),
        ({"name": "Tiny Fault"}, "is not lower-case words joined by dashes"),
        ({"live": lambda self, event, point: ""}, "says nothing live"),
        ({"evidence": lambda self, event, where: ""}, "has an empty evidence sentence"),
        ({"live": lambda self, event, point: event["leader"]}, "cannot say a bare record"),
    ],
)
def test_a_kind_missing_a_piece_is_said_incomplete(change, said):
    attrs = {k: v for k, v in change.items() if v is not None}
    broken = type("Broken", (Tiny,), attrs)
    for attr in (k for k, v in change.items() if v is None):
        broken = _without(attr)
    problems = incomplete(broken())
    assert any(said in p for p in problems), problems


def _without(attr: str) -> type:
    """A kind class like Tiny that never declared `attr` (FaultKind only annotates it)."""
    namespace = {k: v for k, v in vars(Tiny).items() if k not in (attr, "__dict__")}
    return type("Broken", (FaultKind,), namespace)


def test_a_kind_with_no_evidence_method_cannot_even_be_made():
    namespace = {k: v for k, v in vars(Tiny).items() if k not in ("evidence", "__dict__")}
    with pytest.raises(TypeError, match="evidence"):
        type("NoEvidence", (FaultKind,), namespace)()


KIND_FILE = """
from engine.faults.base import EVERY_BACKEND, HURT, Availability, FaultKind


class {cls}(FaultKind):
    name = "{name}"
    takes = frozenset()
    available = Availability(EVERY_BACKEND)
    reach = "level"
    words = "{words}"
    colour = HURT

    def fire(self, fault, nemesis):
        nemesis.record(self.name)

    def live(self, event, point):
        return "struck"

    def evidence(self, event, where):
        return None


KIND = {cls}()
"""


def _package(tmp_path: Path, name: str, files: dict[str, str]) -> tuple[list[str], str]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for file, text in files.items():
        (folder / file).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    return [str(folder)], name


def test_a_new_kind_is_one_new_file(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    path, package = _package(
        tmp_path,
        "kinds_one_file",
        {"new_fault.py": KIND_FILE.format(cls="NewFault", name="new-fault", words="new")},
    )
    found = discover(path, package)
    assert list(found) == ["new-fault"]
    assert found["new-fault"].words == "new"


def test_an_incomplete_kind_file_stops_the_registry_with_what_it_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    path, package = _package(
        tmp_path,
        "kinds_incomplete",
        {"quiet.py": KIND_FILE.format(cls="Quiet", name="quiet", words="")},
    )
    with pytest.raises(TypeError, match=r"kinds_incomplete/quiet.py: .*no words for the room"):
        discover(path, package)


def test_a_kind_in_a_file_not_named_after_it_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    path, package = _package(
        tmp_path,
        "kinds_misnamed",
        {"other.py": KIND_FILE.format(cls="Quiet", name="quiet", words="quiet")},
    )
    with pytest.raises(TypeError, match="holds the kind 'quiet': one file per kind"):
        discover(path, package)


# ---- every kind, fired, writes a record the room can read ------------------------------------


class _Logged:
    """A cluster, a proxy and a client process that log what is asked of them: the kinds'
    own logic under test, no Kafka (the integration tests fire them for real)."""

    backend, node_ids, direct_bootstrap, pid, base = "local", [1, 2, 3], "x:1", 42, "producer"
    name = "producer"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def proxy_control(self) -> _Logged:
        return self

    def leader_of(self, topic: str, partition: int = 0) -> int:
        return 2

    def active_controller(self, timeout: float = 10.0) -> int:
        return 1

    def partition_replicas(self, topic: str, partition: int = 0) -> list[int]:
        return [2, 1, 3]

    def reset_connections(self) -> int:
        return 3

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.log.append(name) or 7


class _Records:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, ev: str, **attrs: Any) -> None:
        self.lines.append({"ev": ev, "t": 0.0, **attrs})


def _nemesis_over(logged: _Logged, history: _Records) -> Nemesis:
    """A nemesis whose cluster and processes record the calls made on them."""
    ctx = NemesisContext(
        cluster=logged,  # type: ignore[arg-type]
        topic="t",
        client_ids={"producer": "run-level-producer"},
        processes=lambda base: logged,  # type: ignore[arg-type, return-value]
        replace=lambda base, fault: None,
        history=history,  # type: ignore[arg-type]
    )
    return Nemesis([], ctx)


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_fired_writes_a_record_the_room_reads(name):
    log: list[str] = []
    logged = _Logged(log)
    history = _Records()
    nemesis = _nemesis_over(logged, history)
    nemesis.killed_nodes, nemesis.node_roles = {2}, {"leader": 2}  # for restart and wipe
    nemesis.paused_nodes = {3}  # for resume-nodes
    nemesis.frozen = [logged]  # type: ignore[list-item]  # for resume
    nemesis.fire(faults.Fault(kind=name))
    for thread in nemesis.restarting:
        thread.join(timeout=5)
    records = [line for line in history.lines if line["ev"] == "nemesis"]
    assert records, f"{name} fired and recorded nothing"
    first = records[0]
    said = nemesis_text(first)
    assert said and said != from_name(str(first["kind"])), (name, first)


def test_a_follower_frozen_at_0_s_is_wholly_frozen_before_the_first_message():
    """The follower's last fetch request waits at the leader for replica.fetch.wait.max.ms
    (500 ms in Kafka 4.1.2): the run waits that out after the freeze before any client sends,
    and waits nothing for a fault that needs no settling."""
    logged = _Logged([])
    nemesis = _nemesis_over(logged, _Records())
    began = time.monotonic()
    nemesis.fire(faults.Fault(kind="kill-leader"))
    nemesis.wait_settled()
    assert time.monotonic() - began < 0.3
    nemesis.fire(faults.Fault(kind="pause-follower"))
    nemesis.wait_settled()
    assert time.monotonic() - began >= 0.5
    assert KINDS["pause-follower"].settle_s(faults.Fault(kind="pause-follower")) > 0.5


def test_the_kinds_that_take_the_leader_away_say_so_themselves():
    """explain's leader-loss sentences ask the kind (takes_leader_away), not its name."""
    from engine.faults import KINDS, takes_leader_away

    assert {name for name, kind in KINDS.items() if kind.takes_leader_away} == {
        "kill-leader",
        "stop-leader",
    }
    assert takes_leader_away({"ev": "nemesis", "kind": "kill-leader", "node": 1})
    assert not takes_leader_away({"kind": "kill-follower", "node": 2})
    assert not takes_leader_away({"kind": "kill-leader", "source": "proxy"})
    assert not takes_leader_away({"kind": "isr", "isr": [1]})


# ---- a new kind with a parameter and a residue of its own, in one file ------------------------

SQUEAK_FILE = """
from pydantic import BaseModel, ConfigDict, Field

from engine.faults.base import EVERY_BACKEND, HURT, Availability, FaultKind

SQUEAKING = []  # what the kind leaves in force: its residue, until the nemesis heals


class SqueakParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    squeak_ms: float = Field(gt=0)  # a parameter no other kind takes
    loud: bool = False


class Squeak(FaultKind):
    name = "squeak"
    takes = frozenset({"target", "squeak_ms", "loud"})
    own_params = SqueakParams
    available = Availability(EVERY_BACKEND)
    reach = "level"
    words = "squeaked"
    colour = HURT

    def fire(self, fault, nemesis):
        squeak = (fault.target, fault.squeak_ms, fault.loud)
        SQUEAKING.append(squeak)
        nemesis.on_heal("the squeak", lambda: SQUEAKING.remove(squeak))
        nemesis.record(self.name, target=fault.target, squeak_ms=fault.squeak_ms)

    def live(self, event, point):
        return f"{event.get('target')} squeaked for {event.get('squeak_ms')} ms"

    def evidence(self, event, where):
        return f"{event.get('target')} squeaked for {event.get('squeak_ms')} ms."


KIND = Squeak()
"""


def test_a_new_kind_with_its_own_parameter_and_residue_is_one_file(tmp_path, monkeypatch):
    """The kind's file alone: a scenario gives its parameter (checked by its own model,
    its default filled in), the nemesis fires it, heal undoes what it left in force, and
    the live view and the evidence say it. No other file names it."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    path, package = _package(tmp_path, "kinds_squeak", {"squeak.py": SQUEAK_FILE})
    squeak = discover(path, package)["squeak"]
    monkeypatch.setitem(KINDS, "squeak", squeak)
    squeaking = sys.modules[f"{package}.squeak"].SQUEAKING

    text = (Path("scenarios") / "ack-loss.yaml").read_text()
    data = yaml.safe_load(text)
    data["faults"] = [{"kind": "squeak", "target": "producer", "squeak_ms": 5}]
    scenario = parse_scenario(yaml.safe_dump(data))
    [fault] = scenario.faults
    assert (fault.squeak_ms, fault.loud) == (5, False)
    with pytest.raises(ScenarioError, match="squeak_ms"):
        parse_scenario(yaml.safe_dump({**data, "faults": [{"kind": "squeak", "squeak_ms": -1}]}))
    with pytest.raises(ScenarioError, match="squeak does not take ms"):
        parse_scenario(
            yaml.safe_dump({**data, "faults": [{"kind": "squeak", "squeak_ms": 1, "ms": 3}]})
        )
    with pytest.raises(ScenarioError, match="crash does not take squeak_ms"):
        parse_scenario(yaml.safe_dump({**data, "faults": [{"kind": "crash", "squeak_ms": 1}]}))

    history = _Records()
    nemesis = _nemesis_over(_Logged([]), history)
    nemesis.fire(fault)
    assert squeaking == [("producer", 5.0, False)]
    nemesis.heal()
    assert squeaking == []
    [record] = [line for line in history.lines if line["ev"] == "nemesis"]
    assert nemesis_text(record) == "producer squeaked for 5.0 ms"
    assert squeak.evidence(record, None) == "producer squeaked for 5.0 ms."
    assert faults.fault_words("squeak") == "squeaked"


def test_own_parameters_may_not_shadow_the_shared_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    shadowing = SQUEAK_FILE.replace("squeak_ms: float", "ms: float").replace(
        '"squeak_ms", "loud"', '"ms", "loud"'
    )
    path, package = _package(tmp_path, "kinds_shadow", {"squeak.py": shadowing})
    with pytest.raises(TypeError, match="own parameters the shared ones already name: ms"):
        discover(path, package)


def test_what_a_scenarios_faults_hurt_beyond_its_levels_is_said_from_their_reach():
    """The page asks the cluster alone with these words (pages/_run_control.cluster_use)."""
    assert faults.beyond_level_words([faults.Fault(kind="crash")]) is None
    assert faults.beyond_level_words([faults.Fault(kind="kill-leader")]) == "brokers"
    wide = faults.Fault(kind=sorted(faults.PROXY_WIDE_FAULTS)[0], duration_s=1.0)
    assert faults.beyond_level_words([faults.Fault(kind="crash"), wide]) == "the whole network"
    assert faults.beyond_level_words([wide, faults.Fault(kind="kill-leader")]) == "brokers"
