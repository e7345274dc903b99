"""Broker-address rewriting: Metadata, FindCoordinator and DescribeCluster codecs per version.

The byte builders here follow the Kafka 4.1 message JSON specs field by field and share no code
with engine/proxy/rewrite.py, so a round trip checks the codec against the spec, not itself.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.kafka.wire import FrameError, FrameSplitter, encode_frame
from engine.proxy.control import ProxyControl, read_events, start_control_server
from engine.proxy.framing import parse_request_header
from engine.proxy.rewrite import (
    Coordinator,
    DescribeClusterResponse,
    FindCoordinatorResponse,
    LeaderHintResponse,
    MetadataResponse,
    UnsupportedResponse,
    cap_api_versions,
    decode_response,
    may_carry_addresses,
    rewrite_addresses,
)
from engine.proxy.server import Proxy

pytestmark = pytest.mark.timeout(60)

# -- byte builders -----------------------------------------------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(value: str | None, compact: bool) -> bytes:
    """STRING/NULLABLE_STRING, or the COMPACT_ forms."""
    if value is None:
        return uvarint(0) if compact else i16(-1)
    raw = value.encode()
    return (uvarint(len(raw) + 1) if compact else i16(len(raw))) + raw


def arr(items: list[bytes], compact: bool) -> bytes:
    return (uvarint(len(items) + 1) if compact else i32(len(items))) + b"".join(items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    out = uvarint(len(fields))
    for tag, value in sorted(fields.items()):
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


UNKNOWN_TAGS = {0: b"\x01\x02\x03", 7: b"x" * 130}  # a size above 127 takes a 2-byte varint

Broker = tuple[int, str, int, str | None]  # node, host, port, rack

BROKERS: list[Broker] = [
    (1, "kafka-1.internal.example", 9092, "rack-a"),
    (2, "10.0.0.2", 19092, None),
    (30, "kafka-30", 9093, "r"),
]


def metadata_topics(version: int) -> bytes:
    """Everything after ControllerId: topics (one with a partition), then the v8+/v13 tail."""
    flex = version >= 9
    part = i16(0) + i32(0) + i32(1)
    if version >= 7:
        part += i32(5)  # leader epoch
    part += arr([i32(1), i32(2)], flex) + arr([i32(1)], flex)
    if version >= 5:
        part += arr([i32(2)], flex)  # offline replicas
    if flex:
        part += tags()
    topic = i16(0) + s("payments", flex)
    if version >= 10:
        topic += bytes(range(16))  # topic id
    if version >= 1:
        topic += b"\x00"  # is_internal
    topic += arr([part], flex)
    if version >= 8:
        topic += i32(-(2**31))
    if flex:
        topic += tags()
    out = arr([topic], flex)
    if 8 <= version <= 10:
        out += i32(-(2**31))  # cluster authorized operations
    if version >= 13:
        out += i16(0)  # top-level error code
    if flex:
        out += tags({3: b"top"})
    return out


def metadata_body(version: int, brokers: list[Broker], broker_tags: bool = True) -> bytes:
    flex = version >= 9
    out = i32(250) if version >= 3 else b""
    items = []
    for node, host, port, rack in brokers:
        item = i32(node) + s(host, flex) + i32(port)
        if version >= 1:
            item += s(rack, flex)
        if flex:
            item += tags(UNKNOWN_TAGS if broker_tags and node == 2 else None)
        items.append(item)
    out += arr(items, flex)
    if version >= 2:
        out += s("cluster-Xyz_123", flex)
    if version >= 1:
        out += i32(2)
    return out + metadata_topics(version)


Coord = tuple[str, int, str, int, int, str | None]  # key, node, host, port, error, message

COORDS: list[Coord] = [
    ("group-a", 1, "kafka-1.internal.example", 9092, 0, None),
    ("group-b", -1, "", -1, 15, "The coordinator is not available."),
    ("txn-1", 30, "kafka-30", 9093, 0, None),
]


def find_coordinator_body(version: int, coords: list[Coord]) -> bytes:
    flex = version >= 3
    out = i32(0) if version >= 1 else b""
    if version < 4:
        _key, node, host, port, err, msg = coords[0]
        out += i16(err)
        if version >= 1:
            out += s(msg, flex)
        out += i32(node) + s(host, flex) + i32(port)
    else:
        items = [
            s(key, True) + i32(node) + s(host, True) + i32(port) + i16(err) + s(msg, True) + tags()
            for key, node, host, port, err, msg in coords
        ]
        out += arr(items, True)
    if flex:
        out += tags(UNKNOWN_TAGS)
    return out


def describe_cluster_body(version: int, brokers: list[Broker], endpoint_type: int = 1) -> bytes:
    out = i32(0) + i16(0) + s(None, True)
    if version >= 1:
        out += i8(endpoint_type)
    out += s("cluster-Xyz_123", True) + i32(1)
    items = []
    for node, host, port, rack in brokers:
        item = i32(node) + s(host, True) + i32(port) + s(rack, True)
        if version >= 2:
            item += i8(1 if node == 30 else 0)  # is_fenced
        items.append(item + tags(UNKNOWN_TAGS if node == 2 else None))
    return out + arr(items, True) + i32(-(2**31)) + tags({1: b"\x00"})


def moved(brokers: list[Broker], to: dict[int, tuple[str, int]]) -> list[Broker]:
    return [(n, *to.get(n, (h, p)), r) for n, h, p, r in brokers]


PROXIED = {1: ("127.0.0.1", 40001), 2: ("127.0.0.1", 40002), 30: ("127.0.0.1", 40030)}


# -- Metadata ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(14))
def test_metadata_round_trip_is_byte_exact(version: int) -> None:
    body = metadata_body(version, BROKERS)
    msg = MetadataResponse.decode(version, body)
    assert [(b.node_id, b.host, b.port) for b in msg.brokers or []] == [
        (n, h, p) for n, h, p, _ in BROKERS
    ]
    assert [b.rack for b in msg.brokers or []] == (
        [r for *_, r in BROKERS] if version >= 1 else [None] * 3
    )
    assert msg.cluster_id == ("cluster-Xyz_123" if version >= 2 else None)
    assert msg.controller_id == (2 if version >= 1 else None)
    assert msg.throttle_time_ms == (250 if version >= 3 else None)
    assert msg.rest == metadata_topics(version)
    assert msg.encode() == body


@pytest.mark.parametrize("version", range(14))
def test_metadata_rewrite_changes_only_hosts_and_ports(version: int) -> None:
    msg = MetadataResponse.decode(version, metadata_body(version, BROKERS))
    changed = rewrite_addresses_body(msg, PROXIED)
    assert changed == [(n, h, p) for n, h, p, _ in BROKERS]
    assert msg.encode() == metadata_body(version, moved(BROKERS, PROXIED))


def rewrite_addresses_body(msg: Any, addresses: dict[int, tuple[str, int]]) -> list:
    changed = []
    for ep in msg.endpoints():
        if ep.node_id in addresses:
            changed.append((ep.node_id, ep.host, ep.port))
            ep.host, ep.port = addresses[ep.node_id]
    return changed


def test_metadata_strings_are_compact_from_v9() -> None:
    for version, host_bytes in ((8, i16(8) + b"kafka-30"), (9, uvarint(9) + b"kafka-30")):
        msg = MetadataResponse.decode(version, metadata_body(version, BROKERS))
        assert host_bytes in msg.encode()
    # A host longer than 127 bytes needs a two-byte compact length.
    long_host = "h" * 200
    msg = MetadataResponse.decode(12, metadata_body(12, BROKERS))
    assert msg.brokers is not None
    msg.brokers[0].host = long_host
    assert msg.encode() == metadata_body(12, moved(BROKERS, {1: (long_host, 9092)}))
    assert uvarint(201) == b"\xc9\x01"


def test_metadata_keeps_unknown_tagged_fields() -> None:
    msg = MetadataResponse.decode(12, metadata_body(12, BROKERS))
    assert msg.brokers is not None
    assert msg.brokers[1].tagged == tags(UNKNOWN_TAGS)
    assert msg.brokers[0].tagged == b"\x00"
    rewrite_addresses_body(msg, PROXIED)
    assert tags(UNKNOWN_TAGS) in msg.encode()


def test_metadata_with_no_brokers_and_non_utf8_host() -> None:
    body = metadata_body(12, [])
    assert MetadataResponse.decode(12, body).encode() == body
    weird = metadata_body(1, [(1, "x", 1, None)]).replace(i16(1) + b"x", i16(2) + b"\xff\xfe")
    assert MetadataResponse.decode(1, weird).encode() == weird


# -- FindCoordinator ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_round_trip_is_byte_exact(version: int) -> None:
    coords = COORDS if version >= 4 else COORDS[:1]
    body = find_coordinator_body(version, coords)
    msg = FindCoordinatorResponse.decode(version, body)
    got = [
        (c.key, c.node_id, c.host, c.port, c.error_code, c.error_message)
        for c in msg.coordinators or []
    ]
    if version >= 4:
        assert got == COORDS
    else:
        _key, node, host, port, err, _ = COORDS[0]
        assert got == [(None, node, host, port, err, None)]
    assert msg.throttle_time_ms == (0 if version >= 1 else None)
    assert msg.tagged == (tags(UNKNOWN_TAGS) if version >= 3 else b"\x00")
    assert msg.encode() == body


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_rewrite(version: int) -> None:
    coords = COORDS if version >= 4 else COORDS[:1]
    msg = FindCoordinatorResponse.decode(version, find_coordinator_body(version, coords))
    rewrite_addresses_body(msg, PROXIED)  # node -1 ("not available") is not in the map
    assert msg.encode() == find_coordinator_body(version, moved_coords(coords))


def test_find_coordinator_error_message_and_old_versions() -> None:
    coord = [("g", -1, "", -1, 15, "not available")]
    for version in (1, 2, 3):
        body = find_coordinator_body(version, coord)
        msg = FindCoordinatorResponse.decode(version, body)
        assert msg.coordinators == [Coordinator(-1, "", -1, 15, "not available", None)]
        assert msg.encode() == body
    with pytest.raises(ValueError):
        FindCoordinatorResponse(2, []).encode()


# -- DescribeCluster ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(3))
def test_describe_cluster_round_trip_is_byte_exact(version: int) -> None:
    body = describe_cluster_body(version, BROKERS)
    msg = DescribeClusterResponse.decode(version, body)
    assert [(b.node_id, b.host, b.port, b.rack) for b in msg.brokers or []] == BROKERS
    assert [b.is_fenced for b in msg.brokers or []] == (
        [False, False, True] if version >= 2 else [None] * 3
    )
    assert msg.endpoint_type == (1 if version >= 1 else None)
    assert (msg.cluster_id, msg.controller_id) == ("cluster-Xyz_123", 1)
    assert msg.cluster_authorized_operations == -(2**31)
    assert msg.brokers is not None and msg.brokers[1].tagged == tags(UNKNOWN_TAGS)
    assert msg.encode() == body


@pytest.mark.parametrize("version", range(3))
def test_describe_cluster_rewrite(version: int) -> None:
    msg = DescribeClusterResponse.decode(version, describe_cluster_body(version, BROKERS))
    rewrite_addresses_body(msg, PROXIED)
    assert msg.encode() == describe_cluster_body(version, moved(BROKERS, PROXIED))


def test_describe_cluster_controllers_are_not_endpoints() -> None:
    msg = DescribeClusterResponse.decode(1, describe_cluster_body(1, BROKERS, endpoint_type=2))
    assert msg.endpoints() == []


# -- leader hints in Produce / Fetch (KIP-951 NodeEndpoints) ----------------------------------


def node_endpoints(brokers: list[Broker]) -> bytes:
    return arr([i32(n) + s(h, True) + i32(p) + s(r, True) + tags() for n, h, p, r in brokers], True)


def produce_body(version: int, hints: list[Broker] | None) -> bytes:
    """ProduceResponse v10+: a NOT_LEADER_OR_FOLLOWER partition, then the leader's address."""
    part = i32(0) + i16(6) + struct.pack(">qqq", -1, -1, -1)
    part += arr([i32(0) + s("bad batch", True) + tags()], True)  # record errors
    part += s("not the leader", True) + tags({0: i32(2) + i32(7) + tags()})  # CurrentLeader
    topic = (bytes(range(16)) if version >= 13 else s("payments", True)) + arr([part], True)
    body = arr([topic + tags()], True) + i32(0)
    top = {} if hints is None else {0: node_endpoints(hints)}
    return body + tags({**top, 9: b"future"})


def fetch_body(version: int, hints: list[Broker] | None) -> bytes:
    """FetchResponse v16+ with records and an aborted transaction, then the leader's address."""
    records = b"R" * 300
    part = i32(0) + i16(6) + struct.pack(">qqq", 10, 10, 0)
    part += arr([struct.pack(">qq", 42, 3) + tags()], True)  # aborted transactions
    part += i32(-1) + uvarint(len(records) + 1) + records + tags({1: i32(2) + i32(7) + tags()})
    null_records_part = i32(1) + i16(0) + struct.pack(">qqq", 0, 0, 0) + uvarint(0)
    null_records_part += i32(-1) + uvarint(0) + tags()
    topic = bytes(range(16)) + arr([part, null_records_part], True) + tags()
    body = i32(0) + i16(0) + i32(12345) + arr([topic], True)
    return body + tags({} if hints is None else {0: node_endpoints(hints)})


HINT_CASES = [(0, v, produce_body) for v in range(10, 14)] + [
    (1, v, fetch_body) for v in range(16, 19)
]


@pytest.mark.parametrize(("api_key", "version", "build"), HINT_CASES)
def test_leader_hints_are_rewritten(api_key: int, version: int, build: Any) -> None:
    hints = [(2, "kafka-2.internal", 9092, "rack-b"), (30, "kafka-30", 9093, None)]
    body = build(version, hints)
    msg = LeaderHintResponse.decode_for(api_key, version, body)
    assert [(e.node_id, e.host, e.port, e.rack) for e in msg.endpoints()] == hints
    assert msg.encode() == body
    payload = frame(api_key, version, body)
    decoded = decode_response(api_key, version, payload)
    assert rewrite_addresses(decoded, PROXIED) == [(n, h, p) for n, h, p, _ in hints]
    assert decoded.encode() == frame(api_key, version, build(version, moved(hints, PROXIED)))


@pytest.mark.parametrize(("api_key", "version", "build"), HINT_CASES)
def test_responses_without_leader_hints_have_no_endpoints(
    api_key: int, version: int, build: Any
) -> None:
    decoded = decode_response(api_key, version, frame(api_key, version, build(version, None)))
    assert decoded.endpoints() == []
    assert decoded.encode() == frame(api_key, version, build(version, None))


def test_which_responses_may_carry_addresses() -> None:
    assert may_carry_addresses(3, 0) and may_carry_addresses(3, 99)
    assert may_carry_addresses(10, 6) and may_carry_addresses(60, 0)
    assert not may_carry_addresses(0, 9) and may_carry_addresses(0, 10)
    assert not may_carry_addresses(1, 15) and may_carry_addresses(1, 16)
    assert not may_carry_addresses(18, 3) and not may_carry_addresses(11, 9)
    with pytest.raises(UnsupportedResponse):
        decode_response(0, 14, frame(0, 13, produce_body(13, None)))


# -- whole frames ------------------------------------------------------------------------------


def frame(api_key: int, version: int, body: bytes, corr: int = 77) -> bytes:
    """A response payload: header v1 (with tagged fields) when the request was flexible."""
    flexible = {0: 9, 1: 12, 3: 9, 10: 3, 60: 0}[api_key] <= version
    return i32(corr) + (tags({5: b"hdr"}) if flexible else b"") + body


def moved_coords(coords: list[Coord]) -> list[Coord]:
    return [(k, n, *PROXIED.get(n, (h, p)), e, m) for k, n, h, p, e, m in coords]


CASES = [
    *[
        (3, v, metadata_body(v, BROKERS), metadata_body(v, moved(BROKERS, PROXIED)))
        for v in (0, 8, 9, 12, 13)
    ],
    *[
        (
            10,
            v,
            find_coordinator_body(v, COORDS[:1]),
            find_coordinator_body(v, moved_coords(COORDS[:1])),
        )
        for v in (0, 2, 3)
    ],
    *[
        (10, v, find_coordinator_body(v, COORDS), find_coordinator_body(v, moved_coords(COORDS)))
        for v in (4, 6)
    ],
    *[
        (
            60,
            v,
            describe_cluster_body(v, BROKERS),
            describe_cluster_body(v, moved(BROKERS, PROXIED)),
        )
        for v in (0, 1, 2)
    ],
]


@pytest.mark.parametrize(("api_key", "version", "body", "rewritten"), CASES)
def test_decode_response_keeps_the_header_and_rewrites_the_body(
    api_key: int, version: int, body: bytes, rewritten: bytes
) -> None:
    payload = frame(api_key, version, body)
    decoded = decode_response(api_key, version, payload)
    assert decoded.header == payload[: len(decoded.header)]
    assert decoded.encode() == payload
    changed = rewrite_addresses(decoded, PROXIED)
    assert changed and all(n in PROXIED for n, _, _ in changed)
    assert decoded.encode() == frame(api_key, version, rewritten)
    assert rewrite_addresses(decoded, PROXIED) == []  # already pointing at the proxy


def test_bad_and_unsupported_responses() -> None:
    with pytest.raises(UnsupportedResponse):
        decode_response(3, 14, frame(3, 13, metadata_body(13, BROKERS)))
    with pytest.raises(UnsupportedResponse):
        decode_response(0, 9, b"\x00" * 20)
    with pytest.raises(FrameError):  # truncated inside the broker list
        decode_response(3, 12, frame(3, 12, metadata_body(12, BROKERS))[:40])
    with pytest.raises(FrameError):  # trailing garbage
        decode_response(60, 0, frame(60, 0, describe_cluster_body(0, BROKERS)) + b"\x00")
    with pytest.raises(FrameError):  # a broker count far beyond the bytes present
        MetadataResponse.decode(1, i32(1_000_000) + b"\x00" * 10)


def api_versions_body(version: int, keys: list[tuple[int, int, int]], error: int = 0) -> bytes:
    flex = version >= 3
    items = [i16(k) + i16(lo) + i16(hi) + (tags() if flex else b"") for k, lo, hi in keys]
    out = i16(error) + arr(items, flex)
    if version >= 1:
        out += i32(0)
    if flex:
        out += tags({0: b"\x01", 1: b"\x00" * 8})
    return out


@pytest.mark.parametrize("version", range(5))
def test_api_versions_caps_only_the_rewritten_apis(version: int) -> None:
    keys = [(0, 3, 13), (3, 0, 15), (10, 0, 9), (18, 0, 4), (60, 0, 2)]
    payload = i32(9) + api_versions_body(version, keys)  # response header v0, always
    capped = cap_api_versions(version, payload, {3: 13, 10: 6, 60: 2})
    want = [(0, 3, 13), (3, 0, 13), (10, 0, 6), (18, 0, 4), (60, 0, 2)]
    assert capped == i32(9) + api_versions_body(version, want)


def test_api_versions_error_answer_is_v0_and_garbage_passes() -> None:
    payload = i32(1) + api_versions_body(0, [(18, 0, 4)], error=35)
    assert cap_api_versions(4, payload, {18: 3}) == i32(1) + api_versions_body(
        0, [(18, 0, 3)], error=35
    )
    assert cap_api_versions(3, b"\x00\x00", {3: 1}) == b"\x00\x00"


# -- the proxy in rewrite mode, against a fake broker ------------------------------------------


def request(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    flexible = {3: 9, 10: 3, 60: 0, 18: 3, 0: 9}.get(api_key, 99) <= version
    h = i16(api_key) + i16(version) + i32(corr) + s("tester", False)
    return h + (tags() if flexible else b"") + body


class AddressBroker:
    """Answers Metadata / FindCoordinator naming `advertised`; Produce v10+ with a hint."""

    def __init__(self, advertised: dict[int, tuple[str, int]]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.advertised = advertised
        self.hint = ("", -1)
        self.seen: list[tuple[int, int]] = []  # (listener port of this broker, api key)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        splitter = FrameSplitter()
        brokers = [(n, h, p, None) for n, (h, p) in self.advertised.items()]
        with conn:
            try:
                while data := conn.recv(65536):
                    for payload in splitter.feed(data):
                        h = parse_request_header(payload)
                        self.seen.append((h.api_key, h.api_version))
                        if h.api_key == 3:
                            body = metadata_body(h.api_version, brokers, broker_tags=False)
                        elif h.api_key == 10:
                            coords = [("g", 2, *self.advertised[2], 0, None)]
                            body = find_coordinator_body(h.api_version, coords)
                        elif h.api_key == 0 and h.api_version >= 10:  # "moved to node 3"
                            hint = [(3, *self.hint, None)]
                            body = produce_body(h.api_version, hint)
                        else:  # anything else: a header v0 response with a dummy body
                            conn.sendall(encode_frame(i32(h.correlation_id) + b"\x00\x00echo"))
                            continue
                        resp = frame(h.api_key, h.api_version, body, h.correlation_id)
                        conn.sendall(encode_frame(resp))
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def recv_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    return exact(struct.unpack(">i", exact(4))[0])


class RewriteProxy:
    def __init__(self, broker_port: int, events: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.events = events
        self.proxy: Proxy = self._call(self._make(broker_port))
        self.ctl = ProxyControl("127.0.0.1", self.control_port)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _make(self, broker_port: int) -> Proxy:
        # A dead first upstream: the bootstrap listener must fail over to the live one.
        dead = socket.create_server(("127.0.0.1", 0))
        dead_port = dead.getsockname()[1]
        dead.close()
        proxy = Proxy(
            bootstrap=[("127.0.0.1", dead_port), ("127.0.0.1", broker_port)],
            events_path=self.events,
            connect_timeout=1.0,
        )
        await proxy.start()
        self.control = await start_control_server(proxy, "127.0.0.1", 0)
        self.control_port = self.control.sockets[0].getsockname()[1]
        return proxy

    async def _stop(self) -> None:
        self.control.close()
        await self.proxy.stop()

    def stop(self) -> None:
        self._call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_proxy_rewrites_metadata_and_opens_node_listeners(tmp_path: Path) -> None:
    broker = AddressBroker({})
    # Both "nodes" are really this same fake broker, advertised under other names.
    broker.advertised = {1: ("127.0.0.1", broker.port), 2: ("localhost", broker.port)}
    broker.hint = ("127.0.0.1", broker.port)  # node 3, only named by a Produce leader hint
    lab = RewriteProxy(broker.port, tmp_path / "events.jsonl")
    try:
        boot = lab.ctl.bootstrap_address()
        assert boot is not None
        host, port = boot.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(encode_frame(request(3, 12, 1, b"\x00\x01\x00")))
            meta = decode_response(3, 12, recv_frame(sock))
        addrs = {b.node_id: (b.host, b.port) for b in meta.body.brokers or []}
        assert set(addrs) == {1, 2} and all(h == "127.0.0.1" for h, _ in addrs.values())
        assert broker.port not in {p for _, p in addrs.values()}
        status = lab.ctl.status()
        assert status["mode"] == "rewrite"
        assert status["nodes"]["1"]["listen"] == f"127.0.0.1:{addrs[1][1]}"
        assert status["nodes"]["2"]["upstream"] == f"localhost:{broker.port}"
        assert status["bootstrap"]["upstream_connect_failures"] == 1
        found = [e for e in read_events(lab.events) if e["kind"] == "broker_discovered"]
        assert sorted(e["node"] for e in found) == [1, 2]
        assert {e["via"] for e in found} == {"Metadata"}

        # Through node 2's listener: FindCoordinator is rewritten too, and no new listener.
        with socket.create_connection(addrs[2], timeout=5) as sock:
            sock.sendall(encode_frame(request(10, 4, 5, b"\x00\x02\x02g\x00")))
            coord = decode_response(10, 4, recv_frame(sock))
            sock.sendall(encode_frame(request(1, 4, 6, b"fetch")))
            assert recv_frame(sock) == i32(6) + b"\x00\x00echo"  # others pass byte-exact
        assert [(c.node_id, c.host, c.port) for c in coord.body.endpoints()] == [(2, *addrs[2])]
        assert len([e for e in read_events(lab.events) if e["kind"] == "broker_discovered"]) == 2
        assert lab.ctl.status()["nodes"]["2"]["connections_accepted"] == 1

        # A leader hint in a Produce response opens node 3's listener and is rewritten.
        with socket.create_connection(addrs[1], timeout=5) as sock:
            produce = i16(-1) + i16(-1) + i32(30000) + arr([], True) + tags()
            sock.sendall(encode_frame(request(0, 11, 9, produce)))
            hinted = decode_response(0, 11, recv_frame(sock))
        (ep,) = hinted.endpoints()
        node3 = lab.ctl.status()["nodes"]["3"]
        assert (ep.node_id, f"{ep.host}:{ep.port}") == (3, node3["advertised"])
        assert node3["upstream"] == f"127.0.0.1:{broker.port}"
        kinds = [(e["kind"], e["node"], e.get("via")) for e in read_events(lab.events)]
        assert ("broker_discovered", 3, "Produce") in kinds

        # Faults address discovered nodes by their real ids.
        lab.ctl.set_latency(300, node=2)
        lab.ctl.set_latency(0, node=2)
        assert lab.ctl.reset_connections(node=7) == 0  # unknown yet: accepted in rewrite mode
    finally:
        lab.stop()
        broker.close()


def test_cli_arguments_of_rewrite_mode() -> None:
    from engine.proxy.__main__ import parse_args

    args = parse_args(
        [
            "--bootstrap-upstream",
            "b1:9092,b2:9093",
            "--control",
            "127.0.0.1:0",
            "--listen-host",
            "0.0.0.0",
            "--advertise-host",
            "lab.local",
            "--bootstrap-listen-port",
            "29092",
        ]
    )
    assert args.bootstrap_upstream == [("b1", 9092), ("b2", 9093)]
    assert (args.listen_host, args.advertise_host, args.bootstrap_listen_port) == (
        "0.0.0.0",
        "lab.local",
        29092,
    )
    assert args.route is None
    for bad in (
        ["--control", "127.0.0.1:0"],  # neither mode
        ["--bootstrap-upstream", "b1", "--control", "127.0.0.1:0"],
        ["--bootstrap-upstream", "b1:1", "--route", "1:h:1:h:2", "--control", "127.0.0.1:0"],
        ["--route", "1:h:1:h:2", "--advertise-host", "x", "--control", "127.0.0.1:0"],
        ["--bootstrap-upstream", "b1:1", "--bootstrap-listen-port", "70000", "--control", ":0"],
    ):
        with pytest.raises(SystemExit):
            parse_args(bad)
    with pytest.raises(ValueError):
        Proxy()  # neither routes nor bootstrap
