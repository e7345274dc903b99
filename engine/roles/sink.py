"""The sink: a consumer at the level's isolation that records when each message became visible.

It reads every partition of its topic from the beginning and writes a `consumed` event with
the message id, partition, offset and the moment it was read, until it is told to stop.
End-to-end latency is that moment minus the message's `created_at`.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, TopicPartition

from engine.history import HistoryWriter
from engine.roles.common import StopFlag, client_logger, load_spec, parse_value


def run(spec: dict[str, Any]) -> int:
    history = HistoryWriter(spec["history"], spec["name"])
    stop = StopFlag()
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "client.id": spec["client_id"],
            "group.id": spec["group"],
            "enable.auto.commit": False,
            "isolation.level": spec["isolation"],
            "fetch.wait.max.ms": 50,
            "logger": client_logger(),
        }
    )
    consumer.assign([TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])])
    history.write("start", isolation=spec["isolation"])
    try:
        while not stop.stopped:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            value = parse_value(msg.value())
            history.write(
                "consumed",
                id=value["id"] if value else None,
                created_at=value.get("created_at") if value else None,
                partition=msg.partition(),
                offset=msg.offset(),
            )
        history.write("done")
        return 0
    finally:
        consumer.close()


if __name__ == "__main__":
    raise SystemExit(run(load_spec()))
