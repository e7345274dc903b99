"""The events are one enum (engine/model/events.py): every name written and every name a reader
compares against is a member, and every member has the room's words.

Found by reading the code, as test_words does for the writers: a reader that compares `ev`
with a misspelt or undeclared name fails here instead of silently never matching.
"""

from __future__ import annotations

import ast
import re

from engine.base import paths
from engine.model.events import Event, NemesisRecord, ProxyRecord, java_source
from engine.model.words import EVENT_TEMPLATES, EVENT_WORDS, PROXY_WORDS, RECORD_WORDS
from tests.unit.test_words import event_name, history_events

ROOT = paths.REPO_ROOT
READERS = [*sorted((ROOT / "engine").rglob("*.py")), *sorted((ROOT / "pages").glob("*.py"))]


def is_ev(node: ast.AST, field: str = "ev") -> bool:
    """`ev`, `x.get("ev")` or `x["ev"]`: an event's name read from a history line (or the
    same of another field: "kind")."""
    if isinstance(node, ast.Name):
        return node.id == field
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and bool(node.args) and _is_text(node.args[0], field)
    if isinstance(node, ast.Subscript):
        return _is_text(node.slice, field)
    return False


def _is_text(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def compared_names(source: str) -> set[str]:
    """Every string an event's name is compared with (==, !=, in, not in) in `source`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not is_ev(node.left):
            continue
        for other in node.comparators:
            items = other.elts if isinstance(other, ast.Tuple | ast.List | ast.Set) else [other]
            found |= {name for i in items if (name := event_name(i)) is not None}
    return found


def bare_names(source: str, field: str = "ev") -> set[str]:
    """The strings (not members) that a line's `field` (its event's name, or a record's kind)
    is compared with in `source`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and is_ev(node.left, field):
            for other in node.comparators:
                items = other.elts if isinstance(other, ast.Tuple | ast.List | ast.Set) else [other]
                found |= {
                    i.value
                    for i in items
                    if isinstance(i, ast.Constant) and isinstance(i.value, str)
                }
    return found


def test_every_event_written_is_a_member():
    made = {name for names in EVENT_TEMPLATES.values() for name in names}
    assert history_events() | made <= set(Event)


def test_every_member_has_the_rooms_words_and_nothing_else_does():
    assert set(EVENT_WORDS) == set(Event)


def test_every_name_a_reader_compares_with_is_a_member():
    unknown = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in READERS
        for name in compared_names(path.read_text())
        if name not in set(Event)
    }
    assert not unknown, sorted(unknown)


def test_every_record_kind_has_words_and_no_reader_names_one_bare():
    """The nemesis's and the proxy's record kinds are members with the room's words, and the
    engine and the pages compare a record's `kind` with members, not bare names."""
    assert set(RECORD_WORDS) == set(NemesisRecord)
    assert set(PROXY_WORDS) == set(ProxyRecord)
    records = set(NemesisRecord) | set(ProxyRecord)
    bare = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in READERS
        for name in bare_names(path.read_text(), "kind") & records
    }
    assert not bare, sorted(bare)


def test_the_java_roles_events_are_made_from_this_enum():
    """java/.../Events.java is `python -m engine.model.events --java`'s output, and no Java role
    writes an event by a bare string."""
    made = ROOT / "java/src/main/java/lab/common/Events.java"
    assert made.read_text() == java_source(), "run `python -m engine.model.events --java`"
    for path in sorted((ROOT / "java/src/main/java").rglob("*.java")):
        assert not re.search(r'\.write\(\s*"', path.read_text()), path.name


def test_readers_compare_with_members_not_bare_names():
    """`ev == Event.ACK`, never `ev == "ack"`: a misspelt member fails where it is read."""
    bare = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in READERS
        for name in bare_names(path.read_text())
    }
    assert not bare, sorted(bare)
    assert bare_names('if e.get("ev") == "ack" or ev in (Event.SEND, "fail"):\n    pass\n') == {
        "ack",
        "fail",
    }


def test_the_reader_scan_finds_names_and_a_misspelt_one_fails():
    checker = (ROOT / "engine" / "judging" / "checker.py").read_text()
    assert {"send", "ack", "fail", "fenced"} <= compared_names(checker)
    misspelt = 'if event.get("ev") == "sned" or ev in ("ack", "fial"):\n    pass\n'
    assert compared_names(misspelt) - set(Event) == {"sned", "fial"}
