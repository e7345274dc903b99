"""The workload's producer: writes uniquely identified JSON messages and records each fate.

Events: `send` (the message was handed to librdkafka), `ack` (the broker confirmed it, with
its partition and offset), `fail` (librdkafka gave up), and for transactional producers
`txn_begin`, `txn_commit`, `txn_abort`, `txn_open` (held open on purpose) and `fenced`.

Non-batch workloads flush after every message, so each message is its own Produce request
and "the third request" in a scenario means the third message.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from engine.history import HistoryWriter
from engine.roles.common import (
    FatalErrors,
    StopFlag,
    client_logger,
    load_spec,
    make_value,
    printable,
)


def run(spec: dict[str, Any]) -> int:
    history = HistoryWriter(spec["history"], spec["name"])
    stop = StopFlag()
    conf = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": spec["client_id"],
        # Batch mode: hold messages until the final flush (which sends at once), so that a
        # slow moment on a busy machine cannot split "the batch" into two requests.
        "linger.ms": 5000 if spec.get("batch") else 0,
        "logger": client_logger(),
        **spec["config"],
    }
    fatal = FatalErrors()
    conf["error_cb"] = fatal
    txn = spec.get("transactional")
    if txn:
        conf["transactional.id"] = txn["id"]
    producer = Producer(conf)
    history.write("start", config=printable(conf))

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        message_id = int(msg.key())
        if err is None:
            history.write("ack", id=message_id, partition=msg.partition(), offset=msg.offset())
        else:
            history.write("fail", id=message_id, error=err.name(), reason=err.str())

    def send(message_id: int) -> None:
        value = make_value(message_id, spec["run_id"], spec["level"], spec["name"])
        history.write("send", id=message_id)
        while True:
            try:
                producer.produce(spec["topic"], value, key=str(message_id), on_delivery=on_delivery)
                return
            except BufferError:
                producer.poll(0.05)

    ids: list[int] = spec["ids"]
    interval = 1.0 / spec["rate"] if spec.get("rate") else 0.0
    try:
        if txn:
            run_transactions(producer, history, stop, ids, send, txn, bool(spec.get("batch")))
        else:
            for message_id in ids:
                if stop.stopped:
                    break
                began = time.monotonic()
                send(message_id)
                if not spec.get("batch"):
                    producer.flush(spec.get("flush_timeout_s", 120))
                if interval:
                    time.sleep(max(0.0, interval - (time.monotonic() - began)))
        remaining = producer.flush(spec.get("flush_timeout_s", 120))
        history.write("done", unflushed=remaining)
        return 0
    except KafkaException as exc:
        kind, error = fatal.classify(exc.args[0], producer)
        history.write(kind, error=error.name(), reason=error.str())
        return 3


def run_transactions(producer, history, stop, ids, send, txn: dict[str, Any], batch: bool) -> None:
    """Send `ids` in transactions of `size`; abort the ones listed, hold one open if asked."""
    producer.init_transactions(30)
    history.write("txn_init", transactional_id=txn["id"])
    size = int(txn.get("size", 5))
    aborts = set(txn.get("abort", []))
    hold = txn.get("hold_open") or {}
    for index, start in enumerate(range(0, len(ids), size)):
        if stop.stopped:
            break
        chunk = ids[start : start + size]
        producer.begin_transaction()
        history.write("txn_begin", txn=index, ids=chunk)
        for message_id in chunk:
            send(message_id)
            if not batch:
                producer.flush(120)  # one Produce request per message, as outside transactions
        producer.flush(120)
        if hold.get("txn") == index:
            history.write("txn_open", txn=index, seconds=hold["seconds"])
            time.sleep(float(hold["seconds"]))
        if index in aborts:
            producer.abort_transaction(30)
            history.write("txn_abort", txn=index, ids=chunk)
        else:
            producer.commit_transaction(30)
            history.write("txn_commit", txn=index, ids=chunk)


if __name__ == "__main__":
    raise SystemExit(run(load_spec()))
