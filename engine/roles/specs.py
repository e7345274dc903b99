"""What each role is told when it starts: one typed spec per role, shared with Java as a schema.

A level run builds a role's spec (engine/run/level_run.py), checks it against the role's
model here before any process starts, and writes it as the JSON file the role reads. A
Python role loads that file into the same model (`engine.roles.common.load_spec`); a Java
role checks it against the JSON Schema written from the model
(java/src/main/resources/lab/specs/MODEL.schema.json, by engine/roles/schemas.py; read by
lab.common.Spec). A field misspelt or missing on either side stops the role at its start
with the field's name, not halfway through a run.

Why pydantic, not dataclasses: the scenario files already go through it
(engine/scenarios/scenario.py), and it writes the JSON Schema that the Java side checks.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class FailPointSpec(BaseModel):
    """A fault point armed from outside: stop at its `count`-th `event` (engine/proc/failpoints)."""

    model_config = ConfigDict(extra="forbid")
    event: str
    count: int = Field(ge=1)


class RoleSpec(BaseModel):
    """What every role is told: where Kafka is, its name, where its history goes."""

    model_config = ConfigDict(extra="forbid")
    bootstrap: str
    name: str  # "producer", "producer#2", ...: the process's name in the history
    history: str  # the JSON-lines file its events go to
    run_id: str | None = None
    level: str | None = None
    failpoint: FailPointSpec | None = None


class ResumeSpec(BaseModel):
    """How a replacement producer decides what to send: the application's choice."""

    model_config = ConfigDict(extra="forbid")
    policy: Literal["never-resend", "resend-unacked", "read-committed"]
    outbox: str


class ProducerSpec(RoleSpec):
    """The producing application (engine/roles/producer.py, lab.producer.JavaProducer)."""

    client_id: str
    topic: str
    ids: list[int]
    partitions: int = Field(ge=1)
    rate: float | None = None  # messages per second; None: as fast as it can
    batch: bool = False  # send without waiting for each acknowledgement
    config: dict[str, Any]  # the level's producer settings, by Kafka's names
    outbox: str | None = None  # where it marks what it sent and what was acknowledged
    # The transaction block: id, size, owner_file, restart_when_fenced and the scenario's
    # own keys (engine/scenarios/scenario.py validates those); None: not transactional.
    transactional: dict[str, Any] | None = None
    resume: ResumeSpec | None = None  # set for a replacement
    start_gate: str | None = None  # a file whose appearance starts the sends (free play)
    value_bytes: int | None = None  # pad each value to this size (the cost benchmark)
    flush_timeout_s: float = Field(default=120, gt=0)  # how long its final flush may take


class ProcessorSpec(RoleSpec):
    """The consume-process-produce application on librdkafka (engine/roles/processor.py)."""

    client_id: str
    group: str
    instance_id: str  # group.instance.id: a replacement is the same static member
    input: str
    output: str
    partitions: int = Field(ge=1)
    mode: str  # how it commits: engine/model/levels.py PROCESSOR_MODES, or "auto-commit"
    await_auto_commit: bool = False
    commit_every: int = Field(ge=1)
    processing_ms: float = Field(ge=0)
    config: dict[str, Any]  # its producer's settings
    consumer_config: dict[str, Any]
    transactional_id: str
    owner_file: str
    restart_when_fenced: bool


class StreamsSpec(RoleSpec):
    """The Kafka Streams application (lab.streams.StreamsProcessor), engine/scenarios/streams.py."""

    application_id: str
    instance_id: str
    client_id: str
    input: str
    output: str
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"]
    commit_interval_ms: int | None = None  # None: Kafka Streams' own default
    accounts: int = Field(ge=1)
    processing_ms: float = Field(ge=0)
    state_dir: str


class SinkSpec(RoleSpec):
    """The downstream consumer a level is judged by (engine/roles/sink.py)."""

    client_id: str
    group: str
    topic: str
    partitions: int = Field(ge=1)
    config: dict[str, Any]
    # The idempotency-key level's database: {"kind": "sqlite"|"postgres", ...}; None: none.
    dedup_store: dict[str, Any] | None = None


class ShareWorkerSpec(RoleSpec):
    """A share group's member (engine/roles/share_worker.py, lab.share.JavaShareWorker)."""

    group: str
    input: str
    output: str
    ack: Literal["after-output", "before-processing"] = "after-output"
    poison_ids: list[int] = []  # records whose processing always fails (RELEASEd)
    work_ms: int = Field(default=0, ge=0)  # how long each record's processing takes
    # Ask for more time every so often while working (RENEW, KIP-1222): the Java client only;
    # librdkafka 2.16's ShareConsumer has no RENEW, and its worker refuses the setting.
    renew_every_ms: int = Field(default=0, ge=0)
    idle_after_s: float = Field(default=5.0, gt=0)
    consumer: dict[str, Any] = {}  # more share-consumer settings, by Kafka's names
