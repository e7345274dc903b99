"""What a scenario with watch_isr or watch_elr records of its partitions while its levels run.

Each level's judged topic has its leader, in-sync replicas and high watermark read every
WATCH_EVERY_S (engine.kafka.reader.PartitionWatch, from metadata and ListOffsets), and its
eligible leader replicas read whenever a node or the ISR changed (engine.kafka.elr.ElrWatch,
Kafka's topic tool). Every change goes into that level's own history. A level may run alone,
or beside others under one nemesis (shared_faults): their partitions are placed on the same
nodes, yet each topic's replica sets are read and written apart, since Kafka reports them
per partition and nothing here is inferred from another topic's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from engine.kafka.elr import ElrWatch, PartitionReplicas
from engine.kafka.reader import PartitionWatch
from engine.model.history import HistoryWriter
from engine.run.nemesis import Nemesis

# How often the leader and ISR are read.
WATCH_EVERY_S = 0.25


@dataclass(frozen=True)
class WatchedTopic:
    """A level's judged topic, and the history its partition's changes go to."""

    topic: str
    history: HistoryWriter


class ReplicaWatches:
    """The ISR and ELR watches of one or several levels; `poll` from the run's loop."""

    def __init__(
        self,
        nemesis: Nemesis,
        watched: Sequence[WatchedTopic],
        *,
        bootstrap: str,
        running_bootstrap: Callable[[], str],
        isr: bool,
        elr: bool,
    ) -> None:
        self.nemesis = nemesis
        self.histories = {w.topic: w.history for w in watched}
        self._next = 0.0
        self.partitions = (
            {w.topic: PartitionWatch(bootstrap, w.topic) for w in watched} if isr else {}
        )
        # Several levels' partitions are read at once: one read that waits on a frozen broker
        # (2 s per request) must not hold up the others, nor the nemesis's clock for long.
        self._pool = (
            ThreadPoolExecutor(max_workers=len(self.partitions), thread_name_prefix="isr-watch")
            if len(self.partitions) > 1
            else None
        )
        self.elr: ElrWatch | None = None
        if elr:
            self.elr = ElrWatch(running_bootstrap, list(self.histories), self._report_elr)
            nemesis.ctx.node_changed = self.elr.poke

    def _record(self, topic: str, kind: str, **attrs: object) -> None:
        self.nemesis.record_in(self.histories[topic], kind, **attrs)

    def _report_elr(self, topic: str, state: PartitionReplicas, at: float) -> None:
        self._record(topic, "elr", read_at=at, **state.to_json())

    def poll(self) -> None:
        """Read each partition's leader and ISR if WATCH_EVERY_S has passed; record changes."""
        if not self.partitions or time.time() < self._next:
            return
        self._next = time.time() + WATCH_EVERY_S
        topics = list(self.partitions)
        if self._pool is None:
            states = [self.partitions[topics[0]].changed()]
        else:
            states = list(self._pool.map(lambda t: self.partitions[t].changed(), topics))
        for topic, state in zip(topics, states, strict=True):
            if state is None:
                continue
            leader, isr, high_watermark = state
            self._record(topic, "isr", leader=leader, isr=list(isr), high_watermark=high_watermark)
            if self.elr is not None:
                self.elr.poke()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for watch in self.partitions.values():
            watch.close()
        if self.elr is not None:
            self.elr.close(final_read=False)
