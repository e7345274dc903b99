"""drop-response: drop-produce-response for any `api` (OffsetCommit, EndTxn); the name reads
better beside them. The same proxy rule, the same words."""

from __future__ import annotations

from engine.faults.drop_produce_response import DropProduceResponse
from engine.faults.params import FaultParams


class DropResponse(DropProduceResponse):
    name = "drop-response"
    words = "an answer will be dropped"
    free_play = None  # Free play's "drop the next ack" is drop-produce-response's

    def cannot_teach(
        self, fault: FaultParams, messages: int, batched: bool, commit_every: int = 1
    ) -> str | None:
        # The processor sends one OffsetCommit (or, in a transaction, one EndTxn) per batch.
        batches = -(-messages // max(commit_every, 1))
        nth = fault.nth or 1
        if fault.api not in ("offset_commit", "end_txn") or nth <= batches:
            return None
        request = "OffsetCommit" if fault.api == "offset_commit" else "EndTxn"
        return (
            f"The network loses {request} request {nth}, and with {messages} messages at "
            f"{commit_every} per commit the processor sends {batches}: it would never happen. "
            f"Use at least {(nth - 1) * commit_every + 1} messages, or fewer per commit."
        )


KIND = DropResponse()
