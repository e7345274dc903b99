"""The active KRaft controller, asked of the metadata quorum (DescribeQuorum, api key 55).

In KRaft mode the "controller" a broker names in its Metadata and DescribeCluster answers is a
random live broker (clients cannot reach the controllers, so the broker forwards their
controller requests itself): it says nothing about which node runs the cluster's metadata.
The active controller is the leader of the `__cluster_metadata` Raft quorum, which a broker
tells when asked DescribeQuorum (it forwards the request to the quorum, as
`kafka-metadata-quorum.sh --bootstrap-server ... describe --status` does).

A frozen active controller is a blind spot: the other voters elect a new one within seconds,
but a broker keeps forwarding to the frozen one until that request times out (about 30 s), so
callers give up sooner and say the controller is not known. A killed one is replaced at once.

confluent-kafka has no describe-metadata-quorum call (librdkafka does not implement the API),
so this module sends that one request by hand, with the fault proxy's wire reader and writer.
"""

from __future__ import annotations

import itertools
import socket
import time
from dataclasses import dataclass

from engine.base.errors import QuorumUnknown
from engine.kafka.wire import SIZE, FrameError, Reader, Writer, encode_frame

DESCRIBE_QUORUM = 55
VERSION = 0  # flexible from v0 on; v0 is all this needs (the leader's id and epoch)
METADATA_TOPIC = "__cluster_metadata"
_correlation = itertools.count(1)


@dataclass(frozen=True)
class QuorumLeader:
    node_id: int  # the active controller
    epoch: int  # the quorum's leader epoch: it grows with every controller election


def encode_request(correlation_id: int, client_id: str = "lab-quorum") -> bytes:
    """DescribeQuorumRequest v0 for partition 0 of __cluster_metadata, framed."""
    w = Writer()
    w.int16(DESCRIBE_QUORUM)
    w.int16(VERSION)
    w.int32(correlation_id)
    w.string(client_id, compact=False)  # request header v2 keeps a non-compact client id
    w.raw(b"\x00")  # header tagged fields
    w.array_len(1, compact=True)  # topics
    w.string(METADATA_TOPIC, compact=True)
    w.array_len(1, compact=True)  # partitions
    w.int32(0)
    w.raw(b"\x00")  # partition tagged fields
    w.raw(b"\x00")  # topic tagged fields
    w.raw(b"\x00")  # request tagged fields
    return encode_frame(w.bytes())


def decode_response(payload: bytes, correlation_id: int) -> QuorumLeader:
    """The quorum's leader from a DescribeQuorumResponse v0 payload (after the size)."""
    r = Reader(payload)
    if (got := r.int32("correlation_id")) != correlation_id:
        raise FrameError(f"answer to request {got}, expected {correlation_id}")
    r.tagged()  # response header v1
    if error := r.int16("error_code"):
        raise QuorumUnknown(f"DescribeQuorum failed with error code {error}")
    for _ in range(r.array_len(compact=True, what="topics")):
        r.string(compact=True, what="topic_name")
        for _ in range(r.array_len(compact=True, what="partitions")):
            r.int32("partition_index")
            if error := r.int16("partition error_code"):
                raise QuorumUnknown(f"DescribeQuorum failed with error code {error}")
            leader, epoch = r.int32("leader_id"), r.int32("leader_epoch")
            if leader < 0:
                raise QuorumUnknown("the metadata quorum has no leader right now")
            return QuorumLeader(node_id=leader, epoch=epoch)
    raise QuorumUnknown("the answer named no partition of __cluster_metadata")


def _ask(address: str, timeout: float) -> QuorumLeader:
    host, port = address.rsplit(":", 1)
    correlation_id = next(_correlation)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_request(correlation_id))
        size = SIZE.unpack(_read_exactly(sock, SIZE.size))[0]
        return decode_response(_read_exactly(sock, size), correlation_id)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def quorum_leader(bootstrap: str, timeout: float = 10.0) -> QuorumLeader:
    """The active controller, from the first broker of `bootstrap` that answers.

    Tries each address in turn until `timeout`: right after a controller dies or wakes, the
    quorum may have no leader for a moment, and a broker may be down on purpose.
    """
    addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
    deadline = time.monotonic() + timeout
    problems: list[str] = []
    while True:
        for address in addresses:
            left = deadline - time.monotonic()
            try:
                # A frozen node accepts the connection and never answers: short tries.
                return _ask(address, timeout=max(0.2, min(1.0, left)))
            except (OSError, FrameError, QuorumUnknown) as exc:
                problems = [*problems[-2:], f"{address}: {exc}"]
        if time.monotonic() >= deadline:
            raise QuorumUnknown(
                "No broker said which node is the active controller (is the cluster up? the "
                "sidebar shows its nodes): " + "; ".join(problems)
            )
        time.sleep(0.1)


def active_controller(bootstrap: str, timeout: float = 10.0) -> int:
    """The node id of the active controller (the metadata quorum's leader)."""
    return quorum_leader(bootstrap, timeout).node_id
