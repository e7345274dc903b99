"""Decode and re-encode the responses that carry broker addresses, so the proxy can rewrite them.

Three responses tell a client where brokers are: Metadata (api key 3), FindCoordinator (10) and
DescribeCluster (60). Each has a decoder/encoder pair per version; re-encoding a decoded
response without changes gives back the same bytes. Tagged-field sections are kept as raw
bytes; so is Metadata's topic part, which follows the broker list and is never touched.

Produce v10+ and Fetch v16+ responses may end with a NodeEndpoints tagged field (KIP-951: the
new leader's address after NOT_LEADER_OR_FOLLOWER). Those are walked only to find that field;
everything before it is kept verbatim.

ApiVersions (18) responses are patched in place so brokers never offer a client a newer version
of Metadata, FindCoordinator or DescribeCluster than this module can parse.

Field layouts follow the message JSON specs in Kafka 4.1's
clients/src/main/resources/common/message (MetadataResponse v0-13, FindCoordinatorResponse
v0-6, DescribeClusterResponse v0-2, ProduceResponse v10-13, FetchResponse v16-18,
ApiVersionsResponse v0-4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from engine.kafka.wire import EMPTY_TAGS, INT16, FrameError, Reader, Writer, encode_uvarint
from engine.proxy.framing import is_flexible

PRODUCE = 0
FETCH = 1
METADATA = 3
FIND_COORDINATOR = 10
API_VERSIONS = 18
DESCRIBE_CLUSTER = 60

# Newest version of each broker-listing response this module can decode; ApiVersions answers
# are capped to these, so clients never use a newer one.
MAX_VERSIONS: dict[int, int] = {METADATA: 13, FIND_COORDINATOR: 6, DESCRIBE_CLUSTER: 2}
REWRITE_APIS = frozenset(MAX_VERSIONS)
# Responses whose versions in this range may carry a NodeEndpoints leader hint. Not capped:
# a newer version is passed on untouched rather than denied to the client.
HINT_VERSIONS: dict[int, tuple[int, int]] = {PRODUCE: (10, 13), FETCH: (16, 18)}
UNSUPPORTED_VERSION = 35  # error code of an ApiVersions answer to a too-new request version


class UnsupportedResponse(FrameError):
    """An api key or version this module does not decode."""


# -- primitives --------------------------------------------------------------------------------


def _need_version(api_key: int, version: int) -> None:
    low, top = (0, MAX_VERSIONS[api_key]) if api_key in MAX_VERSIONS else HINT_VERSIONS[api_key]
    if not low <= version <= top:
        raise UnsupportedResponse(f"api key {api_key} version {version} is not supported")


def may_carry_addresses(api_key: int, version: int) -> bool:
    """Whether a response of this api version can name broker addresses at all.

    True for every Metadata/FindCoordinator/DescribeCluster version (supported or not), and for
    Produce/Fetch from the version that added NodeEndpoints on.
    """
    if api_key in MAX_VERSIONS:
        return True
    hint = HINT_VERSIONS.get(api_key)
    return hint is not None and version >= hint[0]


# -- the messages ------------------------------------------------------------------------------


class Endpoint(Protocol):
    """A broker address inside a response: anything with node_id, host and port."""

    node_id: int
    host: str | None
    port: int


@dataclass
class MetadataBroker:
    node_id: int
    host: str | None
    port: int
    rack: str | None = None  # v1+
    tagged: bytes = EMPTY_TAGS  # v9+


@dataclass
class MetadataResponse:
    """MetadataResponse up to ControllerId; `rest` is the topic part (and all after) verbatim."""

    version: int
    brokers: list[MetadataBroker] | None
    throttle_time_ms: int | None = None  # v3+
    cluster_id: str | None = None  # v2+
    controller_id: int | None = None  # v1+
    rest: bytes = b""

    @classmethod
    def decode(cls, version: int, body: bytes) -> MetadataResponse:
        _need_version(METADATA, version)
        flex = version >= 9
        r = Reader(body)
        msg = cls(version, None)
        if version >= 3:
            msg.throttle_time_ms = r.int32("throttle_time_ms")
        n = r.array_len(flex, "brokers")
        if n >= 0:
            msg.brokers = []
            for _ in range(n):
                b = MetadataBroker(r.int32("node_id"), r.string(flex, "host"), r.int32("port"))
                if version >= 1:
                    b.rack = r.string(flex, "rack")
                if flex:
                    b.tagged = r.tagged()
                msg.brokers.append(b)
        if version >= 2:
            msg.cluster_id = r.string(flex, "cluster_id")
        if version >= 1:
            msg.controller_id = r.int32("controller_id")
        msg.rest = r.rest()
        return msg

    def encode(self) -> bytes:
        flex = self.version >= 9
        w = Writer()
        if self.version >= 3:
            w.int32(_field(self.throttle_time_ms, "throttle_time_ms"))
        w.array_len(None if self.brokers is None else len(self.brokers), flex)
        for b in self.brokers or ():
            w.int32(b.node_id)
            w.string(b.host, flex)
            w.int32(b.port)
            if self.version >= 1:
                w.string(b.rack, flex)
            if flex:
                w.raw(b.tagged)
        if self.version >= 2:
            w.string(self.cluster_id, flex)
        if self.version >= 1:
            w.int32(_field(self.controller_id, "controller_id"))
        w.raw(self.rest)
        return w.bytes()

    def endpoints(self) -> list[Endpoint]:
        return list(self.brokers or ())


@dataclass
class Coordinator:
    """One coordinator: an entry of the v4+ array, or the top-level fields of v0-v3."""

    node_id: int
    host: str | None
    port: int
    error_code: int = 0
    error_message: str | None = None  # v1+
    key: str | None = None  # v4+
    tagged: bytes = EMPTY_TAGS  # v4+ (per entry)


@dataclass
class FindCoordinatorResponse:
    """v0-v3 hold exactly one coordinator (without key); v4+ an array of them."""

    version: int
    coordinators: list[Coordinator] | None
    throttle_time_ms: int | None = None  # v1+
    tagged: bytes = EMPTY_TAGS  # v3+

    @classmethod
    def decode(cls, version: int, body: bytes) -> FindCoordinatorResponse:
        _need_version(FIND_COORDINATOR, version)
        flex = version >= 3
        r = Reader(body)
        msg = cls(version, None)
        if version >= 1:
            msg.throttle_time_ms = r.int32("throttle_time_ms")
        if version < 4:
            error_code = r.int16("error_code")
            error_message = r.string(flex, "error_message") if version >= 1 else None
            c = Coordinator(r.int32("node_id"), r.string(flex, "host"), r.int32("port"))
            c.error_code, c.error_message = error_code, error_message
            msg.coordinators = [c]
        else:
            n = r.array_len(True, "coordinators")
            if n >= 0:
                msg.coordinators = []
                for _ in range(n):
                    key = r.string(True, "key")
                    c = Coordinator(r.int32("node_id"), r.string(True, "host"), r.int32("port"))
                    c.key = key
                    c.error_code = r.int16("error_code")
                    c.error_message = r.string(True, "error_message")
                    c.tagged = r.tagged()
                    msg.coordinators.append(c)
        if flex:
            msg.tagged = r.tagged()
        r.end("FindCoordinatorResponse")
        return msg

    def encode(self) -> bytes:
        flex = self.version >= 3
        w = Writer()
        if self.version >= 1:
            w.int32(_field(self.throttle_time_ms, "throttle_time_ms"))
        if self.version < 4:
            if self.coordinators is None or len(self.coordinators) != 1:
                raise ValueError("FindCoordinator v0-v3 holds exactly one coordinator")
            c = self.coordinators[0]
            w.int16(c.error_code)
            if self.version >= 1:
                w.string(c.error_message, flex)
            w.int32(c.node_id)
            w.string(c.host, flex)
            w.int32(c.port)
        else:
            w.array_len(None if self.coordinators is None else len(self.coordinators), True)
            for c in self.coordinators or ():
                w.string(c.key, True)
                w.int32(c.node_id)
                w.string(c.host, True)
                w.int32(c.port)
                w.int16(c.error_code)
                w.string(c.error_message, True)
                w.raw(c.tagged)
        if flex:
            w.raw(self.tagged)
        return w.bytes()

    def endpoints(self) -> list[Endpoint]:
        return list(self.coordinators or ())


@dataclass
class DescribeClusterBroker:
    node_id: int  # BrokerId in the spec
    host: str | None
    port: int
    rack: str | None = None
    is_fenced: bool | None = None  # v2+
    tagged: bytes = EMPTY_TAGS


@dataclass
class DescribeClusterResponse:
    version: int
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    endpoint_type: int | None = None  # v1+: 1 = brokers, 2 = controllers
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: list[DescribeClusterBroker] | None = field(default_factory=list)
    cluster_authorized_operations: int = -(2**31)
    tagged: bytes = EMPTY_TAGS

    @classmethod
    def decode(cls, version: int, body: bytes) -> DescribeClusterResponse:
        _need_version(DESCRIBE_CLUSTER, version)
        r = Reader(body)  # every version is flexible
        msg = cls(version, r.int32("throttle_time_ms"), r.int16("error_code"))
        msg.error_message = r.string(True, "error_message")
        if version >= 1:
            msg.endpoint_type = r.int8("endpoint_type")
        msg.cluster_id = r.string(True, "cluster_id")
        msg.controller_id = r.int32("controller_id")
        n = r.array_len(True, "brokers")
        msg.brokers = None if n < 0 else []
        for _ in range(max(n, 0)):
            b = DescribeClusterBroker(r.int32("broker_id"), r.string(True, "host"), r.int32("port"))
            b.rack = r.string(True, "rack")
            if version >= 2:
                b.is_fenced = _bool(r.int8("is_fenced"))
            b.tagged = r.tagged()
            msg.brokers.append(b)
        msg.cluster_authorized_operations = r.int32("cluster_authorized_operations")
        msg.tagged = r.tagged()
        r.end("DescribeClusterResponse")
        return msg

    def encode(self) -> bytes:
        w = Writer()
        w.int32(self.throttle_time_ms)
        w.int16(self.error_code)
        w.string(self.error_message, True)
        if self.version >= 1:
            w.int8(_field(self.endpoint_type, "endpoint_type"))
        w.string(self.cluster_id, True)
        w.int32(self.controller_id)
        w.array_len(None if self.brokers is None else len(self.brokers), True)
        for b in self.brokers or ():
            w.int32(b.node_id)
            w.string(b.host, True)
            w.int32(b.port)
            w.string(b.rack, True)
            if self.version >= 2:
                w.int8(1 if b.is_fenced else 0)
            w.raw(b.tagged)
        w.int32(self.cluster_authorized_operations)
        w.raw(self.tagged)
        return w.bytes()

    def endpoints(self) -> list[Endpoint]:
        if self.endpoint_type == 2:
            return []  # controller endpoints: not brokers, and their ids may equal broker ids
        return list(self.brokers or ())


def _field(value: int | None, name: str) -> int:
    if value is None:
        raise ValueError(f"{name} is required in this version")
    return value


def _bool(v: int) -> bool:
    if v not in (0, 1):
        raise FrameError(f"bad boolean byte {v}")
    return bool(v)


@dataclass
class NodeEndpoint:
    node_id: int
    host: str | None
    port: int
    rack: str | None = None
    tagged: bytes = EMPTY_TAGS


def _skip_produce(r: Reader, version: int) -> None:
    """Walk a ProduceResponse v10+ body up to its top-level tagged fields."""
    for _ in range(r.array_len(True, "responses")):
        if version >= 13:
            r.skip(16, "topic_id")
        else:
            r.string(True, "name")
        for _ in range(r.array_len(True, "partition_responses")):
            r.skip(4 + 2 + 8 + 8 + 8, "partition response")  # index .. log_start_offset
            for _ in range(r.array_len(True, "record_errors")):
                r.int32("batch_index")
                r.string(True, "batch_index_error_message")
                r.tagged()
            r.string(True, "error_message")
            r.tagged()  # CurrentLeader (ids only)
        r.tagged()
    r.int32("throttle_time_ms")


def _skip_fetch(r: Reader, version: int) -> None:
    """Walk a FetchResponse v16+ body up to its top-level tagged fields."""
    r.skip(4 + 2 + 4, "throttle_time_ms, error_code, session_id")
    for _ in range(r.array_len(True, "responses")):
        r.skip(16, "topic_id")
        for _ in range(r.array_len(True, "partitions")):
            r.skip(4 + 2 + 8 + 8 + 8, "partition data")  # index .. log_start_offset
            for _ in range(r.array_len(True, "aborted_transactions")):
                r.skip(8 + 8, "aborted transaction")
                r.tagged()
            r.int32("preferred_read_replica")
            n = r.uvarint() - 1  # records: COMPACT_NULLABLE_RECORDS
            if n > 0:
                r.skip(n, "records")
            r.tagged()
        r.tagged()


@dataclass
class LeaderHintResponse:
    """A Produce/Fetch response: its body verbatim up to the top-level tagged fields, which
    are split into (tag, raw value) with the NodeEndpoints field (tag 0) decoded."""

    api_key: int
    version: int
    prefix: bytes
    tags: list[tuple[int, bytes]]
    node_endpoints: list[NodeEndpoint] | None = None

    @classmethod
    def decode_for(cls, api_key: int, version: int, body: bytes) -> LeaderHintResponse:
        _need_version(api_key, version)
        r = Reader(body)
        (_skip_produce if api_key == PRODUCE else _skip_fetch)(r, version)
        prefix = body[: r.pos]
        tags: list[tuple[int, bytes]] = []
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            tags.append((tag, r._take(r.uvarint(), "tagged field")))
        r.end("response")
        msg = cls(api_key, version, prefix, tags)
        for tag, value in tags:
            if tag == 0:
                fr = Reader(value)
                n = fr.array_len(True, "node_endpoints")
                msg.node_endpoints = None if n < 0 else []
                for _ in range(max(n, 0)):
                    ep = NodeEndpoint(
                        fr.int32("node_id"), fr.string(True, "host"), fr.int32("port")
                    )
                    ep.rack = fr.string(True, "rack")
                    ep.tagged = fr.tagged()
                    msg.node_endpoints.append(ep)
                fr.end("NodeEndpoints")
        return msg

    def encode(self) -> bytes:
        w = Writer()
        w.raw(self.prefix)
        w.raw(encode_uvarint(len(self.tags)))
        for tag, value in self.tags:
            if tag == 0:
                fw = Writer()
                eps = self.node_endpoints
                fw.array_len(None if eps is None else len(eps), True)
                for ep in eps or ():
                    fw.int32(ep.node_id)
                    fw.string(ep.host, True)
                    fw.int32(ep.port)
                    fw.string(ep.rack, True)
                    fw.raw(ep.tagged)
                value = fw.bytes()
            w.raw(encode_uvarint(tag) + encode_uvarint(len(value)) + value)
        return w.bytes()

    def endpoints(self) -> list[Endpoint]:
        return list(self.node_endpoints or ())


AddressResponse = (
    MetadataResponse | FindCoordinatorResponse | DescribeClusterResponse | LeaderHintResponse
)

_DECODERS: dict[int, type[MetadataResponse | FindCoordinatorResponse | DescribeClusterResponse]] = {
    METADATA: MetadataResponse,
    FIND_COORDINATOR: FindCoordinatorResponse,
    DESCRIBE_CLUSTER: DescribeClusterResponse,
}


# -- whole response frames ---------------------------------------------------------------------


def split_response_header(api_key: int, api_version: int, payload: bytes) -> tuple[bytes, bytes]:
    """(header, body) of a response payload: correlation id, plus tagged fields if flexible.

    The response header is v1 exactly when the request was flexible, except for ApiVersions,
    whose response header is always v0.
    """
    r = Reader(payload)
    r.int32("correlation_id")
    if api_key != API_VERSIONS and is_flexible(api_key, api_version):
        r.tagged()
    return payload[: r.pos], payload[r.pos :]


@dataclass
class DecodedResponse:
    """A response frame payload split into its header bytes and its decoded body."""

    api_key: int
    api_version: int
    header: bytes
    body: AddressResponse

    def endpoints(self) -> list[Endpoint]:
        return self.body.endpoints()

    def encode(self) -> bytes:
        return self.header + self.body.encode()


def decode_response(api_key: int, api_version: int, payload: bytes) -> DecodedResponse:
    """Decode an address-carrying response payload (without size prefix); FrameError if not."""
    if api_key not in _DECODERS and api_key not in HINT_VERSIONS:
        raise UnsupportedResponse(f"api key {api_key} carries no broker addresses")
    _need_version(api_key, api_version)
    head, body = split_response_header(api_key, api_version, payload)
    cls = _DECODERS.get(api_key)
    if cls is None:
        return DecodedResponse(
            api_key, api_version, head, LeaderHintResponse.decode_for(api_key, api_version, body)
        )
    return DecodedResponse(api_key, api_version, head, cls.decode(api_version, body))


def rewrite_addresses(
    decoded: DecodedResponse, addresses: dict[int, tuple[str, int]]
) -> list[tuple[int, str | None, int]]:
    """Point every endpoint whose node id is in `addresses` at its new (host, port).

    Returns (node_id, old host, old port) of each endpoint changed.
    """
    changed: list[tuple[int, str | None, int]] = []
    for ep in decoded.endpoints():
        new = addresses.get(ep.node_id)
        if new is not None and (ep.host, ep.port) != new:
            changed.append((ep.node_id, ep.host, ep.port))
            ep.host, ep.port = new
    return changed


def cap_api_versions(api_version: int, payload: bytes, caps: dict[int, int]) -> bytes:
    """Lower the MaxVersion of the api keys in `caps` in an ApiVersions response payload.

    Everything else stays byte-exact. A response that does not parse is returned unchanged.
    """
    try:
        head, body = split_response_header(API_VERSIONS, api_version, payload)
        r = Reader(body)
        error_code = r.int16("error_code")
        # An answer to a version the broker does not know is always encoded as v0.
        flex = api_version >= 3 and error_code != UNSUPPORTED_VERSION
        out = bytearray(payload)
        for _ in range(r.array_len(flex, "api_keys")):
            key, low = r.int16("api_key"), r.int16("min_version")
            at = len(head) + r.pos
            high = r.int16("max_version")
            cap = caps.get(key)
            if cap is not None and high > cap >= low:
                INT16.pack_into(out, at, cap)
            if flex:
                r.tagged()
        return bytes(out)
    except FrameError:
        return payload


__all__ = [
    "API_VERSIONS",
    "DESCRIBE_CLUSTER",
    "FIND_COORDINATOR",
    "HINT_VERSIONS",
    "MAX_VERSIONS",
    "METADATA",
    "REWRITE_APIS",
    "Coordinator",
    "DecodedResponse",
    "DescribeClusterBroker",
    "DescribeClusterResponse",
    "Endpoint",
    "FindCoordinatorResponse",
    "LeaderHintResponse",
    "MetadataBroker",
    "MetadataResponse",
    "NodeEndpoint",
    "UnsupportedResponse",
    "cap_api_versions",
    "decode_response",
    "encode_uvarint",
    "may_carry_addresses",
    "rewrite_addresses",
    "split_response_header",
]
