"""A fenced static member's commit fails as _FATAL; its cause comes later, as the error of the
consumer's next poll (tests/integration/test_fatal_cause.py shows it on a real broker)."""

from confluent_kafka import KafkaError

from engine.roles.common import FatalErrors

FATAL = KafkaError(KafkaError._FATAL, "Commit failed: Local: Fatal error")
CAUSE = KafkaError(
    KafkaError._FATAL,
    "Fatal consumer error: Broker: Static consumer fenced by other consumer with same "
    "group.instance.id",
    fatal=True,
)


class ErrorMessage:
    """What confluent_kafka's poll returns for an error event: a message carrying it."""

    def error(self) -> KafkaError:
        return CAUSE


class QueuedCause:
    """A consumer whose fatal cause is queued behind `after_polls - 1` empty polls."""

    def __init__(self, after_polls: int) -> None:
        self.after_polls, self.polls = after_polls, 0

    def poll(self, timeout: float) -> ErrorMessage | None:
        self.polls += 1
        return ErrorMessage() if self.polls == self.after_polls else None


def test_the_cause_is_served_from_the_consumer_and_reads_as_fenced():
    fatal = FatalErrors()
    fatal.await_cause(QueuedCause(after_polls=3))
    assert fatal.classify(FATAL) == ("fenced", CAUSE)


def test_without_the_consumers_poll_the_same_failure_reads_as_an_error():
    fatal = FatalErrors()  # the cause is still queued: nobody polled the consumer
    assert fatal.classify(FATAL)[0] == "error"


def test_a_cause_that_never_comes_ends_the_wait():
    fatal = FatalErrors()
    consumer = QueuedCause(after_polls=10**9)
    fatal.await_cause(consumer, timeout_s=0.3)
    assert fatal.classify(FATAL)[0] == "error" and consumer.polls >= 2
