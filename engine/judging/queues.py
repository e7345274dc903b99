"""The queue checker: a share group's run (KIP-932, "queues for Kafka") judged record by record.

A share group has no offsets to compare: the broker hands each record to one member under an
acquisition lock and counts its deliveries. So the judgement comes from what the workers
wrote (engine/roles/share_worker.py and lab.share.JavaShareWorker write the same events)
and what the output topic holds:

- deliveries: the broker's own delivery count at the last delivery a worker wrote down
  (a worker that dies holding a batch has not written down every record it was handed, so
  the broker's count, not the number of `delivered` lines, says how often it went out),
  and which workers wrote each delivery down;
- archived: the broker gives a record up after `share.delivery.count.limit` deliveries
  (5 by default) that none accepted, or at once when a worker REJECTs it. The checker
  infers it from the history: a last delivery at the limit, or a REJECT, and no ACCEPT;
  tests/integration/test_share_groups.py compares it with the broker's own state;
- outputs: the copies of each id in the output topic (read back, as kcat reads it);
- out of order: an output stored after the output of a later input (the same rule as
  `checker.reordered_ids`), which a consumer group on one partition never shows.

Each record's verdict: `once` (one output), `duplicated` (more), `archived` (no output, the
broker gave it up: the application never processed it and no one was told), `lost` (no
output and not archived: acknowledged, then never processed; or still with the broker, to
be handed out again, when the history ends).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.judging.checker import reordered_ids
from engine.model.events import Event
from engine.model.records import StoredRecord

# Kafka's default share.delivery.count.limit (GroupConfig and ShareGroupConfig of 4.4.0, as
# read in docs/share-groups-api-research.md).
DEFAULT_DELIVERY_LIMIT = 5


@dataclass(frozen=True)
class QueueVerdict:
    id: int
    verdict: str  # once | duplicated | archived | lost
    deliveries: int  # the broker's delivery count at the last delivery seen (0: never seen)
    seen: int  # deliveries a worker wrote down (`delivered` lines)
    members: tuple[str, ...]  # the workers that wrote them, in order
    acknowledgements: tuple[str, ...]  # ACCEPT, RELEASE, REJECT, in the order written
    outputs: int  # copies in the output topic
    archived: bool
    out_of_order: bool


@dataclass(frozen=True)
class QueueCounts:
    sent: int
    once: int
    duplicated: int  # records with more than one output
    duplicates: int  # the extra outputs themselves
    lost: int
    archived: int
    redelivered: int  # records the broker handed out more than once
    deliveries: int  # the broker's deliveries, all records together
    out_of_order: int
    acks_refused: int  # commits of acknowledgements the broker refused (per partition)


def check_queue(
    *,
    sent_ids: Iterable[int],
    history: Sequence[dict[str, Any]],
    outputs: Sequence[StoredRecord],
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
) -> tuple[list[QueueVerdict], QueueCounts]:
    """Judge every sent record from the workers' merged history and the output topic."""
    handed: dict[int, list[dict[str, Any]]] = defaultdict(list)
    acks: dict[int, list[str]] = defaultdict(list)
    refused = 0
    for line in history:
        event = line.get("ev")
        if event == Event.DELIVERED and line.get("id") is not None:
            handed[line["id"]].append(line)
        elif event == Event.ACKNOWLEDGED and line.get("id") is not None:
            acks[line["id"]].append(str(line.get("type")))
        elif event == Event.ACK_REFUSED:
            refused += 1
    copies = Counter(r.id for r in outputs if r.id is not None)
    late = reordered_ids(outputs)

    verdicts = []
    for message_id in sorted(set(sent_ids)):
        deliveries = handed.get(message_id, [])
        types = acks.get(message_id, [])
        last_count = max((int(d.get("delivery_count") or 0) for d in deliveries), default=0)
        archived = "ACCEPT" not in types and (
            "REJECT" in types or (last_count >= delivery_limit and _let_go(types, deliveries))
        )
        outputs_here = copies.get(message_id, 0)
        if outputs_here > 1:
            verdict = "duplicated"
        elif outputs_here == 1:
            verdict = "once"
        else:
            verdict = "archived" if archived else "lost"
        verdicts.append(
            QueueVerdict(
                id=message_id,
                verdict=verdict,
                deliveries=last_count,
                seen=len(deliveries),
                members=tuple(str(d.get("proc", "?")) for d in deliveries),
                acknowledgements=tuple(types),
                outputs=outputs_here,
                archived=archived,
                out_of_order=message_id in late,
            )
        )
    kinds = Counter(v.verdict for v in verdicts)
    counts = QueueCounts(
        sent=len(verdicts),
        once=kinds["once"],
        duplicated=kinds["duplicated"],
        duplicates=sum(v.outputs - 1 for v in verdicts if v.outputs > 1),
        lost=kinds["lost"],
        archived=sum(1 for v in verdicts if v.archived),
        redelivered=sum(1 for v in verdicts if v.deliveries > 1),
        deliveries=sum(v.deliveries for v in verdicts),
        out_of_order=sum(1 for v in verdicts if v.out_of_order),
        acks_refused=refused,
    )
    return verdicts, counts


def _let_go(types: list[str], deliveries: list[dict[str, Any]]) -> bool:
    """At its last delivery the record was released, or its worker never acknowledged it
    (it died or froze, and the lock ran out): the broker takes it back, and at the limit it
    archives it instead of handing it out again."""
    acknowledged_after_last = len(types) >= len(deliveries)
    return not acknowledged_after_last or types[-1] == "RELEASE"
