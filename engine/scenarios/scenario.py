"""Scenario files: what a run does, validated with errors that name the file, field and reason.

A scenario names its workload (how many messages, partitions, rate), the pipeline (judge the
input topic, or run a read-process-write processor into an output topic), the fault schedule
and the levels it runs. A teacher copies one and changes it without touching code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.base.errors import LabError
from engine.faults import BROKER_FAULTS, Fault, kind_of
from engine.model.java_client import UntranslatedSetting, to_java
from engine.model.levels import CORE_LEVELS, LEVELS, STREAMS_LEVELS


class ScenarioError(LabError):
    """A scenario file that cannot be read or does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


__all__ = ["Fault", "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]


class Source(_Strict):
    """Where a claim comes from: a KIP, Kafka's or librdkafka's code or documentation (a web
    address), or the lab's own test on a real broker (a path such as
    tests/integration/test_log_views.py::test_name)."""

    label: Annotated[str, Field(min_length=3, max_length=90)]
    url: str

    @field_validator("url")
    @classmethod
    def _address_or_lab_test(cls, value: str) -> str:
        if value.startswith("https://"):
            return value
        path = value.split("::")[0]
        from engine.base import paths

        if path.startswith("tests/") and (paths.REPO_ROOT / path).is_file():
            return value
        raise ValueError(
            f"'{value}' is neither an https:// address nor a test file of the lab "
            "(tests/...py::test_name)"
        )


class KafkaFrom(_Strict):
    """The oldest Kafka release on which a scenario's story holds: a default it relies on
    that older releases lack (eligible leader replicas, on in new clusters from 4.1)."""

    version: Annotated[str, Field(pattern=r"^\d+\.\d+$")]  # major.minor, e.g. "4.1"
    why: Annotated[str, Field(min_length=10)]  # what that release brought, with its source

    def refuses(self, kafka: str) -> bool:
        """Whether a cluster of release `kafka` ("4.0.0") is older than this."""
        have = tuple(int(p) for p in kafka.split(".")[:2])
        return have < tuple(int(p) for p in self.version.split("."))


class Workload(_Strict):
    messages: Annotated[int, Field(gt=0, le=1_000_000)] = 20
    partitions: Annotated[int, Field(gt=0, le=64)] = 1
    rate: Annotated[float, Field(ge=0)] = 0.0  # messages per second; 0 = as fast as possible
    batch: bool = False  # True: send everything, then flush (one request carries them all)
    processing_ms: Annotated[float, Field(ge=0, le=10_000)] = (
        0.0  # the processor's work per message
    )
    commit_every: Annotated[int, Field(gt=0)] = 5  # processor: messages per commit/transaction


class AutoCommit(_Strict):
    """The processor's consumer commits on its own timer (enable.auto.commit=true)."""

    interval_ms: Annotated[int, Field(ge=100, le=60_000)] = 5000  # the clients' default
    # The processor writes its outputs only once the timer has committed the batch (it is
    # slower than the timer), so a fault point on `auto_committed` lands there exactly.
    await_before_output: bool = False


class OnJava(_Strict):
    """Where the Java client behaves differently under this file's faults (measured): what the
    story adds, its sources, and the levels whose `expect` and `teaches` it replaces."""

    note: Annotated[str, Field(min_length=20)]
    sources: list[Source] = Field(default_factory=list)
    expect: dict[str, dict[str, str]] = Field(default_factory=dict)
    teaches: dict[str, dict[str, str]] = Field(default_factory=dict)


class Scenario(_Strict):
    name: str
    title: str
    story: str = ""
    # Where the story's claims come from, shown as footnotes under it.
    sources: list[Source] = Field(default_factory=list)
    nodes: Literal[1, 3] = 1
    pipeline: Literal["producer", "processor"] = "producer"
    levels: list[str] = Field(default_factory=lambda: list(CORE_LEVELS))
    workload: Workload = Workload()
    faults: list[Fault] = Field(default_factory=list)
    topic_config: dict[str, str] = Field(default_factory=dict)
    replication: Annotated[int, Field(gt=0, le=3)] = 1
    # Per-level overrides of the producer's settings (for example acks=1 against acks=all).
    producer_overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    transactions: dict[str, Any] = Field(default_factory=dict)
    # Every level's processor commits on the consumer's timer instead of the level's rule.
    auto_commit: AutoCommit | None = None
    # Place every partition's replicas on nodes that are not the active controller (a
    # follower can then be frozen without stalling the metadata quorum); replication 2.
    replicas_avoid_controller: bool = False
    # The levels run at the same time and suffer the same broker faults, once: every level's
    # partition is placed with the same leader (a node that is not the active controller),
    # so one kill strikes them all at the same moment. Only for a producer pipeline whose
    # faults are all broker faults, each on a timer or on a count of the producers' events
    # (met once every level's producer has reached it; engine.run.runner._run_shared_faults).
    shared_faults: bool = False
    # Record the judged partition's leader, ISR and high watermark whenever they change.
    watch_isr: bool = False
    # Also read its eligible leader replicas (ELR) and last known leader whenever a node
    # fault or an ISR change may have moved them, with Kafka's topic tool (a JVM per read),
    # and collect the brokers' log lines on its unclean elections and truncations.
    watch_elr: bool = False
    # The oldest Kafka release its story holds on, when newer than the lab's oldest (4.0).
    kafka_from: KafkaFrom | None = None
    # Record the judged partition's last stable offset and high watermark whenever either
    # moves (read from its leader at both isolation levels), for the isolation view.
    watch_offsets: bool = False
    # commit.interval.ms of the Kafka Streams levels (engine/scenarios/streams.py); None keeps Kafka
    # Streams' default: 30000 at at_least_once, 100 at exactly_once_v2.
    streams_commit_interval_ms: Annotated[int, Field(ge=0, le=600_000)] | None = None
    # What this file's own settings give (exact where the faults are exact).
    expect: dict[str, dict[str, str]] = Field(default_factory=dict)
    # What must show, at any setting the pages offer, for the lesson to be made (bounds such
    # as at-least-once duplicates >= 1). benchmarks/fidelity.py measures how often it does.
    teaches: dict[str, dict[str, str]] = Field(default_factory=dict)
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 60.0
    # The producer's client: librdkafka (confluent_kafka) or the Java client (kafka-clients),
    # given the level's settings as engine/model/java_client.py translates them.
    client: Literal["librdkafka", "java"] = "librdkafka"
    # Applied when the client is java (_on_the_java_client): the story's addition, its sources
    # and the levels' expectations.
    on_java: OnJava | None = None
    # The downstream consumer (the sink) reads at this isolation.level at every level in place
    # of the level's own (engine.model.levels): the application's choice, as a consumer left at the
    # Java client's default (read_uncommitted) would make. None keeps each level's.
    sink_isolation: Literal["read_committed", "read_uncommitted"] | None = None

    def unmet_expectations(self, results: dict[str, dict[str, Any]]) -> list[str]:
        """Where a run's results break this file's `expect` block, one line per broken promise.

        An expectation is "3" (exactly), ">=1" (at least) or "<=2" (at most).
        """
        return _unmet(self.expect, results)

    def lesson_missed(self, results: dict[str, dict[str, Any]]) -> list[str]:
        """Where a run did not show what the scenario teaches (its `teaches` block)."""
        return _unmet(self.teaches, results)

    @property
    def runs_kafka_streams(self) -> bool:
        """Its processor is the Kafka Streams application (java/,
        engine/scenarios/streams.py), which commits on its own timer (commit.interval.ms), not every
        commit_every messages."""
        return any(level in STREAMS_LEVELS for level in self.levels)

    def cannot_teach(self) -> str | None:
        """Why these settings cannot make the lesson, said before a run; None if they can.

        A fault point on the processor's k-th commit gap needs k batches; one on its k-th
        consumed message or output needs k messages.
        """
        workload = self.workload
        if self.runs_kafka_streams and workload.partitions != 1:
            return (
                "The Kafka Streams application counts each account in one task, with no "
                "repartition topic, so it reads one input partition: set Partitions to 1."
            )
        batches = -(-workload.messages // workload.commit_every)
        for fault in self.faults:
            when = fault.when
            # A transactional producer's k-th transaction step needs k transactions.
            if (
                when.process == "producer"
                and when.event in ("txn_begin", "txn_flushed", "txn_commit")
                and when.count > batches
            ):
                return (
                    f"With {workload.messages} messages and {workload.commit_every} per "
                    f"transaction the producer writes {batches} transaction(s), and the "
                    f"{fault.kind} happens in transaction {when.count}: it would never happen. "
                    f"Use at least {(when.count - 1) * workload.commit_every + 1} messages, or "
                    "fewer per transaction."
                )
            if when.event is None or when.process != "processor":
                continue
            if when.event in ("commit_gap", "auto_committed") and when.count > batches:
                return (
                    f"With {workload.messages} messages and {workload.commit_every} per commit "
                    f"the processor reads {batches} batch(es), and the {fault.kind} happens in "
                    f"batch {when.count}: it would never happen. Use at least "
                    f"{(when.count - 1) * workload.commit_every + 1} messages, or fewer per "
                    "commit."
                )
            if when.event in ("consumed", "output_acked") and when.count > workload.messages:
                return (
                    f"The {fault.kind} happens after message {when.count}, and the run has "
                    f"{workload.messages}: it would never happen. Use more messages."
                )
        for fault in self.faults:
            kind = kind_of(fault.kind)
            if (
                why := kind.cannot_teach(
                    fault, workload.messages, workload.batch, workload.commit_every
                )
            ) is not None:
                return why
        aborted = self.transactions.get("abort") or []
        if aborted and max(aborted) >= batches:
            return (
                f"Transaction {max(aborted) + 1} is the one aborted, and {workload.messages} "
                f"messages at {workload.commit_every} per transaction make {batches}: nothing "
                "would be aborted. Use more messages, or fewer per transaction."
            )
        return None

    @model_validator(mode="before")
    @classmethod
    def _on_the_java_client(cls, data: Any) -> Any:
        """With `client: java` (in the file, from --client or the page's choice), the on_java
        block is applied: the story's Java paragraph, its sources, its expectations. It is
        applied once and dropped, so the result's dump validates to itself (a run's copy)."""
        if not isinstance(data, dict) or data.get("client") != "java" or not data.get("on_java"):
            return data
        java = OnJava.model_validate(data["on_java"])
        sources = [
            dict(s) if isinstance(s, dict) else s.model_dump() for s in data.get("sources", [])
        ]
        return {
            **data,
            "story": f"{str(data.get('story', '')).rstrip()}\n\n**On the Java client:** "
            + java.note,
            "sources": [*sources, *(s.model_dump() for s in java.sources)],
            "expect": {**data.get("expect", {}), **java.expect},
            "teaches": {**data.get("teaches", {}), **java.teaches},
            "on_java": None,
        }

    @model_validator(mode="after")
    def _expectations_are_well_formed(self) -> Scenario:
        java = (self.on_java.expect, self.on_java.teaches) if self.on_java else ()
        for block in (self.expect, self.teaches, *java):
            for level, fields in block.items():
                for field, expectation in fields.items():
                    if not re.fullmatch(rf"\s*{EXPECTATION}\s*", expectation):
                        raise ValueError(
                            f"{level}.{field}: '{expectation}' is not a count such as 3, >=1 or <=0"
                        )
        return self

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", value):
            raise ValueError("use lower-case letters, digits and dashes (it becomes a topic name)")
        return value

    @field_validator("levels")
    @classmethod
    def _known_levels(cls, value: list[str]) -> list[str]:
        for level in value:
            if level not in LEVELS:
                raise ValueError(f"unknown level '{level}'; known levels: {', '.join(LEVELS)}")
        if not value:
            raise ValueError("name at least one level")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.replication > self.nodes:
            raise ValueError(f"replication {self.replication} needs at least that many nodes")
        if self.replicas_avoid_controller and (self.nodes, self.replication) != (3, 2):
            raise ValueError(
                "replicas_avoid_controller places 2 replicas on the 2 nodes that are not the "
                "controller: use nodes: 3 and replication: 2"
            )
        if self.auto_commit is not None:
            if self.pipeline != "processor":
                raise ValueError("auto_commit is the processor's: use pipeline: processor")
            transactional = [name for name in self.levels if LEVELS[name].transactional]
            if transactional:
                raise ValueError(
                    f"auto_commit replaces the level's commit, and {', '.join(transactional)} "
                    "commits inside its transaction: leave it out of `levels`"
                )
        for index, fault in enumerate(self.faults):
            why = kind_of(fault.kind).available.refused_in(self.nodes, self.pipeline)
            if why is not None:
                raise ValueError(f"faults.{index}: {fault.kind} cannot run here: {why}")
        if self.shared_faults:
            self._check_shared_faults()
        self._check_streams_levels()
        self._check_client()
        for level in self.producer_overrides:
            if level not in self.levels:
                raise ValueError(
                    f"producer_overrides names '{level}', which the scenario does not run"
                )
        return self

    def _check_streams_levels(self) -> None:
        """The Kafka Streams role counts per account without a repartition topic, so every
        payment of an account must reach the same task: one input partition."""
        if not self.runs_kafka_streams:
            return
        if self.pipeline != "processor" or self.workload.partitions != 1:
            streams = [name for name in self.levels if name in STREAMS_LEVELS]
            raise ValueError(
                f"{', '.join(streams)} run the Kafka Streams processor: use pipeline: processor "
                "and workload.partitions: 1"
            )

    def _check_client(self) -> None:
        """The Java client runs the producer role only: a processor pipeline's roles are
        librdkafka's (the Kafka Streams processor is its own role)."""
        if self.on_java is not None and self.pipeline != "producer":
            raise ValueError("on_java describes the Java producer; use pipeline: producer")
        if self.client == "java" and self.pipeline != "producer":
            raise ValueError("client: java runs the producer; use pipeline: producer")
        if self.client == "java":  # every level's settings must have a Java name, or a reason
            for level in self.levels:
                config = {**LEVELS[level].producer, **self.producer_overrides.get(level, {})}
                try:
                    to_java(config)
                except UntranslatedSetting as exc:
                    raise ValueError(f"producer_overrides.{level}: {exc}") from None

    def _check_shared_faults(self) -> None:
        if self.pipeline != "producer":
            raise ValueError("shared_faults is for pipeline: producer")
        if self.nodes != 3 or self.replication < 2:
            raise ValueError(
                "shared_faults places one leader and its followers: use nodes: 3 "
                "and replication: 2 or 3"
            )
        for fault in self.faults:
            when = fault.when
            if fault.kind not in BROKER_FAULTS or when.process not in (None, "producer"):
                raise ValueError(
                    "shared_faults strikes every level with the same broker faults, on a "
                    f"timer or on the producers' events: '{fault.kind}' must be a broker "
                    "fault with when: {at_s: ...} or when: {process: producer, ...}"
                )
        # Each level's ISR and ELR are read apart (engine.run.replica_watches); the LSO watch is
        # a level's own (engine.run.level_run), not wired through the shared loop.
        if self.watch_offsets or self.replicas_avoid_controller:
            raise ValueError(
                "shared_faults places the replicas itself (never on the active controller "
                "when replication is 2) and does not watch the LSO: leave out watch_offsets "
                "and replicas_avoid_controller"
            )


def _describe(error: dict[str, Any]) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"] and re.match(r"[a-z_]+\.\d+: ", message):
        return message  # a check across fields that names its own place ("faults.0: ...")
    location = ".".join(str(part) for part in error["loc"]) or "(top level)"
    return f"{location}: {message}"


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate scenario YAML; raise ScenarioError naming the file, field and reason."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}: not valid YAML{where}: {reason}.") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a YAML mapping (name: ..., workload: ...).")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        first = _describe(exc.errors()[0])
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ScenarioError(f"{source}: {first}{suffix}.") from None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file.") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot be read ({exc.strerror}).") from None
    return parse_scenario(text, str(path))


EXPECTATION = r"(>=|<=)?\s*\d+"


def scenarios_dir() -> Path:
    from engine.base import paths

    return paths.REPO_ROOT / "scenarios"


def list_scenarios() -> dict[str, Path]:
    return {p.stem: p for p in sorted(scenarios_dir().glob("*.yaml"))}


def _unmet(block: dict[str, dict[str, str]], results: dict[str, dict[str, Any]]) -> list[str]:
    unmet = []
    for level, expected in block.items():
        if level not in results:
            continue
        for field, expectation in expected.items():
            value = count_of(results[level], field)
            if value is None or not meets(value, expectation):
                unmet.append(f"{level}: {field} = {value}, expected {expectation}")
    return unmet


def count_of(result: Mapping[str, Any], field: str) -> int | None:
    """A level's count by name; "a+b" is the sum of two counts (an exactly-once zombie's
    refusal for its old epoch is a write's or a transaction call's, by the moment it froze).
    None when the result lacks one of them."""
    values = [result.get(part) for part in field.split("+")]
    return None if any(v is None for v in values) else sum(values)


def meets(value: int, expectation: str) -> bool:
    """Whether a count meets "3" (exactly), ">=1" (at least) or "<=2" (at most)."""
    expectation = expectation.strip()
    if expectation.startswith(">="):
        return value >= int(expectation[2:])
    if expectation.startswith("<="):
        return value <= int(expectation[2:])
    return value == int(expectation)


def with_sink_isolation(scenario: Scenario, isolation: str) -> Scenario:
    """The scenario with every level's sink reading at `isolation`. The file's expectations
    of a level whose reader changes are dropped: they were written for its own reader."""
    changed = {
        name for name in scenario.levels if LEVELS[name].consumer["isolation.level"] != isolation
    }
    data = scenario.model_dump(exclude_unset=True)
    for block in ("expect", "teaches"):
        if block in data:
            data[block] = {k: v for k, v in data[block].items() if k not in changed}
    try:
        return Scenario.model_validate({**data, "sink_isolation": isolation})
    except ValidationError as exc:
        raise ScenarioError(f"{scenario.name}: {_describe(exc.errors()[0])}.") from None


def with_client(scenario: Scenario, client: str) -> Scenario:
    """The scenario with its producer on `client` (librdkafka or java), validated again."""
    if client == scenario.client:
        return scenario
    try:
        return Scenario.model_validate(
            {**scenario.model_dump(exclude_unset=True), "client": client}
        )
    except ValidationError as exc:
        raise ScenarioError(f"{scenario.name}: {_describe(exc.errors()[0])}.") from None
