"""A fault as a scenario file writes it: its kind, its trigger and every parameter a kind may take.

The model is shared by every kind (engine/faults/*.py); each kind says which of these
parameters it takes, and `engine.faults.Fault` refuses the others when the scenario is parsed.
This module imports no kind, so the kinds can name its types without an import circle.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Trigger(_Strict):
    """When a fault fires: at a time after the level's start, or after a count of events."""

    at_s: Annotated[float, Field(ge=0)] | None = None
    # Whose events count: a role ("producer", "processor", "sink") or "proxy" for the fault
    # proxy's own events (e.g. produce_response_dropped) caused by this level's clients.
    process: str | None = None
    event: str | None = None  # e.g. "ack", "output_acked", "consumed", "committed"
    count: Annotated[int, Field(gt=0)] = 1

    @model_validator(mode="after")
    def _one_kind(self) -> Trigger:
        if (self.at_s is None) == (self.event is None):
            raise ValueError("give either at_s, or event (with process and count)")
        return self


class FaultParams(_Strict):
    """Every fault's trigger, and the union of the kinds' parameters (each kind takes a few)."""

    kind: str
    when: Trigger = Trigger(at_s=0)
    delay_s: Annotated[float, Field(ge=0, le=60)] = 0.0  # wait this long after the trigger
    # drop-produce-response, drop-response: the nth request of the target, and count after it
    nth: Annotated[int, Field(gt=0)] | None = None
    count: Annotated[int, Field(gt=0)] = 1
    after: Literal["reset", "hold"] = "reset"
    # What the network loses: the broker's response (the batch is stored) or the request.
    drop: Literal["response", "request"] = "response"
    # Whose: a Produce request (the default), a consumer's OffsetCommit to its group
    # coordinator, or a transactional producer's EndTxn (commit or abort) to its coordinator.
    api: Literal["produce", "offset_commit", "end_txn"] = "produce"
    # blackhole / pause / pause-follower
    duration_s: Annotated[float, Field(gt=0, le=120)] | None = None
    then: Literal["flush", "reset"] = "flush"
    # latency
    ms: Annotated[float, Field(ge=0, le=60_000)] | None = None
    # crash / pause target, and what replaces a crashed or paused process. For
    # restart-nodes and wipe-partition: "leader" or "follower", the node that kill-leader or
    # kill-follower took down (restart-nodes without a target restarts every killed node).
    target: str | None = None
    replace: bool = False
    resend_unacked: bool = True


# The parameters every kind has: what it is, and when it fires.
COMMON_PARAMS = frozenset({"kind", "when", "delay_s"})
PARAMS = frozenset(FaultParams.model_fields) - COMMON_PARAMS
