"""The Kafka Streams processor: java/.../lab/streams/StreamsProcessor.java, a real Kafka Streams
application in its own JVM. It plays the processor of the Kafka Streams levels; its spec and
its evidence are engine/scenarios/streams.py's."""

from __future__ import annotations

from engine.model.events import Event
from engine.roles.registry import Role, Start
from engine.roles.specs import StreamsSpec
from engine.scenarios import streams


def _spec(start: Start) -> dict:
    return streams.streams_spec(start.run, elsewhere=start.beside_a_frozen_one)


ROLE = Role(
    name="streams-processor",
    entry=streams.STREAMS_MAIN,
    java=True,
    part="processor",
    spec_model=StreamsSpec,
    events=frozenset(
        {
            Event.START,
            Event.STORE_OPENED,
            Event.STORE_CHECKED,
            Event.RESTORE_STARTED,
            Event.RESTORED,
            Event.CONSUMED,
            Event.OUTPUT_ACKED,
            Event.OUTPUT_FAILED,
            Event.COMMITTED,
            Event.COMMIT_REJECTED,
            Event.TXN_ABORT,
            Event.FENCED,
            Event.IDLE,
            Event.DONE,
        }
    ),
    about="A Kafka Streams application (a state store and its changelog) in its own JVM.",
    serves=lambda scenario, level: streams.is_streams_level(level),
    make_spec=_spec,
)
