"""drop-response: drop-produce-response for any `api` (OffsetCommit, EndTxn); the name reads
better beside them. The same proxy rule, the same words."""

from __future__ import annotations

from engine.faults.drop_produce_response import DropProduceResponse
from engine.faults.params import FaultParams


class DropResponse(DropProduceResponse):
    name = "drop-response"
    words = "an answer will be dropped"
    free_play = None  # Free play's "drop the next ack" is drop-produce-response's

    def cannot_teach(self, fault: FaultParams, messages: int, batched: bool) -> str | None:
        return None  # an OffsetCommit or EndTxn is not one request per message


KIND = DropResponse()
