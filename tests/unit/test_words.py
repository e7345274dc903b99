"""Every name the engine writes has the room's words (engine/model/words.py).

The names are found by reading the code, not from a list kept beside it: a role, the nemesis
or the proxy that starts writing a new event fails here until it has words.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

from engine import faults
from engine.base import paths
from engine.model import words
from engine.model.events import Event, NemesisRecord, ProxyRecord
from engine.scenarios.scenario import Fault

ENGINE = paths.REPO_ROOT / "engine"
# The files whose `.write("ev", ...)` calls write history lines.
HISTORY_WRITERS = [
    *sorted((ENGINE / "roles").glob("*.py")),
    ENGINE / "proc" / "failpoints.py",
    ENGINE / "run" / "nemesis.py",
    ENGINE / "run" / "runner.py",
    ENGINE / "run" / "level_run.py",
    ENGINE / "run" / "freeplay.py",
]
# The Java roles (java/src/main/java/lab/) write the same history through History.java.
JAVA_WRITERS = sorted((paths.REPO_ROOT / "java" / "src" / "main" / "java").rglob("*.java"))
FAULT_RECORDERS = [
    *sorted((ENGINE / "faults").glob("*.py")),
    ENGINE / "run" / "nemesis.py",
    ENGINE / "run" / "runner.py",
    ENGINE / "run" / "freeplay.py",
]


def calls(path: Path, method: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and node.args
    ]


NAMES = {"Event": Event, "NemesisRecord": NemesisRecord, "ProxyRecord": ProxyRecord}


def event_name(node: ast.AST) -> str | None:
    """The name a node gives: a member (`Event.SEND` is "send", `NemesisRecord.ISR` "isr"),
    or a bare string."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (names := NAMES.get(node.value.id)) is not None
        and node.attr in names.__members__
    ):
        return names[node.attr].value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def constant_names(paths_: list[Path], method: str) -> set[str]:
    return {
        name
        for path in paths_
        for call in calls(path, method)
        if (name := event_name(call.args[0])) is not None
    }


def history_events() -> set[str]:
    """Every `ev` the roles, the fault points and the nemesis write."""
    found = constant_names(HISTORY_WRITERS, "write") | constant_names(HISTORY_WRITERS, "line")
    for path in HISTORY_WRITERS:  # the producer writes its hot events as preformatted JSON
        text = path.read_text()
        found |= set(re.findall(r'"ev"\s*:\s*"([a-z_]+)"', text))
        found |= {Event[m].value for m in re.findall(r'"ev"\s*:\s*"\{Event\.([A-Z_]+)\}"', text)}
    found |= java_history_events()
    # `history.write(kind, ...)` where kind is what Classifier.classify returns.
    common = (ENGINE / "roles" / "common.py").read_text()
    found |= set(re.findall(r'return "([a-z_]+)", ', common))
    return found


def java_history_events() -> set[str]:
    """Every `ev` a Java role writes: `history.write(Events.NAME, ...)` (or a ternary of two
    such) in java/'s sources; Events.java is made from engine/model/events.py."""
    found: set[str] = set()
    for path in JAVA_WRITERS:
        text = path.read_text()
        for call in re.findall(r"\.write\(\s*([^;]*?)[,)]", text):
            found |= {Event[n].value for n in re.findall(r"\bEvents\.([A-Z_]+)", call)}
        found |= set(re.findall(r'\.write\(\s*"([a-z_]+)"', text))
    return found


def test_the_scan_reads_the_java_roles_too():
    found = java_history_events()
    assert {"failpoint_reached", "consumed", "output_acked", "committed", "restored"} <= found
    assert {"store_opened", "fenced", "idle", "done"} <= found


def test_the_scan_finds_the_events_the_issue_names():
    found = history_events()
    for ev in ("send", "ack", "fail", "consumed", "output_acked", "committed", "commit_gap"):
        assert ev in found
    for ev in ("txn_flushed", "txn_commit", "txn_abort", "fenced", "auto_committed", "error"):
        assert ev in found


def test_every_history_event_has_words():
    missing = sorted(ev for ev in history_events() if ev not in words.EVENT_WORDS)
    assert not missing, f"history events with no room words in engine/model/words.py: {missing}"


def test_every_event_name_made_with_an_f_string_is_known():
    """A name made at run time (txn_{what}_retry) is listed with every name it makes."""
    for path in HISTORY_WRITERS:
        for call in calls(path, "write"):
            first = call.args[0]
            if isinstance(first, ast.JoinedStr):
                template = ast.unparse(first)[2:-1]  # f'txn_{what}_retry' -> txn_{what}_retry
                assert template in words.EVENT_TEMPLATES, f"{path.name}: {template}"
            elif isinstance(first, ast.Name):
                # Only `kind`, from Classifier.classify ("fenced" or "error"), is known.
                assert first.id == "kind", f"{path.name}:{call.lineno}: write({first.id}, ...)"
    for made in words.EVENT_TEMPLATES.values():
        assert set(made) <= set(words.EVENT_WORDS)
    # The names the processor's retried() makes, from its callers' first argument.
    processor = (ENGINE / "roles" / "processor.py").read_text()
    for what in re.findall(r'self\.retried\(\s*"([a-z_]+)"', processor):
        assert f"txn_{what}_retry" in words.EVENT_WORDS


def test_every_fault_kind_has_words():
    """A fault kind says its own words (engine/faults/NAME.py); every other record the nemesis
    or the runner writes has its words in engine.model.words.RECORD_WORDS."""
    kinds = set(faults.KINDS) | constant_names(FAULT_RECORDERS, "record")
    for path in FAULT_RECORDERS:  # nemesis lines written with kind=... directly
        text = path.read_text()
        kinds |= set(re.findall(r'kind="([a-z-]+)"', text))
        kinds |= {
            NemesisRecord[m].value for m in re.findall(r"kind=NemesisRecord\.([A-Z_]+)", text)
        }
    kinds -= {"postgres", "sqlite"}  # the idempotency key's database, not a fault
    assert "crash-skipped" in kinds and "node-ready" in kinds  # the scan reaches the kinds' files
    missing = sorted(
        k
        for k in kinds
        if k not in faults.KINDS and words.record_words(k) is None and words.SKIPPED not in k
    )
    assert not missing, f"fault records with no room words in engine/model/words.py: {missing}"
    for kind in (k for k in kinds if k.endswith(words.SKIPPED)):
        assert faults.fault_words(kind).endswith(": skipped"), kind
    assert faults.fault_words("crash") == "killed"
    assert faults.fault_words("kill-follower-skipped") == "follower killed: skipped"
    assert faults.fault_words("wipe-skipped") == "a replica's partition directory deleted: skipped"


def test_every_proxy_event_has_words():
    server = ENGINE / "proxy" / "server.py"
    kinds = constant_names([server], "emit")
    apis = typing.get_args(Fault.model_fields["api"].annotation)
    kinds |= {f"{api}_{what}_dropped" for api in apis for what in ("request", "response")}
    missing = sorted(k for k in kinds if k not in words.PROXY_WORDS)
    assert not missing, f"proxy events with no room words in engine/model/words.py: {missing}"


@pytest.mark.parametrize(
    ("code", "reason", "said"),
    [
        ("_FENCED", None, "fenced"),
        (
            "_FATAL",
            "Fatal error: Broker: Producer attempted an operation with an old epoch",
            "fenced",
        ),
        ("_FATAL", "Fatal error: something else", "stopped for good"),
        ("NOT_LEADER_OR_FOLLOWER", None, "leader moved"),
        ("REQUEST_TIMED_OUT", None, "timed out"),
        ("INVALID_PRODUCER_EPOCH", None, "fenced"),
        ("SOME_NEW_CODE", None, "some new code"),
    ],
)
def test_error_codes_in_the_rooms_words(code, reason, said):
    assert said in words.error_words(code, reason)
    shown = words.say_error(code, reason)
    assert shown.raw == code and code in shown.text() and code in shown.html()


def test_fault_points_in_the_rooms_words():
    assert words.point_words("after commit_gap #2") == (
        "in the middle of its 2nd batch, outputs and offsets out of step"
    )
    assert "3rd transaction" in words.point_words("after txn_flushed #3")
    assert "txn_flushed" not in words.point_words("after txn_flushed #3")
    assert words.ordinal(11) == "11th" and words.ordinal(22) == "22nd"


def test_the_raw_name_follows_in_small_type():
    said = words.say_event("commit_gap")
    assert said.text() == "outputs and input offsets out of step (commit_gap)"
    assert "<small" in said.html() and "commit_gap" in said.html()
    assert "font-size" in said.plotly()
    assert said.markdown().endswith(":small[`commit_gap`]")
    assert words.Said("x", "x").text() == "x"  # no name twice
    assert words.nodes_words([]) == "none" and words.nodes_words([1, 3]) == "nodes 1 and 3"


def test_raw_codes_in_a_recorded_sentence_are_said_in_the_rooms_words():
    """A run recorded before the evidence was said in words still shows no bare code."""
    from engine.model.words import room_words

    old = (
        "Node 1 answered 2 Produce requests with REQUEST_TIMED_OUT, after 3028.8 ms; the "
        "processor was fenced: _FATAL (Fatal error: Broker: Static consumer fenced)."
    )
    said = room_words(old)
    assert "with the broker timed out (for a write: waiting for its replicas)" in said
    assert ":small[`REQUEST_TIMED_OUT`]" in said
    # librdkafka's generic _FATAL is said from its reason, which follows in small type.
    assert "fenced: a newer member with the same instance id joined the group" in said
    assert ":small[`_FATAL` Fatal error: Broker: Static consumer fenced]" in said
    outside_small = re.sub(r":small\[[^\]]*\]", "", said)
    assert "REQUEST_TIMED_OUT" not in outside_small and "_FATAL" not in outside_small
    # The contrast: the sentence as recorded has them in plain type.
    assert "REQUEST_TIMED_OUT" in old and "_FATAL" in old
    # Replica sets printed as lists, as isr-shrink's evidence was.
    assert room_words("in-sync replicas [1, 3], eligible leader replicas []") == (
        "in-sync replicas nodes 1 and 3, eligible leader replicas none"
    )
    # Already said (the code in code type after its words): left as it is.
    current = "too few in-sync replicas :small[`NOT_ENOUGH_REPLICAS`]"
    assert room_words(current) == current


def test_the_labs_own_names_do_not_reach_the_room():
    """Issue 59: a fault point, a replacement's engine name, a code known only by its number, a
    Java exception's class name said as words, librdkafka's partition format and a replica set
    after "nodes" are said in words; Kafka's or the client's own error name may follow in small
    type, the lab's names do not."""
    from engine.model.words import room_words

    assert words.point_words("after output_acked #12") == "after its 12th output was written"
    assert words.process_words("processor#2") == "processor 2"
    assert words.process_words("producer") == "producer"
    # The proxy names a Produce error it has no name for by number; Kafka's table has it.
    said = words.say_error("error code 51")
    assert said.words == "another transaction of this id is still ending"
    assert said.raw == "CONCURRENT_TRANSACTIONS"
    assert words.say_error("error code 999").words.startswith("an error Kafka numbers 999")
    # A Java exception is said as the Kafka error it carries, or from its own message.
    fenced = words.say_error("FencedInstanceIdException")
    assert fenced.words.startswith("fenced: a newer member") and fenced.raw.endswith("Exception")
    assert "rebalanced" in words.error_words("CommitFailedException")
    assert words.error_words("SomeNewThingException") == "some new thing"
    # Under KIP-848's consumer protocol the newcomer is refused instead.
    assert "KIP-848" in words.error_words("UNRELEASED_INSTANCE_ID")
    # Older recorded sentences, replayed.
    assert room_words("on nodes [2, 3], led by node 2") == "on nodes 2 and 3, led by node 2"
    old = "answered 4 Produce requests: error :small[`error code 51`], after 1 ms"
    assert room_words(old) == (
        "answered 4 Produce requests: another transaction of this id is still ending "
        ":small[`CONCURRENT_TRANSACTIONS`], after 1 ms"
    )
    java = "fenced: fencedinstanceidexception :small[`FencedInstanceIdException`] (The broker...)"
    assert "fencedinstanceidexception" not in room_words(java)
    assert room_words("commit failed: lab.t((null))[0]@12") == (
        "commit failed: lab.t partition 0 at offset 12"
    )


def test_an_epoch_refusal_names_every_cause():
    """INVALID_PRODUCER_EPOCH is not "a newer producer" only: a timed-out abort moves the epoch
    (TransactionCoordinator), and at transaction version 2 every transaction's end does."""
    said = words.error_words("INVALID_PRODUCER_EPOCH")
    assert "newer instance" in said and "timed-out abort" in said
    assert "transaction version 2" in said
