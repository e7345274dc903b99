"""Kafka framing: splitting, request headers v1/v2, Produce acks, response correlation ids."""

from __future__ import annotations

import random
import struct

import pytest

from engine.kafka.wire import MAX_FRAME_SIZE, FrameError, FrameSplitter, encode_frame, read_uvarint
from engine.proxy.framing import (
    api_name,
    is_flexible,
    parse_produce_acks,
    parse_request_header,
    response_correlation_id,
)

# -- byte builders (independent of the module under test) --------------------------------------


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


def string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def tagged(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag, value in fields.items():
        out += uvarint(tag) + uvarint(len(value)) + value
    return out


def header(
    api_key: int,
    version: int,
    corr: int,
    client_id: str | None,
    tags: dict[int, bytes] | None = None,
) -> bytes:
    """Request header v1, or v2 when `tags` is given (even empty)."""
    h = struct.pack(">hhi", api_key, version, corr) + string(client_id)
    return h + tagged(tags) if tags is not None else h


def produce(version: int, acks: int, txn: str | None = None, corr: int = 7) -> bytes:
    """A Produce request frame payload whose body starts with the real field layout."""
    if version >= 9:
        h = header(0, version, corr, "producer-1", {0: b"\x01\x02", 5: b"xyz"})
        body = compact_string(txn)
    elif version >= 3:
        h = header(0, version, corr, "producer-1")
        body = string(txn)
    else:
        h = header(0, version, corr, "producer-1")
        body = b""
    return h + body + struct.pack(">hi", acks, 30000) + b"\x00\x00\x00\x00rest-of-request"


# -- FrameSplitter -----------------------------------------------------------------------------


def test_splitter_handles_arbitrary_chunk_boundaries() -> None:
    payloads = [b"", b"a", b"hello world", bytes(range(256)) * 40, b"\x00\x00\x00\x05"]
    stream = b"".join(encode_frame(p) for p in payloads)
    rng = random.Random(1)
    for _ in range(200):
        splitter = FrameSplitter()
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 9) if rng.random() < 0.7 else rng.randint(1, 3000)
            got += splitter.feed(stream[pos : pos + step])
            pos += step
        assert got == payloads
        assert splitter.buffered == 0


def test_splitter_size_split_across_chunks_and_keeps_remainder() -> None:
    frame = encode_frame(b"payload!")
    splitter = FrameSplitter()
    assert splitter.feed(frame[:2]) == []  # half a size
    assert splitter.feed(frame[2:6]) == []  # size complete, payload partial
    assert splitter.buffered == 6
    assert splitter.feed(frame[6:] + frame[:3]) == [b"payload!"]  # plus the start of the next
    assert splitter.buffered == 3
    assert splitter.feed(frame[3:]) == [b"payload!"]


def test_splitter_many_frames_in_one_chunk() -> None:
    payloads = [f"frame-{i}".encode() for i in range(50)]
    assert FrameSplitter().feed(b"".join(encode_frame(p) for p in payloads)) == payloads


@pytest.mark.parametrize("size", [-1, -(2**31), MAX_FRAME_SIZE + 1, 2**31 - 1])
def test_splitter_rejects_bad_sizes(size: int) -> None:
    with pytest.raises(FrameError, match="invalid Kafka frame size"):
        FrameSplitter().feed(struct.pack(">i", size) + b"xx")


def test_splitter_accepts_max_size_prefix_without_buffering_it_all() -> None:
    assert FrameSplitter().feed(struct.pack(">i", MAX_FRAME_SIZE) + b"abc") == []


def test_encode_frame() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"


# -- request headers ---------------------------------------------------------------------------


def test_header_v1() -> None:
    frame = header(3, 8, 123456, "rdkafka") + b"body"
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 8, 123456, "rdkafka")
    assert frame[h.header_length :] == b"body"
    assert h.api_name == "Metadata"


def test_header_v2_skips_tagged_fields() -> None:
    frame = header(3, 12, -5, "client", {1: b"a" * 200, 2: b""}) + b"body"
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, -5, "client")
    assert frame[h.header_length :] == b"body"


def test_header_v2_client_id_is_not_compact() -> None:
    # 12 characters: a compact string would encode length as 13 in one byte; we use int16.
    frame = header(18, 3, 1, "abcdefghijkl", {}) + b"\x07"
    h = parse_request_header(frame)
    assert h.client_id == "abcdefghijkl"
    assert frame[h.header_length :] == b"\x07"


def test_null_client_id() -> None:
    for tags in (None, {}):
        flexible_version = 9 if tags is not None else 8
        h = parse_request_header(header(3, flexible_version, 9, None, tags) + b"z")
        assert h.client_id is None
        assert h.correlation_id == 9


def test_flexible_override_and_table() -> None:
    assert is_flexible(0, 9) and not is_flexible(0, 8)
    assert is_flexible(18, 3) and not is_flexible(18, 2)
    assert not is_flexible(9999, 50)  # unknown api: header v1
    frame = header(9999, 1, 4, "x", {}) + b"q"
    assert parse_request_header(frame, flexible=True).header_length == len(frame) - 1


def test_truncated_header_is_rejected() -> None:
    with pytest.raises(FrameError):
        parse_request_header(b"\x00\x00\x00")
    with pytest.raises(FrameError):
        parse_request_header(struct.pack(">hhih", 3, 1, 1, 10) + b"short")


def test_api_names() -> None:
    assert api_name(0) == "Produce"
    assert api_name(22) == "InitProducerId"
    assert api_name(26) == "EndTxn"
    assert api_name(4242) == "Api4242"


def test_uvarint_roundtrip() -> None:
    for n in (0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1):
        assert read_uvarint(uvarint(n) + b"tail", 0) == (n, len(uvarint(n)))
    with pytest.raises(FrameError):
        read_uvarint(b"\xff\xff\xff\xff\xff\xff", 0)


# -- Produce -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "acks", "txn"),
    [
        (3, -1, None),
        (3, 1, "tx-a"),
        (7, -1, "my-transactional-id"),
        (7, 0, None),
        (9, -1, "tx-flexible"),
        (9, 1, None),
        (9, 0, None),
        (11, -1, "t" * 300),  # long enough for a two-byte varint length
        (2, 1, None),
        (0, 0, None),
    ],
)
def test_produce_acks(version: int, acks: int, txn: str | None) -> None:
    frame = produce(version, acks, txn)
    h = parse_request_header(frame)
    info = parse_produce_acks(frame, h)
    assert info.acks == acks
    assert info.transactional_id == (txn if version >= 3 else None)


def test_produce_v9_needs_the_header_tagged_fields_skipped() -> None:
    frame = produce(9, -1, "tx")
    wrong = parse_request_header(frame, flexible=False)
    assert parse_produce_acks(frame, parse_request_header(frame)).acks == -1
    with pytest.raises(FrameError):  # header tag bytes misread as the body
        parse_produce_acks(frame[: wrong.header_length + 3], wrong)


def test_produce_acks_rejects_other_apis_and_truncation() -> None:
    frame = header(1, 11, 1, "c") + b"\x00" * 20
    with pytest.raises(FrameError):
        parse_produce_acks(frame, parse_request_header(frame))
    short = produce(7, -1, "abc")
    h = parse_request_header(short)
    with pytest.raises(FrameError):
        parse_produce_acks(short[: h.header_length + 4], h)


# -- responses ---------------------------------------------------------------------------------


def test_response_correlation_id() -> None:
    assert response_correlation_id(struct.pack(">i", 77) + b"\x00rest") == 77
    assert response_correlation_id(struct.pack(">i", -2)) == -2
    with pytest.raises(FrameError):
        response_correlation_id(b"\x00\x01")


def produce_response(version: int, partitions: list[tuple[int, int]], topic: str = "t") -> bytes:
    """A Produce response as the protocol's schema lays it out (v7 rigid, v9+ flexible)."""
    flexible = version >= 9

    def uvarint(n: int) -> bytes:
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out

    def array(n: int) -> bytes:
        return uvarint(n + 1) if flexible else struct.pack(">i", n)

    def string(s: str | None) -> bytes:
        if s is None:
            return uvarint(0) if flexible else struct.pack(">h", -1)
        raw = s.encode()
        return (uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw

    tags = uvarint(0) if flexible else b""
    body = struct.pack(">i", 42) + tags + array(1) + string(topic) + array(len(partitions))
    for index, code in partitions:
        body += struct.pack(">ihqqq", index, code, 7, -1, 0)
        if version >= 8:
            body += array(0) + string("why" if code else None)
        body += tags
    return body + tags + struct.pack(">i", 0) + tags


@pytest.mark.parametrize("version", [7, 8, 9, 11])
def test_produce_response_errors_are_read_per_partition(version: int) -> None:
    from engine.proxy.framing import produce_response_errors

    frame = produce_response(version, [(0, 0), (1, 7), (2, 19)])
    errors = produce_response_errors(frame, version)
    assert [(e.topic, e.partition, e.error_name) for e in errors] == [
        ("t", 1, "REQUEST_TIMED_OUT"),
        ("t", 2, "NOT_ENOUGH_REPLICAS"),
    ]
    assert produce_response_errors(produce_response(version, [(0, 0)]), version) == []


def test_a_truncated_produce_response_is_a_frame_error() -> None:
    from engine.proxy.framing import produce_response_errors

    with pytest.raises(FrameError):
        produce_response_errors(produce_response(9, [(0, 7)])[:12], 9)
