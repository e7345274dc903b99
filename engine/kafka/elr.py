"""A partition's eligible leader replicas (ELR), read with Kafka's own topic tool.

Kafka 4.1 keeps, besides the ISR, the replicas that may still be elected cleanly when the
ISR is empty (KIP-966): the ELR, and the last known leader. The Python AdminClient does not
return them, so the lab asks Kafka's own `kafka-topics.sh --describe` (TopicCommand, in the
pinned jars), which reads them with DescribeTopicPartitions. One call starts a JVM (1 to 3 s),
so a run asks only when something may have changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.base import tools
from engine.base.errors import LabError
from engine.kafka import jars

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


@dataclass(frozen=True)
class PartitionReplicas:
    """One partition's replica sets as the controller's metadata holds them."""

    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.strip().lstrip("-").isdigit())


def parse_describe(
    output: str, partition: int = 0, topic: str | None = None
) -> PartitionReplicas | None:
    """The partition's line of `kafka-topics.sh --describe`, parsed; None if it is not there.

    A line reads "Topic: t  Partition: 0  Leader: 1  Replicas: 1,2  Isr: 1  Elr: 2
    LastKnownElr: " (tab-separated; "none" for no leader). With `topic`, only that topic's
    line counts (the output of several topics).
    """
    for line in output.splitlines():
        fields = dict(re.findall(r"(\w+): ?([^\t]*)", line.strip()))
        if fields.get("Partition", "").strip() != str(partition) or "Isr" not in fields:
            continue
        if topic is not None and fields.get("Topic", "").strip() != topic:
            continue
        leader = fields.get("Leader", "").strip()
        return PartitionReplicas(
            leader=int(leader) if leader.lstrip("-").isdigit() else -1,
            replicas=_ids(fields.get("Replicas", "")),
            isr=_ids(fields.get("Isr", "")),
            elr=_ids(fields.get("Elr", "")),
            last_known_elr=_ids(fields.get("LastKnownElr", "")),
        )
    return None


def _tool_config() -> Path:
    """The topic tool's client settings. A frozen broker accepts connections and answers
    nothing: a request sent to it is given up after 2 s and sent elsewhere, instead of the
    Java client's 30 s."""
    path = Path(tempfile.gettempdir()) / f"lab-topic-tool-{os.getpid()}.properties"
    path.write_text("request.timeout.ms=2000\ndefault.api.timeout.ms=8000\n")
    return path


def describe_partition(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 30.0
) -> PartitionReplicas | None:
    """Ask Kafka's topic tool for the partition's leader, ISR, ELR and last known ELR.

    None when the tool found no such partition or no broker answered in time.
    """
    return describe_partitions(bootstrap, [topic], partition, timeout).get(topic)


def describe_partitions(
    bootstrap: str, topics: Sequence[str], partition: int = 0, timeout: float = 30.0
) -> dict[str, PartitionReplicas]:
    """describe_partition for several topics in one run of the tool (one JVM, not one per
    topic): kafka-topics.sh's --topic "also accepts a regular expression, except for
    --create" (its own help; TopicCommand's include list), anchored here so that it names
    these topics only. A topic the tool did not find, or all of them if no broker answered
    in time, is left out."""
    names = "|".join(re.escape(t) for t in topics)
    command = [
        tools.find_java(),
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",  # a short-lived tool starts faster without C2
        "-cp",
        jars.kafka_classpath(),
        TOPIC_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--topic",
        f"^({names})$",
        "--command-config",
        str(_tool_config()),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {}
    found = {t: parse_describe(done.stdout, partition, topic=t) for t in topics}
    return {t: state for t, state in found.items() if state is not None}


class ElrWatch:
    """Reads the partition's replica sets of each topic whenever poked (and every `every_s`),
    and reports each change with the topic and the time the tool answered.

    A read can be slow: Kafka's tool may first try a broker that is frozen, and give that up
    only after its request timeout. So a poke starts a new read beside one still under way
    (two at most), and what each read finds is reported if it differs from the last report.
    The topics are read in one run of the tool (describe_partitions): a JVM per topic would
    take the CPU from the run it watches.
    """

    def __init__(
        self,
        bootstrap: Callable[[], str],
        topics: Sequence[str],
        report: Callable[[str, PartitionReplicas, float], None],
        every_s: float = 5.0,
    ) -> None:
        """`bootstrap` is asked before every read, to name only the nodes running then."""
        self.bootstrap, self.topics, self.report = bootstrap, list(topics), report
        self.every_s = every_s
        self._poke = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last: dict[str, PartitionReplicas] = {}
        self._reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="elr-read")
        self._under_way: list[Future[None]] = []
        self._thread = threading.Thread(target=self._loop, name="elr-watch", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Something may have changed (a node fault, an ISR change): read again now."""
        self._poke.set()

    def _read(self) -> None:
        try:
            states = describe_partitions(self.bootstrap(), self.topics)
        except LabError:  # no Java or no jars: the ELR cannot be read here
            self._stop.set()
            return
        with self._lock:
            at = time.time()
            for topic, state in states.items():
                if state != self._last.get(topic):
                    self._last[topic] = state
                    self.report(topic, state, at)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._under_way = [f for f in self._under_way if not f.done()]
            if len(self._under_way) < 2:
                self._under_way.append(self._reads.submit(self._read))
            self._poke.wait(self.every_s)
            self._poke.clear()

    def close(self, final_read: bool = True) -> None:
        """Stop, after one last read when asked (the state the run ends in)."""
        self._stop.set()
        self._poke.set()
        self._thread.join(timeout=5)
        self._reads.shutdown(wait=True, cancel_futures=True)
        if final_read:
            self._read()


# What Kafka writes when a partition's leader is chosen from outside its ISR (every
# controller logs it as it replays the metadata record), and when a replica cuts its log
# back to match a leader. Kafka's own words, found in its log by the partition's name.
UNCLEAN_WORDS = "UNCLEAN partition change"
TRUNCATION_WORDS = "Truncating to offset"


def replication_log_lines(
    node_logs: dict[int, list[str]], topic: str, partition: int = 0, limit: int = 6
) -> list[tuple[int, str]]:
    """(node, line) for the partition's unclean elections and truncations, oldest first.

    An unclean election shows once, from the controller that logged it first; a truncation
    shows from the replica that cut its log. At most `limit` lines in all.
    """
    name = f"{topic}-{partition}"
    unclean: dict[str, tuple[str, int, str]] = {}  # the change -> (stamp, node, line)
    found: list[tuple[str, int, str]] = []
    for node, lines in sorted(node_logs.items()):
        for line in lines:
            line = line.strip()
            if name not in line:
                continue
            if UNCLEAN_WORDS in line:
                change = line.split(UNCLEAN_WORDS, 1)[1]
                if change not in unclean or line[:25] < unclean[change][0]:
                    unclean[change] = (line[:25], node, line)
            elif TRUNCATION_WORDS in line:
                found.append((line[:25], node, line))
    found.extend(unclean.values())
    return [(node, line) for _, node, line in sorted(found)[:limit]]
