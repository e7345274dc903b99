"""The log views on a real broker: compaction, both isolation levels, and the batches.

What the engine reports is checked against what the test itself wrote (delivery reports),
against kcat (an independent reader), and against Kafka's own TransactionsCommand (the
producer ids and epochs the transaction coordinator handed out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer

from engine import logs
from engine.base import paths, tools
from engine.kafka import admin, jars
from tests.kafkatools import kcat_values, unique

pytestmark = pytest.mark.kafka


FORMAT = "%o|%k|%s\\n"


def kcat_keyed(bootstrap: str, topic: str) -> list[tuple[int, str, str]]:
    """(offset, key, value) of every record, read by kcat; a tombstone's value is ''."""
    kcat = shutil.which("kcat") or "kcat"
    out = subprocess.run(
        [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", FORMAT],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = []
    for line in out.stdout.splitlines():
        offset, key, value = line.split("|", 2)
        rows.append((int(offset), key, value))
    return rows


def describe_transaction(bootstrap: str, transactional_id: str) -> dict[str, str]:
    """Kafka's own `kafka-transactions.sh describe`: the coordinator's producer id and epoch."""
    java = [tools.find_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", jars.kafka_classpath()]
    tool = ["org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap]
    out = subprocess.run(
        [*java, *tool, "describe", "--transactional-id", transactional_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # A tab-separated table, padded with spaces; an empty column is only padding.
    header, values = ([c.strip() for c in line.split("\t")] for line in out.stdout.splitlines()[:2])
    return dict(zip(header, values, strict=True))


# ---- compaction -------------------------------------------------------------------------------
def test_compaction_keeps_the_last_record_of_each_key(cluster1):
    records = logs.parse_records(logs.LECTURE_PRESET)
    result = logs.run_compaction(cluster1, records, timeout=60)

    before = [(r.offset, r.key, r.value) for r in result.before]
    assert before == [(i, k, v) for i, (k, v) in enumerate(records)]
    kept = [(r.offset, r.key, r.value) for r in result.after if r.key != logs.ROLL_KEY]
    assert kept == [
        (3, "K1", "V4"),
        (4, "K3", "V5"),
        (6, "K4", "V7"),
        (8, "K5", "V9"),
        (9, "K2", "V10"),
        (10, "K6", "V11"),
    ]
    # Whatever else is in the log is a labelled roll record, written after the user's ones.
    rolls = [r for r in result.after if r.key == logs.ROLL_KEY]
    assert rolls and all(r.offset in result.roll_offsets and r.offset > 10 for r in rolls)
    assert result.cleaner_seconds is not None and not result.timed_out
    # kcat, reading the same topic, sees exactly the cleaned log.
    assert kcat_keyed(cluster1.direct_bootstrap, result.topic) == [
        (r.offset, r.key, r.value) for r in result.after
    ]
    # The cleaned part ends where the active segment begins; the active one holds a roll.
    layout = result.layout
    assert layout is not None and layout.active_segment_base is not None
    assert layout.cleaner_checkpoint is not None and layout.cleaner_checkpoint > 10
    assert layout.active_segment_base in result.roll_offsets
    assert result.settings["cleanup.policy"] == "compact"
    assert result.settings["log.cleaner.backoff.ms"] == 1000
    removed = [r for r in logs.compaction_rows(result) if r["status"] == "removed"]
    assert {r["offset"]: r["superseded_by"] for r in removed} == {0: 2, 1: 5, 2: 3, 5: 9, 7: 8}


def test_tombstones_are_removed_after_delete_retention(cluster1):
    settings = logs.CompactionSettings(delete_retention_ms=1000)
    records = logs.parse_records("A=1,B=1,A=,C=1")
    result = logs.run_compaction(cluster1, records, settings, timeout=60)

    assert [(r.offset, r.value) for r in result.before if r.key == "A"] == [(0, "1"), (2, None)]
    # The first cleaning drops A=1 but keeps A's tombstone...
    assert result.after_first_clean is not None
    first = {r.offset: r for r in result.after_first_clean}
    assert 0 not in first and first[2].value is None
    # ...which goes at a later cleaning, once delete.retention.ms has passed.
    assert not result.timed_out
    assert [(r.offset, r.key) for r in result.after if r.key != logs.ROLL_KEY] == [
        (1, "B"),
        (3, "C"),
    ]
    assert result.tombstone_seconds is not None and result.tombstone_seconds >= 1.0
    statuses = {r["offset"]: r["status"] for r in logs.compaction_rows(result)}
    assert statuses[2] == "tombstone removed"


# ---- transactions: isolation levels and the dump --------------------------------------------
@dataclass
class TxnTopic:
    topic: str
    ids: dict[str, str]  # producer name -> transactional.id
    offsets: dict[str, list[int]] = field(default_factory=dict)  # transaction -> offsets


@pytest.fixture(scope="module")
def txn_topic(cluster1) -> TxnTopic:
    """Producer A commits 3 records and aborts 2; B commits 1; A again (new epoch) commits 1."""
    bootstrap = cluster1.direct_bootstrap
    topic = unique("txn-views")
    admin.create_topic(bootstrap, topic)
    made = TxnTopic(topic, {"A": unique("txn-a"), "B": unique("txn-b")})

    def transaction(producer: Producer, name: str, values: list[str], commit: bool) -> None:
        offsets: list[int] = []
        producer.begin_transaction()
        for value in values:
            producer.produce(
                topic, key=name, value=value, on_delivery=lambda e, m: offsets.append(m.offset())
            )
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        made.offsets[name] = offsets
        # The marker is written just after the coordinator answers; wait for it, so that
        # the next producer's records come after it and the layout is the same every time.
        written = sum(len(o) for o in made.offsets.values()) + len(made.offsets)
        deadline = time.monotonic() + 10
        while logs.wait_until_stable(bootstrap, topic) < written:
            assert time.monotonic() < deadline, "the transaction marker was not written"
            time.sleep(0.05)

    def producer(name: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": made.ids[name[0]]})
        p.init_transactions(60)
        return p

    a = producer("A")
    transaction(a, "A-committed", ["a1", "a2", "a3"], commit=True)
    transaction(a, "A-aborted", ["x1", "x2"], commit=False)
    transaction(producer("B"), "B-committed", ["b1"], commit=True)
    # A second instance with A's transactional.id: the coordinator bumps the epoch.
    transaction(producer("A2"), "A2-committed", ["a4"], commit=True)
    return made


def test_isolation_levels_differ_exactly_by_the_aborted_records(cluster1, txn_topic):
    bootstrap = cluster1.direct_bootstrap
    view = logs.isolation_live(bootstrap, txn_topic.topic)

    unc = {r.offset for r in view.rows if r.read_uncommitted}
    com = {r.offset for r in view.rows if r.read_committed}
    assert com <= unc
    assert unc - com == set(txn_topic.offsets["A-aborted"]) == set(view.aborted)
    written = {o for offsets in txn_topic.offsets.values() for o in offsets}
    assert unc == written
    # Every transaction has ended: the LSO has caught up with the high watermark, and the
    # offsets in neither read are the four markers.
    assert view.last_stable_offset == view.high_watermark == max(written) + 2
    markers = [r.offset for r in view.markers]
    assert set(markers) == set(range(view.high_watermark)) - written and len(markers) == 4
    # kcat at each isolation level reads the same values.
    values = {r.offset: r.value for r in view.rows}
    for isolation, seen in (("read_uncommitted", unc), ("read_committed", com)):
        expected = [values[o] for o in sorted(seen)]
        assert kcat_values(bootstrap, txn_topic.topic, isolation=isolation) == expected
    # Inferred marker types match the exact ones from the dump.
    inferred = {r.offset: r.marker for r in view.markers}
    exact = logs.apply_batches(view, logs.dump_log(cluster1, txn_topic.topic).batches)
    assert {r.offset: r.marker for r in exact.markers} == inferred
    assert sorted(inferred.values()) == ["ABORT", "COMMIT", "COMMIT", "COMMIT"]
    assert all(r.exact for r in exact.markers)


def test_dump_shows_producer_ids_epochs_and_markers(cluster1, txn_topic):
    bootstrap = cluster1.direct_bootstrap
    dump = logs.dump_log(cluster1, txn_topic.topic)
    assert dump.node_id == 1 and dump.files[0].endswith("00000000000000000000.log")
    with ThreadPoolExecutor(2) as pool:  # one JVM each: start them together
        found = pool.map(lambda tid: describe_transaction(bootstrap, tid), txn_topic.ids.values())
        coordinator = dict(zip(txn_topic.ids, found, strict=True))
    pid_a, epoch_a = int(coordinator["A"]["ProducerId"]), int(coordinator["A"]["ProducerEpoch"])
    pid_b, epoch_b = int(coordinator["B"]["ProducerId"]), int(coordinator["B"]["ProducerEpoch"])
    assert pid_a != pid_b

    by_offset = {o: b for b in dump.batches for o in range(b.base_offset, b.last_offset + 1)}
    data = {
        name: {(by_offset[o].producer_id, by_offset[o].producer_epoch) for o in offsets}
        for name, offsets in txn_topic.offsets.items()
    }
    assert data["B-committed"] == {(pid_b, epoch_b)}
    assert data["A2-committed"] == {(pid_a, epoch_a)}
    # The first instance of A wrote with an older epoch of the same producer id.
    ((pid, old_epoch),) = data["A-committed"] | data["A-aborted"]
    assert pid == pid_a and old_epoch < epoch_a
    assert all(by_offset[o].is_transactional for offs in txn_topic.offsets.values() for o in offs)

    # Each transaction ends with its own producer's marker, after its last record.
    controls = [b for b in dump.batches if b.is_control]
    assert all(b.count == 1 and b.is_transactional for b in controls)
    ends = {
        "A-committed": ((pid_a, old_epoch), "COMMIT"),
        "A-aborted": ((pid_a, old_epoch), "ABORT"),
        "B-committed": ((pid_b, epoch_b), "COMMIT"),
        "A2-committed": ((pid_a, epoch_a), "COMMIT"),
    }
    for name, (producer, kind) in ends.items():
        last = max(txn_topic.offsets[name])
        marker = next(
            b
            for b in controls
            if (b.producer_id, b.producer_epoch) == producer and b.base_offset > last
        )
        assert marker.control_type == kind, name
        controls.remove(marker)
    assert controls == []


def test_a_replacement_fences_by_epoch_first_then_aborts_at_the_new_epoch(cluster1):
    """Read from the log: a dead instance's open transaction is aborted at a bumped epoch.

    The replacement's init_transactions makes the coordinator bump the epoch (fencing the
    old instance) and write the ABORT marker at that epoch; the replacement then gets a
    higher one still (end-txn-request-lost and the Zombie page say so). The contrast, a
    transaction its own producer aborts, carries the writer's own epoch (the fixture's
    A-aborted, test_dump_shows_producer_ids_epochs_and_markers).
    """
    bootstrap = cluster1.direct_bootstrap
    topic, txn_id = unique("txn-fence"), unique("txn-fence-id")
    admin.create_topic(bootstrap, topic)
    dead = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    dead.init_transactions(60)
    dead.begin_transaction()
    for value in ("d1", "d2"):
        dead.produce(topic, key="dead", value=value)
    assert dead.flush(30) == 0  # appended, in an open transaction the dead one never ends
    replacement = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    replacement.init_transactions(60)
    replacement.begin_transaction()
    replacement.produce(topic, key="new", value="n1")
    assert replacement.flush(30) == 0
    replacement.commit_transaction(30)
    deadline = time.monotonic() + 10
    while logs.wait_until_stable(bootstrap, topic) < 5:  # 2 + ABORT + 1 + COMMIT
        assert time.monotonic() < deadline, "the markers were not written"
        time.sleep(0.05)

    batches = logs.dump_log(cluster1, topic).batches
    data = [b for b in batches if not b.is_control]
    controls = [(b.control_type, b.producer_epoch) for b in batches if b.is_control]
    dead_epoch, new_epoch = data[0].producer_epoch, data[-1].producer_epoch
    assert len({b.producer_id for b in batches}) == 1
    ((abort_epoch,),) = {(e,) for kind, e in controls if kind == "ABORT"}
    assert dead_epoch < abort_epoch < new_epoch, (dead_epoch, abort_epoch, new_epoch)
    assert ("COMMIT", new_epoch) in controls


def test_open_transaction_holds_read_committed_at_the_lso(cluster1):
    demo = logs.open_transaction_demo(cluster1.direct_bootstrap, open_records=3)
    held, after = demo.while_open, demo.after_commit

    open_rows = [r for r in held.rows if r.kind == "open"]
    assert [r.value for r in open_rows] == ["open 1", "open 2", "open 3"]
    assert held.last_stable_offset == open_rows[0].offset < held.high_watermark
    assert max(r.offset for r in held.rows if r.read_committed) < held.last_stable_offset
    assert all(r.read_uncommitted and not r.read_committed for r in open_rows)
    assert [r.value for r in held.rows if r.kind == "aborted"] == ["aborted 1", "aborted 2"]

    assert after.last_stable_offset == after.high_watermark == held.high_watermark + 1
    assert not [r for r in after.rows if r.kind == "open"]
    assert {r.offset for r in open_rows} <= {r.offset for r in after.rows if r.read_committed}


def test_errors_are_one_actionable_line(cluster1):
    with pytest.raises(logs.LogViewError, match="does not exist"):
        logs.dump_log(cluster1, unique("missing"))
    topic = unique("one-partition")
    admin.create_topic(cluster1.direct_bootstrap, topic)
    with pytest.raises(logs.LogViewError, match="has partitions 0-0, not 3"):
        logs.isolation_live(cluster1.direct_bootstrap, topic, 3)
    with pytest.raises(logs.LogViewError, match="There is no node 7"):
        logs.dump_log(cluster1, topic, node_id=7)


# ---- the command line ------------------------------------------------------------------------
def run_cli(cluster, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m engine.commands.logs_cli ...` with the session's cluster as the current one.

    A state folder of its own points at the cluster through a symlink, so the session's
    shared state folder is left alone.
    """
    state = tmp_path / "state"
    state.mkdir(parents=True)
    (state / cluster.name).symlink_to(cluster.root)
    (state / "current.json").write_text(json.dumps({"backend": "local", "name": cluster.name}))
    env = {**os.environ, "LAB_STATE_DIR": str(state), "PYTHONPATH": str(paths.REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "engine.commands.logs_cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=paths.REPO_ROOT,
        check=False,
    )


def test_compaction_and_dump_log_commands_print_json(cluster1, tmp_path, txn_topic):
    out = run_cli(
        cluster1, tmp_path, "compaction", "--records", "K1=V1,K1=V2,K2=", "--json"
    )  # the tombstone stays: delete.retention.ms is 2 s, and the command waits for it
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"before", "after", "settings", "cleaner_seconds"} <= set(data)
    assert data["before"] == [
        {"offset": 0, "key": "K1", "value": "V1"},
        {"offset": 1, "key": "K1", "value": "V2"},
        {"offset": 2, "key": "K2", "value": None},
    ]
    assert [r for r in data["after"] if r["key"] != logs.ROLL_KEY] == [
        {"offset": 1, "key": "K1", "value": "V2"}
    ]
    assert isinstance(data["cleaner_seconds"], float)
    assert data["settings"]["delete.retention.ms"] == 2000

    out = run_cli(cluster1, tmp_path / "x", "dump-log", txn_topic.topic, "0", "--json")
    assert out.returncode == 0, out.stderr
    batches = json.loads(out.stdout)["batches"]
    assert [b["control_type"] for b in batches if b["is_control"]].count("ABORT") == 1
    assert {"base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence"} <= set(
        batches[0]
    )

    out = run_cli(cluster1, tmp_path / "y", "dump-log", "no-such-topic", "0", "--json")
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == "error: Topic 'no-such-topic' does not exist; pick one the cluster has."
    )


# ---- the page --------------------------------------------------------------------------------
def test_page_runs_the_demo_and_dumps_without_errors(cluster1, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from pages._shared import APP_MARK, cluster_service

    monkeypatch.setenv("LAB_AUTOSTART", "0")
    service = cluster_service()
    saved = (service.cluster, service.state)
    service.cluster, service.state = cluster1, "ready"
    try:
        at = AppTest.from_file(str(paths.REPO_ROOT / "pages" / "log_views.py"), default_timeout=90)
        at.session_state[APP_MARK] = True
        at.run()
        assert not at.exception and not at.error
        assert [t.label for t in at.tabs] == ["Compaction", "Isolation levels", "Batches"]
        at.radio(key="logs_iso_source").set_value("Open a transaction (live demo)").run()
        next(b for b in at.button if b.label == "Run the demo").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        metrics = [(m.label, m.value) for m in at.metric]
        assert ("Aborted records", "2") in metrics
        next(b for b in at.button if b.label == "Dump the log").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert at.session_state["logs_dump"].topic == at.session_state["logs_demo"].topic
    finally:
        service.cluster, service.state = saved
