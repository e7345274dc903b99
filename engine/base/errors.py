"""Errors the lab shows to people: one sentence that says what went wrong and what to do.

Every error a user can cause or meet (a missing Java, a busy port, a cluster that is down)
is a `LabError`. The command line prints `str(error)` and exits non-zero; the dashboard shows
it in an error box. Neither ever shows a traceback for a `LabError`.
"""

from __future__ import annotations


class LabError(Exception):
    """An error with an actionable message for the user."""

    exit_code = 2


class MissingToolError(LabError):
    """A program the lab needs (Java, Maven, Docker) is absent or too old."""


class KafkaFetchError(LabError):
    """The pinned Kafka jars could not be resolved from Maven Central."""


class PortInUseError(LabError):
    """A port the lab was asked to use is taken by another process."""


class ClusterError(LabError):
    """The cluster could not be started, reached or controlled."""


class ClusterNotRunningError(ClusterError):
    """No cluster is running where one was expected."""


class QuorumUnknown(ClusterError):
    """No broker told who leads the metadata quorum."""


class UnsupportedFaultError(LabError):
    """The fault asked for cannot be injected on this backend."""


class DockerUnavailableError(LabError):
    """No Docker engine answers, or it denies access."""


class MissingImageError(LabError):
    """The Docker engine lacks an image the lab needs and cannot pull it."""


class KafkaVersionError(LabError):
    """LAB_KAFKA_VERSION (or --kafka-version) names no Kafka release the lab can run."""
