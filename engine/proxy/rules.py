"""Fault rules and their pure decision logic (no I/O): which responses (or requests) to drop.

A rule targets one API: Produce (the default), OffsetCommit or EndTxn.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

AFTER_CHOICES = ("reset", "hold")
# What is lost: the broker's response (the batch is stored, the ack never arrives), or the
# request itself (the broker never sees the batch; the client times it out and retries).
DROP_CHOICES = ("response", "request")
THEN_CHOICES = ("flush", "reset")
# The requests a rule can target, by the names the rules and events use.
API_CHOICES = ("produce", "offset_commit", "end_txn")


class RuleError(ValueError):
    """A rule or fault request with invalid parameters."""


@dataclass
class DropRule:
    """Drop the broker's response to matching Produce requests (acks != 0).

    Exactly one targeting mode: `nth`/`count` (1-based, counted from when the rule was added),
    a `window_start`..`window_end` epoch-seconds window, or a seeded `probability`.
    """

    rule_id: int
    created_ts: float
    after: str = "reset"
    drop: str = "response"
    api: str = "produce"
    node: int | None = None
    client_id_prefix: str | None = None
    nth: int | None = None
    count: int = 1
    window_start: float | None = None
    window_end: float | None = None
    probability: float | None = None
    seed: int | None = None
    max_drops: int | None = None
    matched: int = 0  # matching Produce requests seen since the rule was added
    drops: int = 0  # of those, how many this rule chose to drop
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self.validate()
        self._rng = random.Random(self.seed)

    @property
    def mode(self) -> str:
        if self.nth is not None:
            return "nth"
        if self.window_start is not None or self.window_end is not None:
            return "window"
        return "probability"

    def validate(self) -> None:
        """Raise RuleError unless the parameters describe exactly one sensible targeting."""
        if self.api not in API_CHOICES:
            raise RuleError(f"api must be one of {API_CHOICES}, got {self.api!r}")
        if self.drop not in DROP_CHOICES:
            raise RuleError(f"drop must be one of {DROP_CHOICES}, got {self.drop!r}")
        if self.after not in AFTER_CHOICES:
            raise RuleError(f"after must be one of {AFTER_CHOICES}, got {self.after!r}")
        has_window = self.window_start is not None or self.window_end is not None
        modes = [self.nth is not None, has_window, self.probability is not None]
        if sum(modes) != 1:
            raise RuleError("give exactly one of: nth, window_start/window_end, probability")
        if self.nth is not None and self.nth < 1:
            raise RuleError(f"nth is 1-based, got {self.nth}")
        if self.count < 1:
            raise RuleError(f"count must be >= 1, got {self.count}")
        if (
            self.window_start is not None
            and self.window_end is not None
            and self.window_end < self.window_start
        ):
            raise RuleError("window_end is before window_start")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise RuleError(f"probability must be in [0, 1], got {self.probability}")
        if self.max_drops is not None and self.max_drops < 1:
            raise RuleError(f"max_drops must be >= 1, got {self.max_drops}")

    def applies_to(self, node: int, client_id: str | None) -> bool:
        """Whether the node/client filters match (targeting aside)."""
        if self.node is not None and node != self.node:
            return False
        if self.client_id_prefix is not None:
            return client_id is not None and client_id.startswith(self.client_id_prefix)
        return True

    def spent(self, now: float | None = None) -> bool:
        """True once this rule can never drop anything again."""
        if self.max_drops is not None and self.drops >= self.max_drops:
            return True
        if self.nth is not None:
            return self.matched >= self.nth + self.count - 1
        if self.window_end is not None:
            return (time.time() if now is None else now) > self.window_end
        return False

    def decide(self, node: int, client_id: str | None, now: float) -> bool:
        """Count one Produce request (acks != 0) arriving at `now`; True if its response drops."""
        if self.spent(now) or not self.applies_to(node, client_id):
            return False
        self.matched += 1
        if self.nth is not None:
            hit = self.nth <= self.matched < self.nth + self.count
        elif self.mode == "window":
            start = self.window_start if self.window_start is not None else float("-inf")
            end = self.window_end if self.window_end is not None else float("inf")
            hit = start <= now <= end
        else:
            # Draw for every matching request so a seed gives the same pattern run after run.
            hit = self._rng.random() < (self.probability or 0.0)
        if hit:
            self.drops += 1
        return hit

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """JSON-friendly view for status and events."""
        d: dict[str, Any] = {
            "rule_id": self.rule_id,
            "mode": self.mode,
            "after": self.after,
            "drop": self.drop,
            "api": self.api,
        }
        for key in (
            "node",
            "client_id_prefix",
            "nth",
            "window_start",
            "window_end",
            "probability",
            "seed",
            "max_drops",
        ):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        if self.nth is not None:
            d["count"] = self.count
        d.update(
            created_ts=self.created_ts,
            matched=self.matched,
            drops=self.drops,
            spent=self.spent(now),
        )
        return d


_PARAM_TYPES: dict[str, type] = {
    "api": str,
    "after": str,
    "drop": str,
    "node": int,
    "client_id_prefix": str,
    "nth": int,
    "count": int,
    "window_start": float,
    "window_end": float,
    "probability": float,
    "seed": int,
    "max_drops": int,
}


def coerce(name: str, value: Any, kind: type) -> Any:
    """Convert a JSON value to `kind` (None passes through); RuleError if it cannot be."""
    if value is None:
        return None
    if kind is str:
        if not isinstance(value, str):
            raise RuleError(f"{name} must be a string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RuleError(f"{name} must be a number, got {value!r}")
    if kind is int and isinstance(value, int):
        return value  # keep big seeds exact
    try:
        number = float(value)
    except ValueError as e:
        raise RuleError(f"{name} must be a number, got {value!r}") from e
    if kind is int:
        if not number.is_integer():
            raise RuleError(f"{name} must be an integer, got {value!r}")
        return int(number)
    return number


@dataclass
class RuleSet:
    """The proxy's drop rules; every active rule counts every request it matches."""

    rules: dict[int, DropRule] = field(default_factory=dict)
    next_id: int = 1

    def add(self, now: float | None = None, **params: Any) -> DropRule:
        """Create a rule from command parameters (unknown keys are an error)."""
        if not any(
            params.get(k) is not None for k in ("nth", "window_start", "window_end", "probability")
        ):
            params["nth"] = 1  # no targeting given: drop the next matching response
        if params.get("count") is None:
            params["count"] = 1
        if params.get("after") is None:
            params["after"] = "reset"
        unknown = set(params) - set(_PARAM_TYPES)
        if unknown:
            raise RuleError(f"unknown rule parameter(s): {', '.join(sorted(unknown))}")
        params = {k: coerce(k, v, _PARAM_TYPES[k]) for k, v in params.items()}
        rule = DropRule(
            rule_id=self.next_id, created_ts=time.time() if now is None else now, **params
        )
        self.rules[rule.rule_id] = rule
        self.next_id += 1
        return rule

    def remove(self, rule_id: int) -> bool:
        return self.rules.pop(rule_id, None) is not None

    def clear(self) -> int:
        n = len(self.rules)
        self.rules.clear()
        return n

    def evaluate(
        self, node: int, client_id: str | None, now: float, api: str = "produce"
    ) -> DropRule | None:
        """Let every rule of this API count this request; return the first (lowest id) that
        drops it."""
        chosen: DropRule | None = None
        for rule in self.rules.values():
            if rule.api != api:
                continue
            if rule.decide(node, client_id, now) and chosen is None:
                chosen = rule
        return chosen

    def active(self, now: float | None = None) -> list[DropRule]:
        return [r for r in self.rules.values() if not r.spent(now)]


@dataclass(frozen=True)
class Latency:
    """Extra one-way delay applied to every frame, in each direction."""

    ms: float
    jitter_ms: float = 0.0

    def sample(self, rng: random.Random) -> float:
        """One delay in seconds: ms ± uniform jitter, never negative."""
        jitter = rng.uniform(-self.jitter_ms, self.jitter_ms) if self.jitter_ms else 0.0
        return max(0.0, self.ms + jitter) / 1000.0
