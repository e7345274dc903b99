"""The engine's one face for the pages: everything app.py and pages/ may use, and nothing else.

The pages draw; the engine runs, judges, records and computes. A page imports from here
only (tests/unit/test_layers.py fails on any other engine import in pages/ or app.py), so
what the pages lean on is this list, and the engine's inside can move without them. A
name joins the list when a page needs it; a page that would need an engine internal asks
for a function here instead (as RunWatch taking a run's id, or record.saved_stamp, did for
the pages that built run-folder paths themselves).

What it holds: starting and following a run, recorded runs (as typed records), scenarios,
lessons and the room, words and faults for the live view, metrics, the partition logs, the
cluster, the Cost page, settings and errors; the imports and `__all__` are in ruff's order.
"""

from __future__ import annotations

from typing import Any

from engine.base.errors import LabError
from engine.base.paths import kafka_version
from engine.base.settings import (
    AUTOSTART,
    BACKEND,
    NODES,
    ONE_LEVEL_AT_A_TIME,
    PUBLISHED_ADDRESS,
    SPARK_AUTOSTART,
    STREAMING_METRICS,
)
from engine.cluster import Cluster, default_nodes
from engine.cluster.service import ClusterService, NodeAdvice, SharedExclusiveLock, node_advice
from engine.cost import published, report
from engine.cost.suite import QUICK_MESSAGES, QuickResult, run_quick
from engine.cost.throughput import BASELINE, Matrix
from engine.faults import (
    beyond_level_words,
    fault_kind_of,
    lasting_spans,
    marks_a_process,
    say_fault,
)
from engine.faults.base import HURT
from engine.judging.checker import LATENCY_DEFINITION
from engine.judging.judge import LevelResult
from engine.logs import (
    LECTURE_PRESET,
    ROLL_KEY,
    CompactionResult,
    CompactionSettings,
    IsolationView,
    LogDump,
    TopicGoneError,
    apply_batches,
    batch_rows,
    compaction_rows,
    dump_log,
    isolation_from_run,
    isolation_live,
    list_topic_names,
    open_transaction_demo,
    parse_records,
    run_compaction,
    run_has_transactions,
    segment_label,
)
from engine.metrics.compute import RECORD_SOURCE, STREAM_SOURCE, big_run_rows, compute_and_save
from engine.metrics.service import MetricsService
from engine.metrics.session import start_spark_in_background
from engine.metrics.streaming import (
    SO_FAR_EVERY_S,
    LiveRun,
    SoFar,
    followed,
    is_live,
    live_runs,
    wait_for_followed,
    why_not_followed,
)
from engine.metrics.verdict_table import read_page, verdict_kinds
from engine.model.events import Event, NemesisRecord, ProxyRecord
from engine.model.java_client import CLIENTS, describe
from engine.model.levels import CORE_LEVELS, LEVELS, PROCESSOR_CONSUMER, STREAMS_LEVELS
from engine.model.words import PROXY_WORDS, event_words, process_words, room_words
from engine.run.freeplay import (
    BUTTONS,
    RATE_BOUNDS,
    RESTART_BOUNDS,
    TIME_LIMIT_BOUNDS,
    FreePlay,
    FreePlaySettings,
    broker_faults_refused,
)
from engine.run.level_run import producer_client_settings
from engine.run.record import (
    RecordedLevel,
    RecordedRun,
    level_events,
    list_runs,
    load_judged,
    load_metrics,
    load_result,
    load_run,
    recorded_events,
    run_folder,
    run_kafka_version,
    run_status,
    runs_signature,
    saved_stamp,
)
from engine.run.recovery import recover
from engine.run.runner import Schedule, new_run_id, schedule_of
from engine.run_handle import start_run
from engine.scenarios.scenario import (
    Scenario,
    ScenarioError,
    Source,
    count_of,
    list_scenarios,
    load_scenario,
    with_client,
)
from engine.scenarios.streams import AccountTotals, payments_made, store_at_end
from engine.teach.lesson import (
    Condition,
    Lesson,
    LessonProgress,
    Step,
    judge_prediction,
    list_lessons,
    load_lesson,
)
from engine.teach.live import (
    LevelSnapshot,
    RunWatch,
    fault_fold,
    fault_raw,
    fault_text,
    fold_faults,
    fold_text,
    nemesis_text,
)
from engine.teach.room import (
    KEY_ENV,
    KEY_PARAM,
    PRESENTER,
    VIEWER,
    PresenterKeyError,
    UnsafeRoomError,
    configured_key,
    key_matches,
    refuse,
    serves_a_room,
)
from engine.teach.teaching import (
    FIRST_LESSON,
    describe_seconds,
    group_of,
    grouped_scenario_names,
    lesson_nodes,
    lesson_plans,
    nodes_text,
    recorded_seconds,
    scenario_label,
    scenario_nodes,
)
from engine.teach.vote import (
    Ballot,
    RoomVotes,
    StepVote,
    Tally,
    VoteError,
    load_vote,
    save_vote,
    votes_text,
)


def warm_up_judgement(*args: Any, **kwargs: Any) -> Any:
    """engine.metrics.warm_up.warm_up_judgement, imported when called: that module loads
    pyspark, which a page that never warms Spark up should not pay for."""
    from engine.metrics.warm_up import warm_up_judgement as warm_up

    return warm_up(*args, **kwargs)


__all__ = [
    "AUTOSTART",
    "BACKEND",
    "BASELINE",
    "BUTTONS",
    "CLIENTS",
    "CORE_LEVELS",
    "FIRST_LESSON",
    "HURT",
    "KEY_ENV",
    "KEY_PARAM",
    "LATENCY_DEFINITION",
    "LECTURE_PRESET",
    "LEVELS",
    "NODES",
    "ONE_LEVEL_AT_A_TIME",
    "PRESENTER",
    "PROCESSOR_CONSUMER",
    "PROXY_WORDS",
    "PUBLISHED_ADDRESS",
    "QUICK_MESSAGES",
    "RATE_BOUNDS",
    "RECORD_SOURCE",
    "RESTART_BOUNDS",
    "ROLL_KEY",
    "SO_FAR_EVERY_S",
    "SPARK_AUTOSTART",
    "STREAMING_METRICS",
    "STREAMS_LEVELS",
    "STREAM_SOURCE",
    "TIME_LIMIT_BOUNDS",
    "VIEWER",
    "AccountTotals",
    "Ballot",
    "Cluster",
    "ClusterService",
    "CompactionResult",
    "CompactionSettings",
    "Condition",
    "Event",
    "FreePlay",
    "FreePlaySettings",
    "IsolationView",
    "LabError",
    "Lesson",
    "LessonProgress",
    "LevelResult",
    "LevelSnapshot",
    "LiveRun",
    "LogDump",
    "Matrix",
    "MetricsService",
    "NemesisRecord",
    "NodeAdvice",
    "PresenterKeyError",
    "ProxyRecord",
    "QuickResult",
    "RecordedLevel",
    "RecordedRun",
    "RoomVotes",
    "RunWatch",
    "Scenario",
    "ScenarioError",
    "Schedule",
    "SharedExclusiveLock",
    "SoFar",
    "Source",
    "Step",
    "StepVote",
    "Tally",
    "TopicGoneError",
    "UnsafeRoomError",
    "VoteError",
    "apply_batches",
    "batch_rows",
    "beyond_level_words",
    "big_run_rows",
    "broker_faults_refused",
    "compaction_rows",
    "compute_and_save",
    "configured_key",
    "count_of",
    "default_nodes",
    "describe",
    "describe_seconds",
    "dump_log",
    "event_words",
    "fault_fold",
    "fault_kind_of",
    "fault_raw",
    "fault_text",
    "fold_faults",
    "fold_text",
    "followed",
    "group_of",
    "grouped_scenario_names",
    "is_live",
    "isolation_from_run",
    "isolation_live",
    "judge_prediction",
    "kafka_version",
    "key_matches",
    "lasting_spans",
    "lesson_nodes",
    "lesson_plans",
    "level_events",
    "list_lessons",
    "list_runs",
    "list_scenarios",
    "list_topic_names",
    "live_runs",
    "load_judged",
    "load_lesson",
    "load_metrics",
    "load_result",
    "load_run",
    "load_scenario",
    "load_vote",
    "marks_a_process",
    "nemesis_text",
    "new_run_id",
    "node_advice",
    "nodes_text",
    "open_transaction_demo",
    "parse_records",
    "payments_made",
    "process_words",
    "producer_client_settings",
    "published",
    "read_page",
    "recorded_events",
    "recorded_seconds",
    "recover",
    "refuse",
    "report",
    "room_words",
    "run_compaction",
    "run_folder",
    "run_has_transactions",
    "run_kafka_version",
    "run_quick",
    "run_status",
    "runs_signature",
    "save_vote",
    "saved_stamp",
    "say_fault",
    "scenario_label",
    "scenario_nodes",
    "schedule_of",
    "segment_label",
    "serves_a_room",
    "start_run",
    "start_spark_in_background",
    "store_at_end",
    "verdict_kinds",
    "votes_text",
    "wait_for_followed",
    "warm_up_judgement",
    "why_not_followed",
    "with_client",
]
