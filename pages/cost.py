"""Cost of guarantees: each delivery guarantee's throughput and latency here, beside the claims.

The quick run (under a minute) measures on the dashboard's cluster; the last full run of
`python -m benchmarks.cost` is shown from benchmarks/README.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.cost import published, report
from engine.cost.suite import QuickResult, run_quick
from engine.cost.throughput import BASELINE, Matrix
from engine.errors import LabError
from pages._shared import cluster_service, require_app, show_error

README = Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
START, END = "<!-- cost-results:start -->", "<!-- cost-results:end -->"

require_app()

st.title("Cost of guarantees")
st.markdown(
    "Stronger guarantees ask more of the producer and the brokers: acknowledgements from every "
    "in-sync replica, sequence numbers, transaction markers, and a consumer that waits for "
    "commits. How much do they cost? Below, the figures people quote, and what the cluster in "
    "this room measures under stated conditions."
)

st.subheader("What is published")
st.dataframe(
    pd.DataFrame(
        [
            {
                "claim": c.what,
                "published": c.figure,
                "conditions": c.conditions,
                "source": c.source,
            }
            for c in published.CLAIMS
        ]
    ),
    hide_index=True,
    width="stretch",
)


def throughput_figure(matrix: Matrix, size: int) -> go.Figure:
    """Median msg/s per setup, with the min–max of the rounds as error bars."""
    labels = matrix.setups
    summaries = [matrix.summary(s, size) for s in labels]
    colors = ["#1f77b4" if s != BASELINE else "#2ca02c" for s in labels]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=[s.median for s in summaries],
            marker_color=colors,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [s.high - s.median for s in summaries],
                "arrayminus": [s.median - s.low for s in summaries],
            },
        )
    )
    fig.update_layout(
        yaxis_title="messages/s (median, min–max)",
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title=f"Producer throughput, {report.size_text(size)} messages",
    )
    return fig


def show_quick(result: QuickResult) -> None:
    cond = result.conditions
    before = cond["before"]
    st.caption(
        f"{cond['nodes']}-node cluster (replication {result.matrix.conditions['replication']}), "
        f"{result.matrix.conditions['partitions']} partitions, direct listener, 1 KB messages, "
        f"{cond['messages per trial']:,} per trial, {result.matrix.conditions['rounds']} shuffled "
        f"rounds; {before['cores']} cores, load average {before['load average (1/5/15 min)']} "
        f"before and {cond['after']['load average (1/5/15 min)']} after; librdkafka "
        f"{before['librdkafka']}. Spread = min–max over the rounds."
    )
    st.markdown("**The claims, beside this run**")
    st.dataframe(
        pd.DataFrame(report.claim_rows(result.matrix, result.latency)),
        hide_index=True,
        width="stretch",
    )
    st.plotly_chart(throughput_figure(result.matrix, result.matrix.sizes[0]), width="stretch")
    st.markdown("**Throughput** (overhead: positive = slower than the base, paired by round)")
    st.dataframe(
        pd.DataFrame(report.throughput_rows(result.matrix)),
        hide_index=True,
        width="stretch",
    )
    st.markdown("**End-to-end latency**, one transactional stream read both ways")
    st.dataframe(
        pd.DataFrame(report.latency_rows(result.latency)),
        hide_index=True,
        width="stretch",
    )
    if result.yardsticks is not None:
        st.markdown("**The engine's producer and the proxy against a bare loop**")
        st.dataframe(
            pd.DataFrame(report.yardstick_rows(result.yardsticks)),
            hide_index=True,
            width="stretch",
        )


st.subheader("Measure it here")
service = cluster_service()
if service.state == "idle":
    service.find_running()  # a cluster started from the command line is as good as ours
ready = service.state == "ready" and service.cluster is not None
if not ready:
    st.info("The cluster is not ready yet; its progress shows in the sidebar.")
with st.expander("Parameters"):
    left, right = st.columns(2)
    messages = left.number_input(
        "Messages per trial", 500, 100_000, 10_000, step=500, key="cost_messages"
    )
    rounds = right.number_input("Rounds", 1, 10, 3, key="cost_rounds")
    yardsticks = st.checkbox(
        "Also time the engine's producer and the proxy against a bare loop",
        value=True,
        key="cost_yardsticks",
    )
if st.button("▶ Run the quick benchmark", type="primary", disabled=not ready, key="cost_run"):
    try:
        cluster = service.cluster
        if cluster is None:
            raise LabError("The cluster is not ready yet; its progress shows in the sidebar.")
        with st.status("Measuring…", expanded=True) as status:
            bar = st.progress(0.0)
            line = st.empty()

            def progress(what: str, fraction: float) -> None:
                bar.progress(min(1.0, max(0.0, fraction)))
                line.caption(what)

            with service.exclusive("the cost benchmark is loading the cluster"):
                result = run_quick(
                    cluster,
                    messages=int(messages),
                    rounds=int(rounds),
                    yardsticks=bool(yardsticks),
                    progress=progress,
                )
            status.update(label="Done", state="complete", expanded=False)
        st.session_state["cost_quick"] = result
    except Exception as exc:
        show_error(exc)

quick: QuickResult | None = st.session_state.get("cost_quick")
if quick is not None:
    show_quick(quick)

st.subheader("Last full run")
text = README.read_text() if README.exists() else ""
if START in text and END in text:
    st.markdown(text.split(START, 1)[1].split(END, 1)[0])
else:
    st.caption("No full run recorded yet: `python -m benchmarks.cost --readme` writes one.")
