"""The Python half of the made-up Java sink (JavaSink.java beside it): its declaration. Copied
into the role registry's path by tests/integration/test_new_java_role.py; nothing else of the
engine is edited for it to play the sink of its scenario's levels."""

from __future__ import annotations

from engine.model.events import Event
from engine.roles.registry import Role
from engine.roles.specs import SinkSpec

ROLE = Role(
    name="java-sink-demo",
    entry="lab.demo.JavaSink",
    java=True,
    part="sink",
    spec_model=SinkSpec,  # what JavaSink.java checks its spec against (Spec.load)
    events=frozenset({Event.START, Event.ASSIGNED, Event.CONSUMED, Event.DONE}),
    about="A made-up sink on the Java consumer, for a test.",
    serves=lambda scenario, level: scenario.name == "java-sink-demo",
)
