"""The log views' parsers, without Kafka: record lists, DumpLogSegments output, checkpoints.

The dump samples are real output of Kafka 4.1.2's `kafka.tools.DumpLogSegments --files ...
--deep-iteration --print-data-log`, captured from the embedded broker:

- TXN_DUMP: one transactional producer; a committed transaction (offsets 0-2, COMMIT at 3),
  an aborted one (4-5, ABORT at 6), and a committed one (7, COMMIT at 8);
- COMPACTED_DUMP: the lecture's example after compaction (kept offsets 3 4 6 8 9 10, a roll
  record at 14 and the active segment from 15), with the tool's stderr lines about
  non-consecutive offsets appended;
- TOMBSTONE_DUMP: a plain (non-idempotent) producer's value and tombstone for one key.
"""

from __future__ import annotations

import pytest

from engine import logs
from engine.commands import logs_cli
from engine.logs import LogRecord, RecordListError
from engine.run.record import RecordedLevel, RecordedRun

TXN_DUMP = """\
Dumping exp.txn.1795310194-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795310195880 size: 94 magic: 2 compresscodec: none crc: 2122026301 isvalid: true
| offset: 0 CreateTime: 1795310195880 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [] key: k0 payload: c0
| offset: 1 CreateTime: 1795310195880 keySize: 2 valueSize: 2 sequence: 1 headerKeys: [] key: k1 payload: c1
| offset: 2 CreateTime: 1795310195880 keySize: 2 valueSize: 2 sequence: 2 headerKeys: [] key: k2 payload: c2
baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 94 CreateTime: 1795310196061 size: 78 magic: 2 compresscodec: none crc: 3314504311 isvalid: true
| offset: 3 CreateTime: 1795310196061 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
baseOffset: 4 lastOffset: 5 count: 2 baseSequence: 3 lastSequence: 4 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 172 CreateTime: 1795310196040 size: 83 magic: 2 compresscodec: none crc: 8166521 isvalid: true
| offset: 4 CreateTime: 1795310196040 keySize: 2 valueSize: 2 sequence: 3 headerKeys: [] key: a0 payload: a0
| offset: 5 CreateTime: 1795310196040 keySize: 2 valueSize: 2 sequence: 4 headerKeys: [] key: a1 payload: a1
baseOffset: 6 lastOffset: 6 count: 1 baseSequence: -1 lastSequence: -1 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 255 CreateTime: 1795310196107 size: 78 magic: 2 compresscodec: none crc: 21720076 isvalid: true
| offset: 6 CreateTime: 1795310196107 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0
baseOffset: 7 lastOffset: 7 count: 1 baseSequence: 5 lastSequence: 5 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 333 CreateTime: 1795310196105 size: 71 magic: 2 compresscodec: none crc: 4241767098 isvalid: true
| offset: 7 CreateTime: 1795310196105 keySize: 1 valueSize: 2 sequence: 5 headerKeys: [] key: z payload: c3
baseOffset: 8 lastOffset: 8 count: 1 baseSequence: -1 lastSequence: -1 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 404 CreateTime: 1795310196144 size: 78 magic: 2 compresscodec: none crc: 3932943412 isvalid: true
| offset: 8 CreateTime: 1795310196144 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
"""  # noqa: E501

COMPACTED_DUMP = """\
Dumping exp.cmp.1795310274-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 12 count: 6 baseSequence: 0 lastSequence: 12 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[1795310279712] position: 0 CreateTime: 1795310274933 size: 135 magic: 2 compresscodec: none crc: 280506605 isvalid: true
| offset: 3 CreateTime: 1795310274933 keySize: 2 valueSize: 2 sequence: 3 headerKeys: [] key: K1 payload: V4
| offset: 4 CreateTime: 1795310274933 keySize: 2 valueSize: 2 sequence: 4 headerKeys: [] key: K3 payload: V5
| offset: 6 CreateTime: 1795310274933 keySize: 2 valueSize: 2 sequence: 6 headerKeys: [] key: K4 payload: V7
| offset: 8 CreateTime: 1795310274933 keySize: 2 valueSize: 2 sequence: 8 headerKeys: [] key: K5 payload: V9
| offset: 9 CreateTime: 1795310274933 keySize: 2 valueSize: 3 sequence: 9 headerKeys: [] key: K2 payload: V10
| offset: 10 CreateTime: 1795310274933 keySize: 2 valueSize: 3 sequence: 10 headerKeys: [] key: K6 payload: V11
baseOffset: 14 lastOffset: 14 count: 1 baseSequence: 14 lastSequence: 14 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 135 CreateTime: 1795310280034 size: 82 magic: 2 compresscodec: none crc: 4230037970 isvalid: true
| offset: 14 CreateTime: 1795310280034 keySize: 8 valueSize: 6 sequence: 14 headerKeys: [] key: __roll__ payload: roll 2
Dumping exp.cmp.1795310274-0/00000000000000000015.log
Log starting offset: 15
baseOffset: 15 lastOffset: 15 count: 1 baseSequence: 15 lastSequence: 15 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795310281434 size: 82 magic: 2 compresscodec: none crc: 199482725 isvalid: true
| offset: 15 CreateTime: 1795310281434 keySize: 8 valueSize: 6 sequence: 15 headerKeys: [] key: __roll__ payload: roll 3
Non-consecutive offsets in /tmp/logsdev/state/logsdev/node-1/data/exp.cmp.1795310274-0/00000000000000000000.log
  10 is followed by 14
  6 is followed by 8
  4 is followed by 6
"""  # noqa: E501

TOMBSTONE_DUMP = """\
Dumping exp.tomb2-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795310316518 size: 90 magic: 2 compresscodec: none crc: 882159514 isvalid: true
| offset: 0 CreateTime: 1795310316518 keySize: 2 valueSize: 11 sequence: -1 headerKeys: [] key: K1 payload: hello world
| offset: 1 CreateTime: 1795310316518 keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: K1
"""  # noqa: E501


# ---- the record list ---------------------------------------------------------------------------
def test_lecture_preset_parses_to_eleven_records():
    records = logs.parse_records(logs.LECTURE_PRESET)
    keys = [f"K{n}" for n in (1, 2, 1, 1, 3, 2, 4, 5, 5, 2, 6)]
    assert [k for k, _ in records] == keys
    assert [v for _, v in records] == [f"V{i}" for i in range(1, 12)]


def test_empty_value_is_a_tombstone_and_spaces_and_newlines_are_forgiven():
    assert logs.parse_records(" K1 = V1 ,K2=\nK1=hello world ") == [
        ("K1", "V1"),
        ("K2", None),
        ("K1", "hello world"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("K1=V1,K2V2", "Item 2 'K2V2' has no '='"),
        ("K1=V1,=V2", "Item 2 '=V2' has an empty key"),
        ("K1=V1;K2=V2", "Item 1 'K1=V1;K2=V2' contains ';'"),
        ("K1=V1 K2=V2", "Item 1 'K1=V1 K2=V2' has more than one '='"),
        ("K1=V1,,K2=V2", "Item 2 is empty"),
        ("K1=V1,", "Item 2 is empty"),
        ("K 1=V1", "Item 1 'K 1=V1' has a space in its key"),
        ("__roll__=x", "Item 1 '__roll__=x' uses the key __roll__"),
        ("   ", "The record list is empty"),
    ],
)
def test_bad_record_lists_name_the_bad_item_in_one_line(text, expected):
    with pytest.raises(RecordListError) as caught:
        logs.parse_records(text)
    message = str(caught.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_too_many_records_are_refused():
    with pytest.raises(RecordListError, match="at most"):
        logs.parse_records(",".join(f"K{i}=V" for i in range(logs.MAX_RECORDS + 1)))


def test_compaction_command_refuses_a_bad_list_before_looking_for_a_cluster(capsys):
    assert logs_cli.main(["compaction", "--records", "K1=V1,K2", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: Item 2 'K2' has no '='")


def test_compaction_command_refuses_settings_out_of_range(capsys):
    assert logs_cli.main(["compaction", "--min-cleanable-dirty-ratio", "1.5"]) == 2
    assert "min.cleanable.dirty.ratio must be between 0.0 and 1.0" in capsys.readouterr().err


# ---- DumpLogSegments output ------------------------------------------------------------------
def test_transactional_dump_gives_batches_markers_and_producers():
    batches = logs.parse_dump(TXN_DUMP)
    summary = [
        (b.base_offset, b.last_offset, b.count, b.is_transactional, b.is_control, b.control_type)
        for b in batches
    ]
    assert summary == [
        (0, 2, 3, True, False, None),
        (3, 3, 1, True, True, "COMMIT"),
        (4, 5, 2, True, False, None),
        (6, 6, 1, True, True, "ABORT"),
        (7, 7, 1, True, False, None),
        (8, 8, 1, True, True, "COMMIT"),
    ]
    assert {(b.producer_id, b.producer_epoch) for b in batches} == {(0, 0)}
    assert [b.base_sequence for b in batches] == [0, -1, 3, -1, 5, -1]
    first = batches[0]
    assert (first.segment, first.position, first.size, first.compression) == (0, 0, 94, "none")
    assert first.create_time == 1795310195880 and first.delete_horizon_ms is None
    assert [(r.offset, r.key, r.payload, r.sequence) for r in first.records] == [
        (0, "k0", "c0", 0),
        (1, "k1", "c1", 1),
        (2, "k2", "c2", 2),
    ]
    marker = batches[3].records[0]
    assert (marker.offset, marker.marker, marker.coordinator_epoch, marker.key) == (
        6,
        "ABORT",
        0,
        None,
    )


def test_compacted_dump_keeps_offsets_with_gaps_and_the_delete_horizon():
    batches = logs.parse_dump(COMPACTED_DUMP)
    assert [b.segment for b in batches] == [0, 0, 15]
    assert [r.offset for r in batches[0].records] == [3, 4, 6, 8, 9, 10]
    assert [r.payload for r in batches[0].records] == ["V4", "V5", "V7", "V9", "V10", "V11"]
    # The cleaned batch keeps its original offset range, and its count is what is left.
    assert (batches[0].base_offset, batches[0].last_offset, batches[0].count) == (0, 12, 6)
    assert batches[0].delete_horizon_ms == 1795310279712
    assert (batches[1].records[0].key, batches[1].records[0].payload) == (logs.ROLL_KEY, "roll 2")
    assert all(b.producer_id == 2 and not b.is_transactional for b in batches)


def test_tombstone_has_no_payload_and_plain_producer_has_no_id():
    (batch,) = logs.parse_dump(TOMBSTONE_DUMP)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    value, tombstone = batch.records
    assert (value.key, value.payload) == ("K1", "hello world")  # spaces survive
    assert (tombstone.key, tombstone.payload, tombstone.value_size) == ("K1", None, -1)


def test_dump_without_data_still_gives_records():
    without_data = "\n".join(
        line.split(" key: ")[0] if line.startswith("| ") else line for line in TXN_DUMP.splitlines()
    )
    batches = logs.parse_dump(without_data)
    assert [r.offset for r in batches[0].records] == [0, 1, 2]
    assert batches[0].records[0].key is None
    assert batches[1].control_type == "COMMIT"


def test_batch_rows_name_each_batch():
    rows = logs.batch_rows(logs.parse_dump(TXN_DUMP))
    assert [r["what"] for r in rows] == [
        "transactional data",
        "COMMIT marker",
        "transactional data",
        "ABORT marker",
        "transactional data",
        "COMMIT marker",
    ]
    assert logs.batch_rows(logs.parse_dump(TOMBSTONE_DUMP))[0]["what"] == "data"


def test_empty_and_unrelated_output_gives_no_batches():
    assert logs.parse_dump("") == []
    assert logs.parse_dump("Dumping x/00000000000000000000.log\nLog starting offset: 0\n") == []


def test_the_dump_class_is_found_in_the_cached_jars():
    from engine.base import paths
    from engine.kafka import jars

    if not jars.kafka_jars_ready():
        pytest.skip("Kafka's jars are not cached; `python -m engine setup` fetches them")
    # Kafka 4.3 moved the tool from core (Scala) to kafka-tools (Java), KAFKA-14579.
    major, minor = map(int, paths.kafka_version().split(".")[:2])
    moved = (major, minor) >= (4, 3)
    expected = "org.apache.kafka.tools.DumpLogSegments" if moved else "kafka.tools.DumpLogSegments"
    assert logs.dump_class(paths.kafka_libs_dir()) == expected


def test_cleaner_checkpoint_file():
    text = "0\n3\nexp.cmp 0 15\nlab.compaction.x 0 11\nlab.compaction.x 1 4\n"
    assert logs.parse_cleaner_checkpoint(text, "lab.compaction.x", 0) == 11
    assert logs.parse_cleaner_checkpoint(text, "lab.compaction.x", 1) == 4
    assert logs.parse_cleaner_checkpoint(text, "other", 0) is None
    assert logs.parse_cleaner_checkpoint(None, "other", 0) is None


# ---- labels on what the broker returned ---------------------------------------------------------
def rec(offset: int, key: str | None = None, value: str | None = "v") -> LogRecord:
    return LogRecord(offset, key, value)


def test_isolation_rows_mark_aborted_records_markers_and_the_open_tail():
    unc = [rec(0), rec(1), rec(3), rec(4), rec(6), rec(8), rec(9)]
    com = [rec(0), rec(1), rec(6)]
    rows = logs.build_isolation_rows(unc, com, start=0, end=10, lso=8)
    kinds = [(r.offset, r.kind, r.marker) for r in rows]
    assert kinds == [
        (0, "committed", None),
        (1, "committed", None),
        (2, "marker", "COMMIT"),
        (3, "aborted", None),
        (4, "aborted", None),
        (5, "marker", "ABORT"),
        (6, "committed", None),
        (7, "marker", "COMMIT"),
        (8, "open", None),
        (9, "open", None),
    ]
    assert not any(r.exact for r in rows if r.kind == "marker")  # inferred, not dumped


def test_batches_make_markers_exact():
    view = logs.IsolationView(
        "t",
        0,
        "live",
        logs.build_isolation_rows(
            [rec(0), rec(1), rec(2), rec(4), rec(5), rec(7)],
            [rec(0), rec(1), rec(2), rec(7)],
            start=0,
            end=9,
            lso=9,
        ),
        0,
        9,
        9,
    )
    logs.apply_batches(view, logs.parse_dump(TXN_DUMP))
    assert [(m.offset, m.marker, m.exact) for m in view.markers] == [
        (3, "COMMIT", True),
        (6, "ABORT", True),
        (8, "COMMIT", True),
    ]
    assert view.aborted == [4, 5]
    assert {r.producer for r in view.rows} == {"0/0"}


def test_recorded_run_view_types_markers_from_the_transaction_events():
    # Shaped like runs/RUN_ID of the aborted-transaction scenario, at a read_committed level.
    history = [{"t": 0, "proc": "producer", "ev": "txn_init"}]
    t = 1
    for txn, (ids, end) in enumerate(
        [([0, 1], "txn_commit"), ([2, 3], "txn_abort"), ([4], "txn_commit")]
    ):
        history.append({"t": t, "proc": "producer", "ev": "txn_begin", "txn": txn, "ids": ids})
        for i in ids:
            offset = {0: 0, 1: 1, 2: 3, 3: 4, 4: 6}[i]
            t += 1
            history.append(
                {"t": t, "proc": "producer", "ev": "ack", "id": i, "partition": 0, "offset": offset}
            )
        t += 1
        history.append({"t": t, "proc": "producer", "ev": end, "txn": txn, "ids": ids})
    # The read_committed sink gets each committed record when its transaction commits.
    for offset, t in ((0, 5.5), (1, 5.5), (6, 12.25)):
        history.append({"t": t, "proc": "sink", "ev": "consumed", "partition": 0, "offset": offset})
    committed = [{"partition": 0, "offset": o, "id": i} for i, o in ((0, 0), (1, 1), (4, 6))]
    stored = {"isolation": "read_committed", "at_level": committed, "read_committed": committed}
    run = RecordedRun(
        meta={"run_id": "r1"},
        result={"results": {"exactly-once": {"sink_topic": "lab.r1.exactly-once.in"}}},
        levels={"exactly-once": RecordedLevel(verdicts=[], stored=stored, history=history)},
        scenario_text="",
    )
    assert logs.run_has_transactions(run, "exactly-once")
    view = logs.isolation_from_run(run, "exactly-once")
    assert view.aborted == [3, 4]
    assert [(m.offset, m.marker) for m in view.markers] == [
        (2, "COMMIT"),
        (5, "ABORT"),
        (7, "COMMIT"),
    ]
    assert (view.high_watermark, view.last_stable_offset) == (8, 8)
    assert view.rows[3].txn == "producer txn 1: aborted"
    # Acked at t=2, 3 and 8: the sink waited for each commit.
    assert {r.offset: r.sink_wait_ms for r in view.rows if r.sink_wait_ms is not None} == {
        0: 3500,
        1: 2500,
        6: 4250,
    }
    with pytest.raises(logs.LogViewError, match="no level 'nope'"):
        logs.isolation_from_run(run, "nope")


def test_compaction_rows_explain_each_offset():
    before = [
        rec(0, "K1", "V1"),
        rec(1, "K2", "V2"),
        rec(2, "K1", "V3"),
        rec(3, "K2", None),
        rec(4, "K3", "V5"),
    ]
    result = logs.CompactionResult(
        topic="t",
        partition=0,
        settings={},
        before=before,
        after=[rec(2, "K1", "V3"), rec(4, "K3", "V5"), rec(6, logs.ROLL_KEY, "roll 2")],
        after_first_clean=[rec(2, "K1", "V3"), rec(3, "K2", None), rec(4, "K3", "V5")],
        roll_offsets=[5, 6],
        rolled_at=0.0,
        cleaner_seconds=1.0,
        tombstone_seconds=3.0,
        tombstones_waited=True,
        timed_out=False,
        layout=logs.LogLayout(1, "/x", [0, 6], 6),
    )
    rows = {r["offset"]: r for r in logs.compaction_rows(result)}
    assert rows[0]["status"] == "removed" and rows[0]["superseded_by"] == 2
    assert rows[1]["superseded_by"] == 3  # the tombstone made K2:V2 obsolete
    assert rows[2]["status"] == "kept" and rows[2]["segment"] == "cleaned"
    assert rows[3]["status"] == "tombstone removed"
    assert "kept by the first cleaning" in rows[3]["why"]
    assert rows[5]["status"] == "roll record, removed"
    assert rows[6]["status"] == "roll record" and rows[6]["segment"] == "active segment"


def test_compaction_settings_are_checked_and_named_as_kafka_names_them():
    config = logs.CompactionSettings().topic_config()
    assert config["cleanup.policy"] == "compact"
    assert set(config) == {
        "cleanup.policy",
        "min.cleanable.dirty.ratio",
        "segment.ms",
        "min.compaction.lag.ms",
        "delete.retention.ms",
    }
    with pytest.raises(logs.LogViewError, match=r"^segment\.ms must be between 100 and 60000"):
        logs.CompactionSettings(segment_ms=5).validate()
