"""drop-produce-response: the fault proxy loses the answer to (or the request of) the target's
nth Produce request, then resets or holds the connection. The broker stored the batch; the
client never heard, and retries (engine/proxy/)."""

from __future__ import annotations

from typing import Any

from engine.faults.base import (
    EVERY_BACKEND,
    HURT,
    Availability,
    FaultKind,
    FreePlayControl,
    NemesisState,
    require_proxy,
)
from engine.faults.params import FaultParams

API_WORDS = {"produce": "Produce", "offset_commit": "OffsetCommit", "end_txn": "EndTxn"}


def drop_rule_text(event: dict[str, Any]) -> str:
    """The proxy rule the nemesis set: which of the target's requests lose what."""
    api = API_WORDS.get(str(event.get("api") or "produce"), "Produce")
    what = "the answer to" if event.get("drop", "response") == "response" else ""
    if api == "Produce" and what:
        what = "the ack of"
    count = event.get("count") or 1
    which = f"#{event.get('nth') or 1}" + (f" and the {count - 1} after it" if count > 1 else "")
    return f"proxy set to drop {what} {event.get('target')}'s {api} request {which}".replace(
        "  ", " "
    )


class DropProduceResponse(FaultKind):
    name = "drop-produce-response"
    takes = frozenset({"target", "nth", "count", "after", "drop", "api"})
    available = Availability(EVERY_BACKEND, why="the fault proxy drops it")
    reach = "level"  # a rule on this level's client ids only
    words = "an ack will be dropped"
    colour = HURT
    drawn = False  # the rule's set-up; the proxy's drop that follows is the band
    free_play = FreePlayControl(
        strike="drop-ack",
        label="📉 Drop the next ack",
        help="The fault proxy forwards each producer's next Produce request to the broker, "
        "drops the broker's answer and resets the connection.",
        order=1,
        params=lambda settings: {"nth": 1, "after": "reset"},
        note=lambda settings: "Proxy set to drop the ack of each level's next Produce request.",
    )

    def fire(self, fault: FaultParams, nemesis: NemesisState) -> None:
        proxy = require_proxy(nemesis, fault.kind)
        target = fault.target or self.default_target
        rule = proxy.drop_produce_responses(
            nth=fault.nth or 1,
            count=fault.count,
            after=fault.after,
            drop=fault.drop,
            api=fault.api,
            client_id_prefix=nemesis.ctx.client_ids[target],
        )
        nemesis.proxy_rules.append(rule)
        nemesis.record(
            fault.kind,
            target=target,
            nth=fault.nth or 1,
            count=fault.count,
            after=fault.after,
            drop=fault.drop,
            api=fault.api,
            rule_id=rule,
        )

    def live(self, event: dict[str, Any], point: str) -> str:
        return drop_rule_text(event)

    def evidence(self, event: dict[str, Any], where: str | None) -> str | None:
        return None  # the proxy's own drop events carry the evidence (engine.judging.explain)

    def cannot_teach(
        self, fault: FaultParams, messages: int, batched: bool, commit_every: int = 1
    ) -> str | None:
        # Without batching, each message is its own Produce request.
        if batched or (fault.nth or 1) <= messages:
            return None
        return (
            f"The network loses the answer to Produce request {fault.nth}, and "
            f"{messages} message(s) make only {messages} request(s): nothing would be lost. "
            "Use more messages."
        )


KIND = DropProduceResponse()
