"""DescribeQuorum's wire form (engine/kafka/quorum.py): pure encoding and decoding."""

from __future__ import annotations

import pytest

from engine.kafka import quorum
from engine.kafka.wire import SIZE, Writer
from engine.proxy.framing import parse_request_header


def _response(correlation_id: int, leader: int, epoch: int, error: int = 0) -> bytes:
    w = Writer()
    w.int32(correlation_id)
    w.raw(b"\x00")  # header tagged fields
    w.int16(0)
    w.array_len(1, compact=True)
    w.string("__cluster_metadata", compact=True)
    w.array_len(1, compact=True)
    w.int32(0)
    w.int16(error)
    w.int32(leader)
    w.int32(epoch)
    w.raw(b"\x00" * 8)  # high watermark
    w.array_len(0, compact=True)  # voters
    w.array_len(0, compact=True)  # observers
    w.raw(b"\x00\x00\x00")  # tagged fields: partition, topic, body
    return w.bytes()


def test_the_request_is_a_flexible_describe_quorum_for_the_metadata_partition():
    frame = quorum.encode_request(7, client_id="lab")
    (size,) = SIZE.unpack(frame[:4])
    assert size == len(frame) - 4
    header = parse_request_header(frame[4:], flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id) == (55, 0, 7)
    assert header.client_id == "lab"
    assert frame.endswith(b"\x02\x13__cluster_metadata\x02\x00\x00\x00\x00\x00\x00\x00")


def test_the_answer_names_the_leader_and_its_epoch():
    assert quorum.decode_response(_response(7, leader=2, epoch=5), 7) == quorum.QuorumLeader(2, 5)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (_response(7, leader=-1, epoch=5), "no leader"),
        (_response(7, leader=2, epoch=5, error=6), "error code 6"),
    ],
)
def test_an_answer_without_a_leader_is_quorum_unknown(payload, message):
    with pytest.raises(quorum.QuorumUnknown, match=message):
        quorum.decode_response(payload, 7)


def test_an_answer_to_another_request_is_refused():
    with pytest.raises(quorum.FrameError, match="expected 7"):
        quorum.decode_response(_response(8, leader=2, epoch=5), 7)


def test_no_broker_answering_is_an_actionable_error():
    with pytest.raises(quorum.QuorumUnknown, match="is the cluster up"):
        quorum.quorum_leader("127.0.0.1:9", timeout=0.3)
