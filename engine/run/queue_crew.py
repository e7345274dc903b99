"""A share group's crew: workers of one client reading one topic together (KIP-932, issue 64).

The engine's part of a queue run: an input topic and its output topic, the group's own
settings (where a new group starts, the record lock, the delivery limit: group configs, set
through the Admin API), the workers started as roles on the lab's leash
(engine/roles/share_worker.py on librdkafka, lab.share.JavaShareWorker on the Java client),
each writing its history, and the queue checker's judgement (engine/judging/queues.py) over
their merged history and what the output topic holds. tests/integration/test_share_groups.py
drives it on a real broker; a scenario's queue level is to come (issue 64).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from engine.base.errors import LabError
from engine.judging.queues import DEFAULT_DELIVERY_LIMIT, QueueCounts, QueueVerdict, check_queue
from engine.kafka.admin import admin_client, create_topic
from engine.kafka.reader import read_topic
from engine.model.history import HistoryLine, merge, read_jsonl
from engine.model.records import StoredRecord
from engine.proc.processes import RoleProcess
from engine.roles import java_share_worker, share_worker
from engine.roles.registry import Role

# The two clients' share consumers: librdkafka's ShareConsumer (confluent-kafka 2.16, marked
# preview) and the Java client's KafkaShareConsumer (kafka-clients at the lab's version).
WORKER_ROLES: dict[str, Role] = {"librdkafka": share_worker.ROLE, "java": java_share_worker.ROLE}
# A share group starts at the log's end unless its group config says otherwise.
FROM_THE_START = {"share.auto.offset.reset": "earliest"}
# Kafka 4.4's dead-letter topics for share groups (KIP-1191): the broker writes a record it
# gives up on there, if the group names a topic (`errors.deadletterqueue.topic.name`) whose
# name carries the broker's prefix (`errors.deadletterqueue.topic.name.prefix`, "dlq." by
# default) and whose own config allows it (`errors.deadletterqueue.group.enable`). The
# broker creates none by default (`errors.deadletterqueue.auto.create.topics.enable` false),
# so the crew creates it. docs/share-groups-api-research.md, section 4.
DEAD_LETTER_PREFIX = "dlq."


def set_group_configs(bootstrap: str, group: str, configs: Mapping[str, str]) -> None:
    """Set a group's configs, by Kafka's names (`share.auto.offset.reset`,
    `share.record.lock.duration.ms`, `share.delivery.count.limit`...), before it has members."""
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    admin = admin_client(bootstrap)  # held until the answer: a dropped client ends its calls
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


@dataclass
class ShareCrew:
    """Workers of one client in one share group, on one input topic and its output topic."""

    folder: Path  # each worker's spec, history and log
    bootstrap: str
    topic: str
    group: str
    client: str = "librdkafka"
    started: list[RoleProcess] = field(default_factory=list)
    dead_letter_topic: str | None = None  # where the broker writes what it gives up on

    @classmethod
    def create(
        cls,
        bootstrap: str,
        folder: Path,
        *,
        topic: str,
        group: str,
        client: str = "librdkafka",
        group_configs: Mapping[str, str] | None = None,
        dead_letters: bool = False,
        **fields: Any,
    ) -> Self:
        """A crew on a fresh topic (and its output topic) whose group reads from the log's
        start, with `group_configs` besides; `dead_letters`: with a dead-letter topic that
        receives the records the broker gives up on, each with a copy of its key and value
        (Kafka 4.4, KIP-1191); `fields`: a subclass's own."""
        if client not in WORKER_ROLES:
            raise LabError(f"No share worker on {client!r}: {', '.join(WORKER_ROLES)}.")
        crew = cls(folder, bootstrap, topic, group, client, **fields)
        create_topic(bootstrap, crew.topic)
        create_topic(bootstrap, crew.output)
        configs = {**FROM_THE_START, **(group_configs or {})}
        if dead_letters:
            crew.dead_letter_topic = f"{DEAD_LETTER_PREFIX}{topic}"
            create_topic(
                bootstrap,
                crew.dead_letter_topic,
                config={"errors.deadletterqueue.group.enable": "true"},
            )
            configs["errors.deadletterqueue.topic.name"] = crew.dead_letter_topic
            # Without it the broker's record carries only headers (where it came from, why).
            configs["errors.deadletterqueue.copy.record.enable"] = "true"
        set_group_configs(bootstrap, group, configs)
        folder.mkdir(parents=True, exist_ok=True)
        return crew

    @property
    def output(self) -> str:
        return f"{self.topic}-out"

    @property
    def role(self) -> Role:
        return WORKER_ROLES[self.client]

    def start(self, name: str, **settings: Any) -> RoleProcess:
        """A worker named `name`, its ShareWorkerSpec's other fields from `settings`; a
        wrong field is a LabError before any process starts."""
        history = self.folder / f"{name}.jsonl"
        spec = self.role.checked_spec(
            {
                "bootstrap": self.bootstrap,
                "group": self.group,
                "name": name,
                "input": self.topic,
                "output": self.output,
                "history": str(history),
                "idle_after_s": 3,
                **settings,
            }
        )
        process = RoleProcess(
            name=name, role=self.role.entry, java=self.role.java, history=history, spec=spec
        ).start(self.folder)
        self.started.append(process)
        return process

    def events(self, process: RoleProcess, ev: str | None = None) -> list[dict[str, Any]]:
        """A worker's history lines so far (of event `ev` only, if given)."""
        if not process.history.exists():
            return []
        return [e for e in read_jsonl(process.history) if ev is None or e["ev"] == ev]

    def wait_for(
        self, process: RoleProcess, ev: str, count: int = 1, timeout: float = 90.0
    ) -> list[dict[str, Any]]:
        """`count` lines of event `ev` in the worker's history; a LabError if it ends first
        or they do not come within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(found := self.events(process, ev)) >= count:
                return found
            if not process.alive():
                raise LabError(f"{process.name} ended: {process.log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        raise LabError(
            f"{process.name}: no {count} x {ev} in {timeout:.0f} s: {self.events(process)[-10:]}"
        )

    def history(self) -> list[HistoryLine]:
        """Every worker's history, merged in time order."""
        return merge([p.history for p in self.started if p.history.exists()])

    def outputs(self) -> list[StoredRecord]:
        """The output topic as the engine reads it back, to its end."""
        return read_topic(self.bootstrap, self.output, "read_uncommitted", partitions=1)

    def judge(
        self,
        sent_ids: Iterable[int],
        *,
        outputs: list[StoredRecord] | None = None,
        delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
    ) -> tuple[list[QueueVerdict], QueueCounts]:
        """The queue checker's verdicts and counts over the crew's history and `outputs`
        (the output topic read back, when not given)."""
        return check_queue(
            sent_ids=sent_ids,
            history=self.history(),
            outputs=self.outputs() if outputs is None else outputs,
            delivery_limit=delivery_limit,
        )

    def stop_all(self) -> None:
        for process in self.started:
            if process.alive():
                process.stop()
