"""The log views' errors: a bad record list, a topic or setting they cannot use, a failed dump."""

from __future__ import annotations

from engine.base.errors import LabError


class RecordListError(LabError):
    """A record list for the compaction demo that cannot be parsed."""


class LogViewError(LabError):
    """A topic, partition or setting the log views cannot use."""


class TopicGoneError(LogViewError):
    """The topic does not exist on this cluster (never made, deleted, or on a cluster since
    stopped); pages showing a recorded run say so instead of failing."""


class LogDumpError(LabError):
    """Kafka's log-dump tool could not be run or read."""
