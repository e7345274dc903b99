"""Reading a topic back to its end, at an isolation level: what the checker and a replacement see.

The runner reads the judged topic through the brokers' direct listener after a level; a
replacement transactional producer reads its own topic at read_committed to learn what is
already committed (what Kafka holds, not what a dead process knew).
"""

from __future__ import annotations

import secrets
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from engine.base.errors import LabError
from engine.base.values import parse_value
from engine.kafka import admin
from engine.model.records import StoredRecord


def read_topic(
    bootstrap: str, topic: str, isolation: str, partitions: int, timeout: float = 30.0
) -> list[StoredRecord]:
    """Every record of a topic up to its end, at an isolation level, through `bootstrap`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lab-checker-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            # The end shows as an empty fetch: the broker holds one for fetch.wait.max.ms
            # (500 ms by default), which every run's judgement paid twice per level.
            "fetch.wait.max.ms": 10,
            "logger": admin.log,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[StoredRecord] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise LabError(f"Could not read {topic} to its end within {timeout:.0f} s.")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            value = parse_value(msg.value())
            records.append(
                StoredRecord(
                    partition=msg.partition(),
                    offset=msg.offset(),
                    id=value["id"] if value else None,
                    created_at=value.get("created_at") if value else None,
                )
            )
        return records
    finally:
        consumer.close()


def open_transactions(
    bootstrap: str, topic: str, partitions: int, timeout: float
) -> dict[int, tuple[int, int]]:
    """Wait until no transaction is open on any partition of `topic` (LSO = high watermark).

    Both ends are ListOffsets answers: at read_uncommitted the high watermark, at
    read_committed the last stable offset. Until they meet, a read_committed read stops short
    and an open transaction's records are neither committed nor aborted yet, so a judge must
    wait. Returns {partition: (LSO, HW)} for the partitions still open at the timeout; {} once
    all are stable.
    """

    def consumer(isolation: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lab-checker-{secrets.token_hex(4)}",
                "isolation.level": isolation,
                "logger": admin.log,
            }
        )

    uncommitted, committed = consumer("read_uncommitted"), consumer("read_committed")
    try:
        deadline = time.monotonic() + timeout
        while True:
            still_open: dict[int, tuple[int, int]] = {}
            try:
                for partition in range(partitions):
                    tp = TopicPartition(topic, partition)
                    _, hw = uncommitted.get_watermark_offsets(tp, timeout=5, cached=False)
                    _, lso = committed.get_watermark_offsets(tp, timeout=5, cached=False)
                    if lso != hw:
                        still_open[partition] = (lso, hw)
            except KafkaException as exc:
                # A broker just restarted, or a leader being elected: ask again, within reason.
                if time.monotonic() > deadline:
                    raise LabError(
                        f"The brokers did not report the offsets of {topic} within "
                        f"{timeout:.0f} s ({exc.args[0].str()}); check the cluster with "
                        "`python -m engine cluster status`."
                    ) from None
                time.sleep(0.5)
                continue
            if not still_open or time.monotonic() > deadline:
                return still_open
            time.sleep(0.1)
    finally:
        uncommitted.close()
        committed.close()


class PartitionWatch:
    """A partition's leader, in-sync replicas and high watermark, as the cluster reports them.

    The leader and ISR come from metadata, the high watermark from ListOffsets at
    read_uncommitted: nothing is inferred.
    """

    def __init__(self, bootstrap: str, topic: str, partition: int = 0) -> None:
        self.bootstrap, self.topic, self.partition = bootstrap, topic, partition
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lab-watch-{secrets.token_hex(4)}",
                "logger": admin.log,
                # Refused connections to the nodes a run has killed are expected, not news.
                "log_level": 2,
            }
        )
        self._last: tuple[int, tuple[int, ...], int | None] | None = None

    def sample(self) -> tuple[int, tuple[int, ...], int | None] | None:
        """(leader, ISR, high watermark); None while the cluster does not answer.

        A partition without a leader (-1) is offline: nobody can answer for its high
        watermark, which is then None; so is one whose leader did not answer in time.
        """
        try:
            md = admin.admin_client(self.bootstrap).list_topics(topic=self.topic, timeout=2)
            meta = md.topics[self.topic].partitions[self.partition]
        except (KafkaException, KeyError):
            return None
        if meta.leader < 0:
            return meta.leader, tuple(sorted(meta.isrs)), None
        try:
            tp = TopicPartition(self.topic, self.partition)
            _, hw = self._consumer.get_watermark_offsets(tp, timeout=2, cached=False)
        except KafkaException:
            # A new leader the consumer has not learnt of yet: the change still counts.
            hw = None
        return meta.leader, tuple(sorted(meta.isrs)), hw

    def changed(self) -> tuple[int, tuple[int, ...], int | None] | None:
        """The state when the leader or the ISR changed since the last call, when the high
        watermark went back (a log that lost records), or is read again after it could not
        be; None otherwise. The high watermark moving on with every write is not a change
        worth a line."""
        state = self.sample()
        if state is None:
            return None
        if self._last is not None and state[:2] == self._last[:2]:
            before, now = self._last[2], state[2]
            if now is None:
                return None
            if before is not None and now >= before:
                self._last = state  # remember how far it got, to see it go back
                return None
            # It went back, or it is known again after a leader that had not answered.
        self._last = state
        return state

    def close(self) -> None:
        self._consumer.close()


class StableOffsetWatch:
    """A partition's last stable offset (LSO) and high watermark, as its leader answers them.

    ListOffsets for the latest offset answers the high watermark at read_uncommitted and the
    LSO at read_committed (librdkafka asks at the consumer's isolation level): two consumers,
    one of each, read them; nothing is inferred.
    """

    def __init__(self, bootstrap: str, topic: str, partition: int = 0) -> None:
        self.tp = TopicPartition(topic, partition)
        self._readers = {
            isolation: Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"lab-lso-{secrets.token_hex(4)}",
                    "isolation.level": isolation,
                    "logger": admin.log,
                    "log_level": 2,
                }
            )
            for isolation in ("read_committed", "read_uncommitted")
        }
        self._last: tuple[int, int] | None = None

    def sample(self) -> tuple[int, int] | None:
        """(LSO, high watermark); None while the leader does not answer."""
        try:
            _, lso = self._readers["read_committed"].get_watermark_offsets(
                self.tp, timeout=2, cached=False
            )
            _, hw = self._readers["read_uncommitted"].get_watermark_offsets(
                self.tp, timeout=2, cached=False
            )
        except KafkaException:
            return None
        return lso, hw

    def changed(self) -> tuple[int, int] | None:
        """(LSO, high watermark) when either moved since the last call; None otherwise."""
        state = self.sample()
        if state is None or state == self._last:
            return None
        self._last = state
        return state

    @property
    def last(self) -> tuple[int, int] | None:
        """The (LSO, high watermark) changed() returned last."""
        return self._last

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
