"""Kafka's wire format, as both the fault proxy (engine.proxy) and the quorum client
(engine.kafka.quorum) speak it: size-prefixed frames, varints, and a reader and a writer
of a message's fields.

Pure functions only. Layouts follow the Kafka protocol guide (https://kafka.apache.org/protocol).
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
MAX_FRAME_SIZE = 100 * 1024 * 1024  # far above any sane Kafka message; catches garbage early
EMPTY_TAGS = b"\x00"  # a tagged-field section with no fields

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")


class FrameError(ValueError):
    """Bytes that are not valid Kafka framing (or not the layout we expected)."""


def encode_frame(payload: bytes) -> bytes:
    """Prefix a payload with its int32 size."""
    return SIZE.pack(len(payload)) + payload


class FrameSplitter:
    """Incremental splitter: feed raw stream bytes, get complete frame payloads back."""

    def __init__(self, max_size: int = MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._max = max_size

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Append data; return every frame payload (without the size prefix) now complete."""
        self._buf += data
        frames: list[bytes] = []
        pos = 0
        buf = self._buf
        while len(buf) - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise FrameError(f"invalid Kafka frame size {size} (allowed 0..{self._max})")
            if len(buf) - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


def need(frame: bytes, pos: int, n: int, what: str) -> None:
    if pos + n > len(frame):
        raise FrameError(f"truncated frame reading {what} at offset {pos} (len {len(frame)})")


def read_uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (protobuf style); return (value, new position)."""
    value = 0
    shift = 0
    while True:
        need(frame, pos, 1, "varint")
        b = frame[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:  # Kafka uvarints are at most 5 bytes (32 bits)
            raise FrameError("varint too long")


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint, shortest form (as Kafka writes it)."""
    if n < 0:
        raise ValueError(f"uvarint must be >= 0, got {n}")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class Reader:
    """Sequential reader over one response body; every short read raises FrameError."""

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise FrameError(f"truncated response reading {what} at offset {self.pos}")
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def skip(self, n: int, what: str) -> None:
        """Step over n bytes without copying them."""
        if n < 0 or self.pos + n > len(self.buf):
            raise FrameError(f"truncated response skipping {what} at offset {self.pos}")
        self.pos += n

    def _unpack(self, s: struct.Struct, what: str) -> int:
        value: int = s.unpack(self._take(s.size, what))[0]
        return value

    def int8(self, what: str = "int8") -> int:
        return self._unpack(INT8, what)

    def int16(self, what: str = "int16") -> int:
        return self._unpack(INT16, what)

    def int32(self, what: str = "int32") -> int:
        return self._unpack(INT32, what)

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def string(self, compact: bool, what: str = "string") -> str | None:
        """STRING / NULLABLE_STRING, or their COMPACT_ forms; None is the null string.

        Bytes that are not UTF-8 survive a decode/encode round trip (surrogateescape).
        """
        n = self.uvarint() - 1 if compact else self.int16(what)
        if n < -1:
            raise FrameError(f"negative length {n} for {what}")
        if n == -1:
            return None
        return self._take(n, what).decode("utf-8", "surrogateescape")

    def array_len(self, compact: bool, what: str = "array") -> int:
        """Element count of an ARRAY / COMPACT_ARRAY; -1 is the null array."""
        n = self.uvarint() - 1 if compact else self.int32(what)
        if n < -1:
            raise FrameError(f"negative length {n} for {what}")
        if n > len(self.buf) - self.pos:  # every element takes at least one byte
            raise FrameError(f"{what} claims {n} elements, more than the bytes left")
        return n

    def tagged(self) -> bytes:
        """A tagged-field section, as its raw bytes (count included)."""
        start = self.pos
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.skip(self.uvarint(), "tagged field")
        return self.buf[start : self.pos]

    def rest(self) -> bytes:
        chunk = self.buf[self.pos :]
        self.pos = len(self.buf)
        return chunk

    def end(self, what: str) -> None:
        if self.pos != len(self.buf):
            raise FrameError(f"{len(self.buf) - self.pos} unexpected trailing bytes after {what}")


class Writer:
    """Mirror of Reader: appends encoded primitives."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += INT8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += INT16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += INT32.pack(v)

    def string(self, s: str | None, compact: bool) -> None:
        if s is None:
            self.buf += encode_uvarint(0) if compact else INT16.pack(-1)
            return
        raw = s.encode("utf-8", "surrogateescape")
        self.buf += encode_uvarint(len(raw) + 1) if compact else INT16.pack(len(raw))
        self.buf += raw

    def array_len(self, n: int | None, compact: bool) -> None:
        n = -1 if n is None else n
        self.buf += encode_uvarint(n + 1) if compact else INT32.pack(n)

    def raw(self, b: bytes) -> None:
        self.buf += b

    def bytes(self) -> bytes:
        return bytes(self.buf)
