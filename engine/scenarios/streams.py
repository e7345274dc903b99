"""The Kafka Streams processor role: its spec, and the truth its state store is judged by.

The role itself is Java (java/src/main/java/lab/streams/StreamsProcessor.java), a real Kafka
Streams application at the lab's Kafka version (engine/base/paths.py), built by the lab's setup
(engine/proc/java_roles.py) and run as its own OS process on the same leash as the Python roles,
so a crash is a real SIGKILL of the JVM.
It reads the payments topic (values {"id", "created_at", ...}, as engine/roles/producer.py
writes them), counts each account's payments and sums their amounts in a state store
backed by a changelog topic, and writes one result per payment: the input's fields plus
`account`, `amount`, `account_count` and `account_sum`, the store's values after it.

A payment's account and amount are derived from its id (the input carries only the id), here
and in java/.../Payments.java alike, so that what each account really made is known
without the role: `payments_made` is the truth, `counted` what the store says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.model.events import Event
from engine.model.levels import STREAMS_LEVELS, Level
from engine.scenarios.scenario import Scenario

if TYPE_CHECKING:  # named in annotations only: no run-time dependency
    from engine.cluster.base import Cluster

STREAMS_MAIN = "lab.streams.StreamsProcessor"
# Accounts the payments are spread over (id % ACCOUNTS): 30 payments make 3 per account.
ACCOUNTS = 10
# Over-counted accounts named one by one in the evidence; the rest are summed up.
MISCOUNTS_SHOWN = 3


def is_streams_level(level: Level) -> bool:
    return level.name in STREAMS_LEVELS


def processing_guarantee(level: Level) -> str:
    return level.extra["processing.guarantee"]


def account_of(message_id: int, accounts: int = ACCOUNTS) -> int:
    return message_id % accounts


def amount_of(message_id: int) -> int:
    return 10 * (message_id % 5 + 1)


@dataclass(frozen=True)
class AccountTotals:
    count: int
    sum: int


def add_payment(
    totals: dict[int, AccountTotals], message_id: int, accounts: int = ACCOUNTS
) -> None:
    """Count one payment into its account's totals (as the role's store does)."""
    account = account_of(message_id, accounts)
    was = totals.get(account, AccountTotals(0, 0))
    totals[account] = AccountTotals(was.count + 1, was.sum + amount_of(message_id))


def payments_made(ledger: Iterable[int], accounts: int = ACCOUNTS) -> dict[int, AccountTotals]:
    """What each account really made: the truth the store's counts are compared with."""
    made: dict[int, AccountTotals] = {}
    for message_id in ledger:
        add_payment(made, message_id, accounts)
    return made


def counted(results: Iterable[dict[str, Any]]) -> dict[int, AccountTotals]:
    """What the state store said last for each account, from the results in topic order:
    each result carries the account's count and sum as the store held them after it."""
    last: dict[int, AccountTotals] = {}
    for value in results:
        if "account" in value and "account_count" in value:
            last[int(value["account"])] = AccountTotals(
                int(value["account_count"]), int(value["account_sum"])
            )
    return last


def miscounted(
    made: dict[int, AccountTotals], store: dict[int, AccountTotals]
) -> dict[int, tuple[AccountTotals, AccountTotals]]:
    """Accounts whose counted totals differ from what they made: account -> (counted, made)."""
    return {
        account: (store.get(account, AccountTotals(0, 0)), truth)
        for account, truth in sorted(made.items())
        if store.get(account) != truth
    }


def results_of(raw_values: Iterable[bytes | str | None]) -> list[dict[str, Any]]:
    """The output topic's values, parsed; what is not a result is left out."""
    parsed = []
    for raw in raw_values:
        if raw is None:
            continue
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(value, dict) and "id" in value:
            parsed.append(value)
    return parsed


class LevelRunLike(Protocol):
    """What the spec needs of engine.run.level_run.LevelRun (which imports this module)."""

    scenario: Scenario
    level: Level
    cluster: Cluster
    run_id: str
    folder: Path
    input_topic: str
    output_topic: str
    client_ids: dict[str, str]

    def instance_name(self, base: str) -> str: ...


def streams_spec(run: LevelRunLike, *, elsewhere: bool = False) -> dict[str, Any]:
    """The Streams role's spec for one level's run (read by StreamsProcessor.java).

    The application id is the processor group's id (engine.run.level_run reads that group's
    committed offsets to know the input is done), and every instance of the role is the same
    static member (group.instance.id), as the Python processor is. A restart after a crash
    uses the level's state folder, as a restart on the same machine would; a replacement
    started `elsewhere` (beside a frozen instance, which still locks that folder) has its own,
    so it is a new Kafka Streams process, with its own process id and transactional.id.
    """
    sc = run.scenario
    state_dir = run.folder / "streams-state"
    if elsewhere:
        state_dir = state_dir.with_name(f"streams-state-{run.instance_name('processor')}")
    return {
        "bootstrap": run.cluster.proxied_bootstrap or run.cluster.direct_bootstrap,
        "application_id": f"{run.run_id}-{run.level.name}-processor",
        "instance_id": f"{run.run_id}-{run.level.name}-processor-1",
        "client_id": run.client_ids["processor"],
        "input": run.input_topic,
        "output": run.output_topic,
        "processing_guarantee": processing_guarantee(run.level),
        "commit_interval_ms": sc.streams_commit_interval_ms,
        "accounts": ACCOUNTS,
        "processing_ms": sc.workload.processing_ms,
        # One state folder per level, as a restart of the same instance on the same machine
        # has: it keeps the process id (so the same transactional.id at exactly_once_v2),
        # and a store with no checkpoint in it is restored from its changelog.
        "state_dir": str(state_dir).replace("#", "-"),
    }


def store_at_end(history: Iterable[dict[str, Any]]) -> dict[int, AccountTotals] | None:
    """The state store as the last instance to open it left it, from the history alone:
    what it restored (its `store_opened`) plus one payment per input it consumed after.
    None where no Kafka Streams instance ran."""
    opened: dict[str, Any] | None = None
    store: dict[int, AccountTotals] = {}
    for event in history:
        ev, proc = event.get("ev"), event.get("proc")
        if ev == Event.STORE_OPENED:
            opened = event
            store = {
                int(a): AccountTotals(int(t["count"]), int(t["sum"]))
                for a, t in (event.get("accounts") or {}).items()
            }
        elif ev == Event.CONSUMED and opened is not None and proc == opened["proc"]:
            add_payment(store, int(event["id"]))
    return None if opened is None else store


def store_evidence(history: Sequence[dict[str, Any]], ledger: list[int]) -> list[str]:
    """The changelog's restore and the store's counts beside the truth, in the room's words
    (engine.judging.explain adds them to a Kafka Streams level's evidence)."""
    store = store_at_end(history)
    if store is None:
        return []
    lines = []
    for event in history:
        if event.get("ev") == Event.STORE_CHECKED and "#" in str(event.get("proc", "")):
            lines.extend(store_check_words(event, history))
        elif event.get("ev") == Event.RESTORED and "#" in str(event.get("proc", "")):
            lines.append(
                f"{event['proc']} restored its state store ({event.get('store')}) from the "
                f"changelog topic: {event.get('records')} records."
            )
        elif event.get("ev") == Event.STORE_OPENED and "#" in str(event.get("proc", "")):
            counts = [int(t["count"]) for t in (event.get("accounts") or {}).values()]
            lines.append(
                f"{event['proc']} started counting from {sum(counts)} payments already in the "
                "store, as restored."
            )
    made = payments_made(ledger)
    wrong = miscounted(made, store)
    for account, (counted_, truth) in list(wrong.items())[:MISCOUNTS_SHOWN]:
        lines.append(
            f"Account {account}: {counted_.count} payments counted ({counted_.sum} in all), "
            f"{truth.count} made ({truth.sum})."
        )
    if len(wrong) > MISCOUNTS_SHOWN:
        lines.append(f"{len(wrong) - MISCOUNTS_SHOWN} more accounts counted wrong.")
    if not wrong:
        lines.append(
            f"Every account's count and sum in the state store is what it made "
            f"({len(made)} accounts, {len(ledger)} payments)."
        )
    return lines


def _started(history: Sequence[dict[str, Any]], proc: str) -> dict[str, Any]:
    return next((e for e in history if e.get("ev") == Event.START and e.get("proc") == proc), {})


def store_check_words(event: dict[str, Any], history: Sequence[dict[str, Any]]) -> list[str]:
    """What Kafka Streams made of the store a replacement found on disk (the role's
    `store_checked`, from Kafka Streams' own log line), at exactly_once_v2, where the
    versions differ. Kafka Streams 4.1 and 4.2 read a `.checkpoint` file that the first
    instance wrote when its restore ended and that nothing removes while it runs
    (KAFKA-20685); from 4.3 a RocksDB store keeps its committed offset inside itself
    (KIP-1035; `RocksDBStore.managesOffsets` in the 4.3.0 and 4.4.0 jars, not in 4.2.0), and
    under exactly_once_v2 a store found with none is wiped (ProcessorStateManager)."""
    proc = str(event.get("proc"))
    started = _started(history, proc)
    if started.get("processing_guarantee") != "exactly_once_v2":
        return []
    version = started.get("kafka_streams_version") or "of unknown version"
    quoted = str(event.get("line", "")).split(" - ", 1)[-1]
    if event.get("verdict") == "wiped":
        return [
            f"{proc} (Kafka Streams {version}) found the state store {event.get('store')} "
            "on disk, left by the instance before it, with no committed changelog offset, so "
            "Kafka Streams wiped the store and rebuilt it from the changelog: at "
            "exactly_once_v2 such a store may hold writes of a transaction that never "
            "committed. Since Kafka Streams 4.3 a RocksDB store keeps its committed offset "
            "inside itself (KIP-1035). Kafka Streams' log: “" + quoted + "”"
        ]
    if event.get("verdict") == "from_checkpoint":
        return [
            f"{proc} (Kafka Streams {version}) kept the state store {event.get('store')} "
            "that the instance before it left on disk, and restored the changelog into it: "
            "it found the checkpoint file that instance wrote when its own restore ended, so "
            "it did not wipe the store. Kafka calls this a bug (KAFKA-20685, fixed on its 4.2 "
            "branch): at exactly_once_v2 a kept store can hold writes of a transaction that "
            "was later aborted, which the restore cannot remove; Kafka Streams 4.3 and later "
            "wipe such a store. Kafka Streams' log: “" + quoted + "”"
        ]
    return []
