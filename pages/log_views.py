"""Log views: compaction before and after, both isolation levels, and the batches underneath.

Every table here is read back from Kafka (a consumer on the direct listener, ListOffsets,
or Kafka's own DumpLogSegments tool); the page only labels what came back.
"""

from __future__ import annotations

import streamlit as st

from engine.face import (
    Cluster,
)
from pages._log_batches import batches_tab
from pages._log_compaction import compaction_tab
from pages._log_isolation import isolation_tab
from pages._shared import cluster_service, require_app

require_app()


def cluster_or_none() -> Cluster | None:
    service = cluster_service()
    return service.cluster if service.state == "ready" else None


st.title("Log views")
st.caption(
    "Compaction, isolation levels and record batches. Live topics are read back from the "
    "brokers (consumers at both isolation levels, Kafka's DumpLogSegments for exact batches "
    "and markers). A recorded run's isolation view is partly inferred: its read_committed "
    "side was read back, but at a read_committed level its read_uncommitted side is the "
    "offsets the broker acknowledged to the writer, and its markers, LSO and high watermark "
    "are worked out from the gaps and the run's transaction events; the view says which."
)
tabs = st.tabs(["Compaction", "Isolation levels", "Batches"])
current = cluster_or_none()
with tabs[0]:
    compaction_tab(current)
with tabs[1]:
    isolation_tab(current)
with tabs[2]:
    batches_tab(current)
