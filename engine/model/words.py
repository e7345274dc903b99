"""The room's words for the engine's names: history events, faults, proxy events, Kafka errors.

One place for every name a page may show. The room reads the words; the engine's own name
(`commit_gap`, `_FENCED`, `NOT_LEADER_OR_FOLLOWER`) may follow in small type, for the
engineers who ask. `tests/unit/test_words.py` scans the roles, the nemesis and the proxy for
the names they write, so a new event without words fails there.

    say_event("commit_gap").text()   -> "outputs and input offsets out of step (commit_gap)"
    say_error("_FATAL", reason).html() -> "fenced: a newer instance ... <small>...</small>"
    say_error("NOT_LEADER_OR_FOLLOWER").markdown() -> "asked the wrong broker: ... :small[`...`]"
    point_words("after txn_flushed #3") -> "after its 3rd transaction's records were written"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from engine.base.error_codes import ERROR_NAMES
from engine.model.events import Event, NemesisRecord, ProxyRecord

# What each process writes to its history (`ev`), as the room says it.
EVENT_WORDS: dict[Event, str] = {
    # the level run, as the run ends (engine.run.level_run)
    Event.GROUP_COMMITTED: "the processor group's committed offset, read as the run ended",
    # every role
    Event.START: "started",
    Event.DONE: "finished",
    Event.ERROR: "stopped on an error",
    Event.FENCED: "fenced: refused as an out-of-date instance",
    Event.FAILPOINT_REACHED: "stopped itself at the fault point",
    # the producer (and the source that writes a processor's input)
    Event.READY: "connected, ready to send",
    Event.SEND: "sent",
    Event.ACK: "acknowledged by the broker",
    Event.FAIL: "given up by the producer",
    Event.RESUME: "back after a restart, sending what is left",
    Event.RESTART: "a new producer, started by the application after fencing",
    Event.TXN_INIT: "transactions set up (a new epoch for its id)",
    Event.TXN_BEGIN: "transaction begun",
    Event.TXN_FLUSHED: "transaction's records written, not yet committed",
    Event.TXN_OPEN: "transaction held open",
    Event.TXN_COMMIT: "transaction committed",
    Event.TXN_ABORT: "transaction aborted",
    Event.TXN_COMMIT_UNKNOWN: "commit sent, its outcome unknown",
    # the processor
    Event.ASSIGNED: "partitions assigned",
    Event.REVOKED: "partitions taken away (a rebalance)",
    Event.PARTITIONS_LOST: "partitions lost (dropped from the group)",
    Event.CONSUMED: "read",
    Event.IDLE: "idle: nothing new to read",
    Event.OUTPUT_ACKED: "output written",
    Event.OUTPUT_FAILED: "output could not be written",
    Event.BATCH_FAILED: "batch failed; it is read again",
    Event.COMMITTED: "input offsets committed",
    # the moment a batch is exposed: what is done differs by commit mode (its `state` says)
    Event.COMMIT_GAP: "outputs and input offsets out of step",
    Event.COMMIT_REJECTED: "offset commit refused",
    Event.AUTO_COMMITTED: "offsets committed by the auto-commit timer",
    Event.TXN_COMMIT_RETRY: "transaction commit retried",
    Event.TXN_SEND_OFFSETS_RETRY: "offsets into the transaction retried",
    # the Kafka Streams processor
    Event.RESTORE_STARTED: "state store's restore from its changelog begun",
    Event.RESTORED: "state store restored from its changelog",
    Event.STORE_OPENED: "processing begun on the state store as restored",
    Event.STORE_CHECKED: "state store found on disk: wiped or kept",
    # the sink with an idempotency key
    Event.EFFECT_APPLIED: "applied to the database",
    Event.EFFECT_SKIPPED: "already in the database: skipped",
    # the share-group worker
    Event.SUBSCRIBED: "joined its share group",
    Event.DELIVERED: "handed a record under a lock (its delivery count says which time)",
    Event.PROCESSING_FAILED: "failed to process it",
    Event.ACKNOWLEDGED: "acknowledged a record (ACCEPT, RELEASE or REJECT)",
    Event.ACK_COMMITTED: "acknowledgements sent and taken",
    Event.ACK_REFUSED: "acknowledgements refused",
    # the nemesis and the fault proxy, as history lines (their `kind` says more)
    Event.NEMESIS: "fault",
    Event.PROXY: "fault proxy",
}

# Event names made with an f-string in the roles: the template, and every name it makes.
EVENT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "txn_{what}_retry": ("txn_commit_retry", "txn_send_offsets_retry"),
}

# What the nemesis (and the runner's watch of the cluster) records, by `kind`, beside the fault
# kinds themselves: each of those has its words in its own file (engine/faults/NAME.py).
RECORD_WORDS: dict[str, str] = {
    NemesisRecord.KILL_NODE: "broker killed",
    NemesisRecord.NODE_STOPPED: "broker stopped",
    NemesisRecord.NODE_READY: "broker back",
    NemesisRecord.RESTART_FAILED: "broker did not come back",
    NemesisRecord.SUPERVISOR_RESTART: "a new instance started by the supervisor",
    NemesisRecord.FAULT_NOT_REACHED: "fault never fired",
    NemesisRecord.ISR: "in-sync replicas changed",
    NemesisRecord.ELR: "replica sets read",
    NemesisRecord.OFFSETS: "read_committed readers wait",
    NemesisRecord.BROKER_LOG: "broker log line",
    # the short names of "restart-skipped" and "wipe-skipped"
    NemesisRecord.RESTART: "broker restarted",
    NemesisRecord.WIPE: "a replica's partition directory deleted",
}
SKIPPED = "-skipped"  # "crash-skipped": a fault the nemesis could not carry out

# What the fault proxy records, by `kind`.
PROXY_WORDS: dict[str, str] = {
    ProxyRecord.PRODUCE_RESPONSE_DROPPED: "ack dropped",
    ProxyRecord.PRODUCE_REQUEST_DROPPED: "write lost on the way",
    ProxyRecord.OFFSET_COMMIT_RESPONSE_DROPPED: "commit's answer dropped",
    ProxyRecord.OFFSET_COMMIT_REQUEST_DROPPED: "commit lost on the way",
    ProxyRecord.END_TXN_RESPONSE_DROPPED: "transaction end's answer dropped",
    ProxyRecord.END_TXN_REQUEST_DROPPED: "transaction end lost on the way",
    ProxyRecord.PRODUCE_ERROR: "write refused",
    ProxyRecord.CONNECTION_HELD: "connection held silent",
    ProxyRecord.CONNECTION_RESET: "connection reset",
    ProxyRecord.BLACKHOLE_START: "network cut",
    ProxyRecord.BLACKHOLE_END: "network back",
    ProxyRecord.LATENCY_SET: "network slowed",
    ProxyRecord.RULES_CLEARED: "proxy rules cleared",
    ProxyRecord.PROXY_STARTED: "proxy started",
    ProxyRecord.BROKER_DISCOVERED: "broker found",
    ProxyRecord.BROKER_ADDRESS_CHANGED: "broker moved",
    ProxyRecord.REWRITE_FAILED: "proxy could not rewrite an answer",
}

# Kafka's error codes (librdkafka's names; a leading "_" is the client's own), as the room says
# them. A code not here is said from its name ("NOT_ENOUGH_REPLICAS" -> "not enough replicas").
ERROR_WORDS: dict[str, str] = {
    # The epoch moves on when a newer instance registers the same transactional.id, and also
    # when the coordinator aborts a transaction that outlived transaction.timeout.ms
    # (TransactionCoordinator's abortTimedOutTransactions bumps it): either can fence. At
    # transaction version 2 (KIP-890, on by default on a 4.1 cluster: TransactionVersion TV_2
    # from metadata version 4.0-IV2) the coordinator also bumps it at the end of every
    # transaction of a client that speaks it: the Java and Kafka Streams producers 4.1.2 do
    # (TransactionManager's isTransactionV2Enabled), librdkafka does not (its source, read at
    # 2.15, sends EndTxn at version 0 or 1 only, rdkafka_request.c; with the 2.16 the lab runs,
    # tests/integration/test_log_views.py reads one epoch on a producer's committed and aborted
    # transactions and their markers). So a Java producer's write left over from a
    # transaction that had ended is refused by its epoch too. _FENCED is librdkafka's own code.
    "_FENCED": "fenced: its epoch is out of date (a newer instance, or a timed-out abort)",
    "PRODUCER_FENCED": "fenced: its epoch is out of date (a newer instance, or a timed-out abort)",
    "INVALID_PRODUCER_EPOCH": "fenced: its epoch is out of date (a newer instance, a timed-out "
    "abort, or at transaction version 2 a transaction already ended)",
    # The newest join wins on the classic group protocol only (KIP-345), the lab's groups'
    # protocol; under KIP-848's consumer protocol the newcomer is refused instead.
    "FENCED_INSTANCE_ID": "fenced: a newer member with the same instance id joined the group",
    "UNRELEASED_INSTANCE_ID": "refused: a live member still holds this instance id (KIP-848's "
    "consumer protocol)",
    "_FATAL": "stopped for good: the client library cannot go on",
    "NOT_LEADER_OR_FOLLOWER": "asked the wrong broker: the partition's leader moved",
    "REQUEST_TIMED_OUT": "the broker timed out (for a write: waiting for its replicas)",
    "_TIMED_OUT": "timed out waiting for the broker",
    "_MSG_TIMED_OUT": "gave up: no ack before the delivery timeout",
    "NOT_ENOUGH_REPLICAS": "too few in-sync replicas",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "written, but too few in-sync replicas to confirm it",
    "_TRANSPORT": "connection to the broker broke",
    "_ALL_BROKERS_DOWN": "no broker reachable",
    "LEADER_NOT_AVAILABLE": "the partition has no leader right now",
    "NOT_COORDINATOR": "asked the wrong coordinator: it moved",
    "COORDINATOR_NOT_AVAILABLE": "the coordinator is not available",
    "COORDINATOR_LOAD_IN_PROGRESS": "the coordinator is still loading",
    "UNKNOWN_MEMBER_ID": "the group no longer knows this member",
    "ILLEGAL_GENERATION": "the group moved on: a rebalance happened",
    "REBALANCE_IN_PROGRESS": "the group is rebalancing",
    "_MAX_POLL_EXCEEDED": "too long between polls: left the group",
    "CONCURRENT_TRANSACTIONS": "another transaction of this id is still ending",
    "INVALID_TXN_STATE": "the transaction is in the wrong state for this call",
    "TRANSACTION_COORDINATOR_FENCED": "the transaction coordinator was replaced",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "a gap in the producer's sequence numbers",
    "DUPLICATE_SEQUENCE_NUMBER": "a duplicate write, recognised and dropped",
    "UNKNOWN_PRODUCER_ID": "the broker no longer knows this producer",
    "KAFKA_STORAGE_ERROR": "the broker could not write to its disk",
    "_PURGE_QUEUE": "dropped from the client's queue",
    "_PURGE_INFLIGHT": "dropped while in flight",
    "_STATE": "called in the wrong state",
    "_PARTITION_EOF": "end of the partition",
    "CALL_HUNG": "a client call never returned",
    "INVALID_PRODUCER_ID_MAPPING": "the coordinator no longer knows this transactional id's "
    "producer",
}

# An answer the fault proxy could only name by number ("error code 51"): the room hears the
# code's words and Kafka's name for it (engine.base.error_codes, the proxy's table too).
BY_NUMBER = re.compile(r"error code (?P<n>-?\d+)")

# The Java client reports an error as an exception class; the room hears its words, and the
# class's name stays for small type (as librdkafka's own codes do). Those that carry one of
# Kafka's error codes are said as that code is (kafka-clients 4.1.2's Errors table); the
# others from their own message in kafka-clients 4.1.2 and Kafka Streams 4.1.2.
JAVA_EXCEPTIONS: dict[str, str] = {
    "ProducerFencedException": "PRODUCER_FENCED",
    "InvalidProducerEpochException": "INVALID_PRODUCER_EPOCH",
    "FencedInstanceIdException": "FENCED_INSTANCE_ID",
    "UnreleasedInstanceIdException": "UNRELEASED_INSTANCE_ID",
    "InvalidTxnStateException": "INVALID_TXN_STATE",
    "InvalidPidMappingException": "INVALID_PRODUCER_ID_MAPPING",
    "NotEnoughReplicasException": "NOT_ENOUGH_REPLICAS",
    "NotEnoughReplicasAfterAppendException": "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NotLeaderOrFollowerException": "NOT_LEADER_OR_FOLLOWER",
    "OutOfOrderSequenceException": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "ConcurrentTransactionsException": "CONCURRENT_TRANSACTIONS",
    "RebalanceInProgressException": "REBALANCE_IN_PROGRESS",
    "UnknownMemberIdException": "UNKNOWN_MEMBER_ID",
    "IllegalGenerationException": "ILLEGAL_GENERATION",
    "DuplicateSequenceException": "DUPLICATE_SEQUENCE_NUMBER",
    "UnknownProducerIdException": "UNKNOWN_PRODUCER_ID",
    "KafkaStorageException": "KAFKA_STORAGE_ERROR",
    "TransactionCoordinatorFencedException": "TRANSACTION_COORDINATOR_FENCED",
    "NotCoordinatorException": "NOT_COORDINATOR",
    "CoordinatorNotAvailableException": "COORDINATOR_NOT_AVAILABLE",
    "CoordinatorLoadInProgressException": "COORDINATOR_LOAD_IN_PROGRESS",
}
JAVA_EXCEPTION_WORDS: dict[str, str] = {
    "CommitFailedException": "offset commit refused: the group had rebalanced and given the "
    "partitions to another member",
    "TimeoutException": "timed out (the broker's answer, or the Java client's own wait)",
    "NetworkException": "connection to the broker broke",
    "DisconnectException": "connection to the broker broke",
    "TaskMigratedException": "Kafka Streams gave the task up: another instance owns it now",
    "KafkaException": "the Java client raised an error",
}
JAVA_EXCEPTION = re.compile(r"(?:[a-z][\w]*\.)*(?P<name>[A-Z][A-Za-z0-9]*Exception)")

# Where a fault point stops a role: "after EVENT #N", said as what the role had just done.
POINT_WORDS: dict[str, str] = {
    "commit_gap": "in the middle of its {nth} batch, outputs and offsets out of step",
    "txn_flushed": "after its {nth} transaction's records were written, before the commit",
    "txn_begin": "right after it began its {nth} transaction",
    "txn_commit": "right after its {nth} transaction committed",
    "auto_committed": "after the auto-commit timer had committed its {nth} batch",
    "committed": "after it had committed its input for the {nth} time",
    "output_acked": "after its {nth} output was written",
}
# The same, short enough for a label on a chart.
POINT_SHORT: dict[str, str] = {
    "commit_gap": "mid-batch {n}",
    "txn_flushed": "with transaction {n} written, not committed",
    "txn_begin": "as transaction {n} began",
    "txn_commit": "after transaction {n} committed",
    "auto_committed": "after auto-commit {n}",
    "committed": "after commit {n}",
    "output_acked": "after output {n}",
}
POINT = re.compile(r"after (?P<ev>[a-z_]+) #(?P<n>\d+)")


@dataclass(frozen=True)
class Said:
    """A name in the room's words, with the engine's own name kept for small type."""

    words: str
    raw: str = ""

    def text(self) -> str:
        """Plain text: "words (raw)", for tables and captions that take no markup."""
        return f"{self.words} ({self.raw})" if self.raw and self.raw != self.words else self.words

    def html(self) -> str:
        """HTML for st.markdown(unsafe_allow_html=True): the raw name small and grey."""
        raw = f" <small style='color:#757575'><code>{escape(self.raw)}</code></small>"
        return escape(self.words) + (raw if self.raw and self.raw != self.words else "")

    def markdown(self) -> str:
        """Streamlit markdown (st.markdown, no HTML needed): the raw name in small code type."""
        raw = f" :small[`{self.raw}`]"
        return self.words + (raw if self.raw and self.raw != self.words else "")

    def plotly(self) -> str:
        """Plotly's text markup (a subset of HTML): the raw name small and grey."""
        raw = f" <span style='font-size:11px;color:#757575'>{escape(self.raw)}</span>"
        return escape(self.words) + (raw if self.raw and self.raw != self.words else "")

    def __str__(self) -> str:
        return self.words


def from_name(name: str) -> str:
    """A name no table knows, said as words: "NOT_ENOUGH_REPLICAS" -> "not enough replicas"."""
    return re.sub(r"[_\-]+", " ", name).strip().lower() or name


def event_words(ev: str) -> str:
    """A history event's name in the room's words."""
    return EVENT_WORDS.get(ev) or from_name(ev)


def record_words(kind: str) -> str | None:
    """A nemesis record that is not a fault kind, in the room's words ("wipe-skipped" is "a
    replica's partition directory deleted: skipped"); None if unknown.
    engine.faults.fault_words says both."""
    if kind.endswith(SKIPPED) and kind[: -len(SKIPPED)] in RECORD_WORDS:
        return f"{RECORD_WORDS[kind[: -len(SKIPPED)]]}: skipped"
    return RECORD_WORDS.get(kind)


def proxy_words(kind: str) -> str:
    """A fault proxy event's kind in the room's words."""
    return PROXY_WORDS.get(kind) or from_name(kind)


def error_words(code: str | None, reason: str | None = None) -> str:
    """A Kafka error code in the room's words.

    librdkafka reports a fenced producer's later calls as the generic _FATAL, with the cause
    only in its text: that text decides whether the room hears "fenced".
    """
    if not code:
        return "no error"
    if (kafka := kafka_name(code)) is not None:  # "error code 51", as the proxy names it
        code = kafka
    elif (number := BY_NUMBER.fullmatch(code.strip())) is not None:
        return f"an error Kafka numbers {number['n']} (its protocol's error table names it)"
    if (java := JAVA_EXCEPTION.fullmatch(code.split(" ", 1)[0])) is not None:
        name = java["name"]
        if name in JAVA_EXCEPTIONS:
            return error_words(JAVA_EXCEPTIONS[name], reason)
        return JAVA_EXCEPTION_WORDS.get(name) or from_camel(name.removesuffix("Exception"))
    code = code.split(" ", 1)[0]  # "_FATAL (Fatal error: ...)" as some lines carry it
    text = (reason or "").lower()
    if code == "_FATAL" and ("static consumer fenced" in text or "group.instance.id" in text):
        return ERROR_WORDS["FENCED_INSTANCE_ID"]  # the group fenced a consumer, not an epoch
    if code == "_FATAL" and ("fenced" in text or "epoch" in text):
        return ERROR_WORDS["_FENCED"]
    return ERROR_WORDS.get(code) or from_name(code)


def kafka_name(code: str) -> str | None:
    """Kafka's name for an error known only by its number ("error code 51"), if the table
    has it."""
    match = BY_NUMBER.fullmatch(code.strip())
    return ERROR_NAMES.get(int(match["n"])) if match is not None else None


def from_camel(name: str) -> str:
    """A Java class name as words: "FencedInstanceId" -> "fenced instance id"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower() or name


def say_event(ev: str) -> Said:
    return Said(event_words(ev), ev)


def say_proxy(kind: str) -> Said:
    return Said(proxy_words(kind), kind)


def say_error(code: str | None, reason: str | None = None) -> Said:
    """An error's words, with its name in small type: Kafka's name for one the proxy knew
    only by number ("error code 51" is CONCURRENT_TRANSACTIONS)."""
    return Said(error_words(code, reason), kafka_name(code or "") or code or "")


def process_words(proc: str) -> str:
    """A process as the room names it: "processor" is itself, a replacement "processor#2"
    (the engine's name for its second instance) is "processor 2"."""
    base, _, number = str(proc).partition("#")
    return f"{base} {number}" if number.isdigit() else str(proc)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def point_words(point: str, *, short: bool = False) -> str:
    """A fault point's name ("after commit_gap #2") as where the role stood when it stopped;
    `short` for a chart's label ("mid-batch 2")."""
    match = POINT.fullmatch(point.strip())
    if match is None:
        return point
    ev, nth = match["ev"], ordinal(int(match["n"]))
    if short:
        return POINT_SHORT.get(ev, "after {e} #{n}").format(n=match["n"], e=event_words(ev))
    template = POINT_WORDS.get(ev)
    if template is not None:
        return template.format(nth=nth)
    return f"after the {nth} time: {event_words(ev)}"


def say_point(point: str) -> Said:
    """A fault point in words, its name ("after commit_gap #2") kept for small type. That name
    is the lab's own, not Kafka's: a text for the room says point_words(point) alone (the
    live view does; engine/judging/explain.py still shows the name, for its owner to drop)."""
    return Said(point_words(point), point)


def nodes_words(nodes: object) -> str:
    """A list of node ids as the room says it: "none", "node 2", "nodes 1, 2 and 3"."""
    if nodes is None:
        return "not read"
    if not isinstance(nodes, list | tuple):
        return str(nodes)
    if not nodes:
        return "none"
    names = [str(n) for n in nodes]
    if len(names) == 1:
        return f"node {names[0]}"
    return f"nodes {', '.join(names[:-1])} and {names[-1]}"


def controller_words(event: dict[str, object]) -> str:
    """Who the active controller (the metadata quorum's leader) was when a node was hurt."""
    controller = event.get("controller")
    if controller is None:
        return "the active controller was not known at that moment"
    if controller == event.get("node"):
        return f"node {controller}, the one hurt, was the active controller"
    return f"node {controller} was the active controller and ran on"


# A raw error code in a sentence, and librdkafka's reason in parentheses after it if any;
# not one already in code type (`_FENCED`), which the room's words precede.
RAW_CODE = re.compile(
    r"(?<![\w`])(?P<code>"
    + "|".join(map(re.escape, sorted(ERROR_WORDS, key=len, reverse=True)))
    + r")(?![\w`])(?: \((?P<reason>[^()\[\]`]*)\))?"
)


# A replica set printed as a Python list: "[1, 3]", "[]", with the word before it if a
# sentence already said it ("on nodes [2, 3]" is "on nodes 2 and 3", not "nodes nodes").
NODE_LIST = re.compile(r"(?:\bnodes? )?\[(?:\d+(?:, \d+)*)?\]")
# A code the fault proxy knew only by its number, as older explanations show it in code type.
NUMBERED_CODE = re.compile(r"(?:\berror )?:small\[`error code (?P<n>-?\d+)`\]")
# A partition as librdkafka prints it in an error's text: "TOPIC(TOPIC_ID)[PARTITION]@OFFSET",
# "(null)" for a topic id it does not know (rd_kafka_topic_partition_list_str in
# rdkafka_partition.c): "topic((null))[0]@12" is "topic partition 0 at offset 12".
RDKAFKA_PARTITION = re.compile(
    r"\((?:\(null\)|[A-Za-z0-9_-]{22})\)\[(?P<p>\d+)\](?:@(?P<o>-?\d+))?"
)
# A Java exception said by its own name in lower case, as older explanations show it
# ("fencedinstanceidexception :small[`FencedInstanceIdException`]").
JAVA_SAID = re.compile(r"\b(?P<low>[a-z]+exception) :small\[`(?P<name>[\w.]*Exception)`\]")


def room_words(markdown: str) -> str:
    """Raw error codes left in a sentence said in the room's words, the code (and librdkafka's
    reason) after them in small type.

    For explanations recorded before the evidence was said in the room's words (a run from an
    older lab, replayed): "answered 2 requests with REQUEST_TIMED_OUT" -> "... with the
    broker timed out (for a write: waiting for its replicas) :small[`REQUEST_TIMED_OUT`]";
    a replica set printed as a list, "in-sync replicas [1, 3]", is "nodes 1 and 3".
    """

    def said(match: re.Match[str]) -> str:
        code, reason = match["code"], match["reason"]
        words = say_error(code, reason).words
        return f"{words} :small[`{code}`{' ' + reason if reason else ''}]"

    def nodes(match: re.Match[str]) -> str:
        return nodes_words([int(n) for n in re.findall(r"\d+", match[0])])

    def numbered(match: re.Match[str]) -> str:
        said = say_error(f"error code {match['n']}")
        return f"{said.words} :small[`{said.raw}`]"

    def java(match: re.Match[str]) -> str:
        if match["low"] != match["name"].rsplit(".", 1)[-1].lower():
            return match[0]
        return f"{say_error(match['name']).words} :small[`{match['name']}`]"

    def partition(match: re.Match[str]) -> str:
        offset = f" at offset {match['o']}" if match["o"] is not None else ""
        return f" partition {match['p']}{offset}"

    markdown = RDKAFKA_PARTITION.sub(partition, markdown)
    markdown = JAVA_SAID.sub(java, NUMBERED_CODE.sub(numbered, markdown))
    return NODE_LIST.sub(nodes, RAW_CODE.sub(said, markdown))
