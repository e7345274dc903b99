"""A fenced static member's commit fails as _FATAL; its cause comes later, by error_cb."""

from confluent_kafka import KafkaError

from engine.roles.common import FatalErrors

FATAL = KafkaError(KafkaError._FATAL, "Commit failed: Local: Fatal error")
CAUSE = KafkaError(
    KafkaError._FATAL,
    "Fatal consumer error: Broker: Static consumer fenced by other consumer with same "
    "group.instance.id",
    fatal=True,
)


class QueuedCause:
    """A consumer whose queued error_cb call is served by its own poll, as librdkafka's is."""

    def __init__(self, error_cb: FatalErrors, after_polls: int) -> None:
        self.error_cb, self.after_polls, self.polls = error_cb, after_polls, 0

    def poll(self, timeout: float) -> None:
        self.polls += 1
        if self.polls == self.after_polls:
            self.error_cb(CAUSE)


def test_the_cause_is_served_from_the_consumer_and_reads_as_fenced():
    fatal = FatalErrors()
    fatal.await_cause(QueuedCause(fatal, after_polls=3))
    assert fatal.classify(FATAL) == ("fenced", CAUSE)


def test_without_the_consumers_poll_the_same_failure_reads_as_an_error():
    fatal = FatalErrors()  # the cause is still queued: nobody polled the consumer
    QueuedCause(fatal, after_polls=3)
    assert fatal.classify(FATAL)[0] == "error"


def test_a_cause_that_never_comes_ends_the_wait():
    fatal = FatalErrors()
    consumer = QueuedCause(fatal, after_polls=10**9)
    fatal.await_cause(consumer, timeout_s=0.3)
    assert fatal.classify(FATAL)[0] == "error" and consumer.polls >= 2
