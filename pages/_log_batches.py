"""The Log views' Batches tab: Kafka's DumpLogSegments over a partition, batch by batch."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.face import (
    Cluster,
    LogDump,
    batch_rows,
    dump_log,
)
from pages._log_common import no_none, not_ready, table, topic_picker
from pages._presenter import room_table
from pages._roles import is_presenter
from pages._room_results import room_results, show_presenters
from pages._shared import show_error

DUMP = "log dump"


# ---- batches ---------------------------------------------------------------------------------
def batches_tab(cluster: Cluster | None) -> None:
    st.markdown(
        "Kafka's own log-dump tool reads the partition's segment files on the broker: "
        "`java -cp LIBS/* kafka.tools.DumpLogSegments --files SEGMENT.log --deep-iteration` "
        "(on the docker backend, `kafka-dump-log.sh` inside the broker's container). Each "
        "batch carries its producer id and epoch, its base sequence, whether it is "
        "transactional, and whether it is a control batch: a COMMIT or ABORT marker."
    )
    if not is_presenter():
        # A dump starts a JVM on the presenter's machine: viewers see the presenter's.
        show_presenters(DUMP, "dumps the log (Kafka's tool starts a JVM)", "dump", show_dump)
        return
    if cluster is None:
        not_ready()
        return
    try:
        picked = topic_picker(cluster, "logs_batch_topic")
        if picked is None:
            return
        topic, partition = picked
        nodes = ["leader", *cluster.node_ids]
        left, right = st.columns([1, 3])
        node = left.selectbox("Node", nodes, key="logs_batch_node")
        with_data = right.checkbox("Keys and payloads", value=True, key="logs_batch_data")
        if st.button("Dump the log", type="primary"):
            dump = dump_log(
                cluster,
                topic,
                partition,
                node_id=None if node == "leader" else int(node),
                print_data=with_data,
            )
            st.session_state["logs_dump"] = dump
            room_results().put(DUMP, dump)
    except Exception as exc:
        show_error(exc)
        return
    dump: LogDump | None = st.session_state.get("logs_dump")
    if dump is not None:
        show_dump(dump)


def show_dump(dump: LogDump) -> None:
    st.caption(
        f"`{dump.topic}` partition {dump.partition} on node {dump.node_id}: "
        f"{len(dump.files)} segment file(s), {len(dump.batches)} batch(es)"
    )
    rows = batch_rows(dump.batches)
    if not rows:
        st.info("The partition holds no batches.")
        return
    df = pd.DataFrame(rows)
    df["_state"] = [
        "abort" if r["control type"] == "ABORT" else "commit" if r["control"] else "data"
        for r in rows
    ]
    table(df, {"abort": "#ffcdd2", "commit": "#c8e6c9"})
    with st.expander("Records inside the batches"):
        records = [
            {
                "batch": b.base_offset,
                "offset": r.offset,
                "sequence": r.sequence,
                "key": r.key,
                "payload": r.payload if r.value_size != -1 else "null (tombstone)",
                "marker": r.marker,
            }
            for b in dump.batches
            for r in b.records
        ]
        room_table(no_none(pd.DataFrame(records)), hide_index=True)
    with st.expander("The tool's own output"):
        st.code(dump.raw or "(no output)", language=None)
