"""Kafka wire framing: size-prefixed frames, request/response headers, Produce acks.

Pure functions only; the proxy feeds them raw bytes. Layouts follow the Kafka protocol guide
(https://kafka.apache.org/protocol) and the message JSON specs in clients/src/main/resources.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from engine.base.error_codes import error_name
from engine.kafka.wire import SIZE, FrameError, need, read_uvarint

PRODUCE = 0
OFFSET_COMMIT = 8
END_TXN = 26

API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    60: "DescribeCluster",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
}

# First "flexible" version per api key (from each request's flexibleVersions): from that version
# on, the request uses header v2 (tagged fields after client_id). Unknown apis: assume header v1.
FLEXIBLE_SINCE: dict[int, int] = {
    0: 9, 1: 12, 2: 6, 3: 9, 4: 4, 5: 2, 6: 6, 7: 3, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4,
    14: 4, 15: 5, 16: 3, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1,
    28: 3, 29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 38: 2, 39: 2, 40: 2,
    41: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 48: 1, 49: 1, 50: 0, 51: 0, 52: 0, 53: 0, 54: 0,
    55: 0, 56: 0, 57: 0, 58: 0, 59: 0, 60: 0, 61: 0, 62: 0, 63: 0, 64: 0, 65: 0, 66: 0, 67: 0,
    68: 0, 69: 0, 70: 0, 71: 0, 72: 0,
}  # fmt: skip


def api_name(api_key: int) -> str:
    """Human name of an api key, e.g. 0 -> "Produce"; unknown keys become "Api<N>"."""
    return API_NAMES.get(api_key, f"Api{api_key}")


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this request version uses request header v2 (tagged fields)."""
    since = FLEXIBLE_SINCE.get(api_key)
    return since is not None and api_version >= since


@dataclass(frozen=True)
class RequestHeader:
    """The fields of a request header the proxy cares about."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_length: int  # offset of the request body within the frame payload

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)


@dataclass(frozen=True)
class ProduceInfo:
    """The start of a Produce request body."""

    acks: int
    transactional_id: str | None


def _read_string(frame: bytes, pos: int, what: str) -> tuple[str | None, int]:
    """Nullable STRING: int16 length (-1 = null) then UTF-8 bytes."""
    need(frame, pos, 2, what)
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2
    if n < 0:
        return None, pos
    need(frame, pos, n, what)
    return frame[pos : pos + n].decode("utf-8", "replace"), pos + n


def _read_compact_string(frame: bytes, pos: int, what: str) -> tuple[str | None, int]:
    """COMPACT_NULLABLE_STRING: uvarint length+1 (0 = null) then UTF-8 bytes."""
    n, pos = read_uvarint(frame, pos)
    if n == 0:
        return None, pos
    n -= 1
    need(frame, pos, n, what)
    return frame[pos : pos + n].decode("utf-8", "replace"), pos + n


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes each); return the new position."""
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        need(frame, pos, size, "tagged field")
        pos += size
    return pos


def parse_request_header(frame: bytes, flexible: bool | None = None) -> RequestHeader:
    """Parse a request header (v1, or v2 when the api version is flexible).

    `frame` is the payload without the size prefix. `flexible` overrides the version table.
    """
    need(frame, 0, 8, "request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    client_id, pos = _read_string(frame, 8, "client_id")  # never compact, even in header v2
    if flexible is None:
        flexible = is_flexible(api_key, api_version)
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def parse_produce_acks(frame: bytes, header: RequestHeader) -> ProduceInfo:
    """Read acks and transactional_id from a Produce request body."""
    if header.api_key != PRODUCE:
        raise FrameError(f"not a Produce request (api_key {header.api_key})")
    pos = header.header_length
    txn_id: str | None = None
    if header.api_version >= 9:
        txn_id, pos = _read_compact_string(frame, pos, "transactional_id")
    elif header.api_version >= 3:
        txn_id, pos = _read_string(frame, pos, "transactional_id")
    need(frame, pos, 2, "acks")
    (acks,) = struct.unpack_from(">h", frame, pos)
    return ProduceInfo(acks, txn_id)


def response_correlation_id(frame: bytes) -> int:
    """Correlation id of a response: the first four bytes of every response header."""
    need(frame, 0, 4, "response correlation id")
    return SIZE.unpack_from(frame, 0)[0]


@dataclass(frozen=True)
class PartitionError:
    """One partition's error in a Produce response."""

    topic: str | None  # None from v13 on, where topics are named by id
    partition: int
    error_code: int

    @property
    def error_name(self) -> str:
        return error_name(self.error_code)


def produce_response_errors(frame: bytes, api_version: int) -> list[PartitionError]:
    """The partitions of a Produce response that carry an error (code != 0).

    Written from the protocol's ProduceResponse schema, v0 to v13: flexible (compact arrays
    and strings, tagged fields, response header v1) from v9, topics by id from v13.
    """
    flexible = api_version >= 9
    pos = 4  # correlation id
    if flexible:
        pos = skip_tagged_fields(frame, pos)

    def array_len(pos: int, what: str) -> tuple[int, int]:
        if flexible:
            n, pos = read_uvarint(frame, pos)
            return n - 1, pos
        need(frame, pos, 4, what)
        return SIZE.unpack_from(frame, pos)[0], pos + 4

    def string(pos: int, what: str) -> tuple[str | None, int]:
        return (_read_compact_string if flexible else _read_string)(frame, pos, what)

    errors: list[PartitionError] = []
    topics, pos = array_len(pos, "responses")
    for _ in range(max(0, topics)):
        topic: str | None = None
        if api_version >= 13:
            need(frame, pos, 16, "topic_id")
            pos += 16
        else:
            topic, pos = string(pos, "topic name")
        partitions, pos = array_len(pos, "partition_responses")
        for _ in range(max(0, partitions)):
            need(frame, pos, 6, "partition index and error_code")
            index, code = struct.unpack_from(">ih", frame, pos)
            pos += 6 + 8  # base_offset
            if api_version >= 2:
                pos += 8  # log_append_time_ms
            if api_version >= 5:
                pos += 8  # log_start_offset
            if api_version >= 8:
                batches, pos = array_len(pos, "record_errors")
                for _ in range(max(0, batches)):
                    need(frame, pos, 4, "batch_index")
                    _message, pos = string(pos + 4, "batch_index_error_message")
                    if flexible:
                        pos = skip_tagged_fields(frame, pos)
                _message, pos = string(pos, "error_message")
            if flexible:
                pos = skip_tagged_fields(frame, pos)
            if code:
                errors.append(PartitionError(topic, index, code))
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    return errors
