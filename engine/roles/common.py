"""What the role processes share: reading the spec, stopping on SIGTERM, message values."""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from pydantic import ValidationError

from engine.proc.failpoints import FailPoint
from engine.roles.specs import ProcessorSpec, RoleSpec

S = TypeVar("S", bound=RoleSpec)

log = logging.getLogger("engine.roles")


class StopFlag:
    """Set by SIGTERM/SIGINT, so a role finishes its current step and exits cleanly."""

    def __init__(self) -> None:
        self.stopped = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: object) -> None:
        self.stopped = True


def load_spec(model: type[S]) -> S:
    """The spec file named on the command line, read into the role's model
    (engine/roles/specs.py): a wrong field ends the role here, naming it."""
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: python -m {sys.argv[0]} SPEC.json")
    try:
        return model.model_validate_json(Path(sys.argv[1]).read_text())
    except ValidationError as exc:
        raise SystemExit(f"{sys.argv[1]} is not a {model.__name__}: {exc}") from None


def failpoint_of(spec: RoleSpec) -> FailPoint | None:
    """The fault point armed from outside in the spec, if any."""
    return FailPoint.from_spec(spec.failpoint.model_dump() if spec.failpoint else None)


def client_logger() -> logging.Logger:
    """librdkafka's log lines go to the role's stderr log file, not to the terminal."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    return logging.getLogger("engine.roles.librdkafka")


def is_fatal(error: KafkaError) -> bool:
    """True for an error after which the client is unusable.

    confluent_kafka sets fatal() only on errors it built from rd_kafka_fatal_error(). A
    consumer's fatal error (a static member fenced by its group coordinator) arrives as a
    message, or through error_cb, with the code _FATAL and fatal() False; its consume()
    returns nothing from then on, so a loop that missed it would wait for ever.
    """
    return error.fatal() or error.code() == KafkaError._FATAL


class FatalErrors:
    """Collects librdkafka's fatal errors: through error_cb, or a consumer's poll (await_cause).

    When a producer is fenced, the call that fails may only say "Local: Fatal error"; the
    fatal error itself (for example _FENCED) is reported through error_cb. A fenced static
    consumer's cause comes as the error of its next poll. Keeping it lets a role say *why*
    it stopped.
    """

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        if is_fatal(error):
            self.errors.append(error)

    def await_cause(self, consumer: Any, timeout_s: float = 3.0) -> None:
        """Poll a consumer until a fatal error's cause has arrived, or timeout_s.

        When a static member's heartbeat is fenced before its commit is sent, the commit fails
        as the generic _FATAL ("Commit failed: Local: Fatal error") and the cause ("Static
        consumer fenced by other consumer with same group.instance.id") comes as the error of
        the consumer's next poll, not through error_cb (seen on a real broker:
        tests/integration/test_fatal_cause.py). Only for a role that is ending: a poll may
        also take a message, which it will not process.
        """
        deadline = time.monotonic() + timeout_s
        while not self.errors and time.monotonic() < deadline:
            try:
                message = consumer.poll(0.1)
            except KafkaException as exc:  # raised the fatal error itself
                self(exc.args[0])
                return
            except RuntimeError:  # closed
                return
            if message is not None and message.error() is not None:
                self(message.error())

    def classify(self, error: KafkaError, client: Any = None) -> tuple[str, KafkaError]:
        """("fenced" or "error", the most telling error) for an error a call raised.

        librdkafka reports a fenced producer's later calls as the generic _FATAL, and hands
        the fatal error to error_cb, also as _FATAL with the cause in its text. confluent_kafka
        does not expose rd_kafka_fatal_error(), so the cause is read from that text.
        """
        candidates = [error]
        if client is not None:
            try:
                client.poll(0.2)  # serve error_cb, which carries the fatal error's cause
            except KafkaException as exc:  # poll itself may raise the fatal error
                candidates.append(exc.args[0])
                self(exc.args[0])  # kept: the role says every fence it saw
        candidates += reversed(self.errors)
        for candidate in candidates:
            if candidate.code() in FENCED_CODES or "fenced" in candidate.str().lower():
                return "fenced", candidate
        return "error", (self.errors[-1] if self.errors else error)


# A newer instance with the same transactional.id bumped the epoch, or (for a consumer) a
# newer member joined its group with the same group.instance.id: this one is a zombie.
FENCED_CODES = (
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.FENCED_INSTANCE_ID,
)


def printable(conf: dict[str, Any]) -> dict[str, Any]:
    """A client configuration without its callbacks, for the history."""
    return {k: v for k, v in conf.items() if not callable(v) and k != "logger"}


# Restarts after fencing before the role gives up: a guard against a loop, not a policy.
MAX_RESTARTS = 3


def claim_ownership(txn: dict[str, Any], name: str) -> None:
    """Say that this instance owns the transactional.id, before its init_transactions.

    The application's own record, as a lease or a deployment would be: a fenced instance
    restarts only while it still owns the id, so a zombie whose replacement took over
    stops instead of fencing that replacement in turn.
    """
    if owner_file := txn.get("owner_file"):
        Path(owner_file).write_text(name)


def owner_of(spec: ProcessorSpec) -> dict[str, Any]:
    """A processor's ownership record, in the shape of a producer's transaction block."""
    return {"owner_file": spec.owner_file, "restart_when_fenced": spec.restart_when_fenced}


def still_owner(txn: dict[str, Any], name: str) -> bool:
    """Whether no newer instance (than the one called `name`) claimed the transactional.id
    since this one did."""
    owner_file = txn.get("owner_file")
    if not owner_file or not txn.get("restart_when_fenced"):
        return False
    try:
        return Path(owner_file).read_text() == name
    except OSError:
        return False
