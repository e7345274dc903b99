"""What the card says about the producer's client, from the run's own evidence.

The Java producer (lab.producer.JavaProducer) records the settings its client resolved (the
`start` event's `effective`, defaults included), the exception class each failed message's
callback got, and the error a lost epoch came back as. Where those differ from what librdkafka
does under the same fault (docs/java-client.md, measured in
tests/integration/test_java_producer.py), the card says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from engine.model.events import Event
from engine.model.java_client import java_value

SHOWN = ("acks", "enable.idempotence", "retries", "max.in.flight.requests.per.connection")


def _java_producer(event: dict[str, Any]) -> bool:
    proc = str(event.get("proc", "")).split("#")[0]
    return proc == "producer" and event.get("client") == "java"


def client_evidence(
    history: Sequence[dict[str, Any]], level: str, *, reordered: int = 0
) -> list[str]:
    """Lines on the Java client's own settings and reports; none for a librdkafka run.

    `reordered`: how many messages the checker found stored out of order at this level.
    """
    starts = [e for e in history if e.get("ev") == Event.START and _java_producer(e)]
    if not starts:
        return []
    java_procs = {e["proc"] for e in starts}
    effective = starts[0].get("effective") or {}
    settings = ", ".join(f"{k}={java_value(k, effective[k])}" for k in SHOWN if k in effective)
    lines = [f"The producer was the Java client (kafka-clients); it resolved {settings}."]
    if level == "client-defaults" and effective.get("enable.idempotence") is True:
        lines.append(
            "Given no delivery setting, the Java client chose an idempotent producer: its "
            "retries carry its producer id and sequence numbers, so the broker recognises a "
            "batch it already stored. librdkafka's default is enable.idempotence=false, so "
            "the same lost ack makes a duplicate there."
        )
    failures = Counter(
        (str(e.get("exception")), str(e.get("error")))
        for e in history
        if e.get("ev") == Event.FAIL and e.get("proc") in java_procs and e.get("exception")
    )
    for (exception, error), n in failures.items():
        if error == "_MSG_TIMED_OUT":  # the Sender's own expiry (JavaProducer.describe)
            lines.append(
                f"The Java producer's callback got {exception} for {n} message(s): the "
                "client gave up when delivery.timeout.ms had passed while it retried, and the "
                "broker's last answer never reached the application (librdkafka reports the "
                "same give-up as a timed-out message, `_MSG_TIMED_OUT`; "
                "tests/integration/test_client_errors.py)."
            )
            continue
        lines.append(
            f"The Java producer's callback got {exception} (`{error}`) for {n} message(s): "
            "the exception the application sees."
        )
    if reordered and effective.get("enable.idempotence") is False:
        lines.append(
            f"{reordered} message(s) out of order, from the Java client's retries: a "
            "kafka-clients producer without idempotence puts each failed batch back at the "
            "head of its queue (RecordAccumulator.reenqueue), so requests that failed together "
            "were sent again last-first; an idempotent one puts them back in sequence order. "
            "librdkafka resends them in their first order (leader-moves at at-least-once kept "
            "the order in each of its 5 fidelity runs on librdkafka, benchmarks/README.md)."
        )
    lost_epoch = any(
        e.get("proc") in java_procs
        and e.get("ev") == Event.FENCED
        and e.get("error") == "INVALID_TXN_STATE"
        for e in history
    )
    if lost_epoch:
        lines.append(
            "The Java client reported the lost epoch as InvalidTxnStateException and went "
            "into its fatal error state (librdkafka reports the same commit as a fenced "
            "producer); the application started a new producer either way."
        )
    return lines
