"""Cost of guarantees: each delivery guarantee's throughput and latency here, beside the claims.

The first screen answers "what does each guarantee cost here", from the last full run of the
cost benchmark (benchmarks/README.md); the tables behind it fold away. The quick run (more
than a minute) measures on the dashboard's cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.face import (
    BASELINE,
    QUICK_MESSAGES,
    LabError,
    Matrix,
    QuickResult,
    published,
    report,
    run_quick,
)
from pages._presenter import room_chart, room_table
from pages._roles import is_presenter
from pages._shared import cluster_service, require_app, show_error

README = Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
START, END = "<!-- cost-results:start -->", "<!-- cost-results:end -->"
PUBLISHED_START, PUBLISHED_END = (
    "<!-- published-baselines:start -->",
    "<!-- published-baselines:end -->",
)

require_app()

st.title("Cost of guarantees")
st.markdown(
    "Stronger guarantees ask more of the producer and the brokers: acknowledgements from every "
    "in-sync replica, sequence numbers, transaction markers, and a consumer that waits for "
    "commits. How much do they cost? Below, the figures people quote, and what the cluster in "
    "this room measures under stated conditions."
)


def wrapped_table(rows: list[dict[str, Any]]) -> None:
    """A static table whose long cells wrap, so that no column runs off the right edge; each
    row is the benchmark report's, by column (engine.cost.report), no run's result."""
    st.table(pd.DataFrame(rows).set_index(next(iter(rows[0]))))


def recorded_block(start: str = START, end: str = END) -> str:
    """A block the benchmark wrote into benchmarks/README.md, or "" if none is recorded."""
    text = README.read_text() if README.exists() else ""
    return text.split(start, 1)[1].split(end, 1)[0] if start in text and end in text else ""


def full_run() -> str:
    """The last full run's block from benchmarks/README.md, or "" if none is recorded."""
    return recorded_block()


def full_run_section(title: str) -> str:
    """One `### title...` section of the full run's block (its heading left out), or ""."""
    for part in full_run().split("\n### ")[1:]:
        heading, _, body = part.partition("\n")
        if heading.startswith(title):
            return body
    return ""


def room_block(block: str) -> str:
    """A recorded block without what only its author needs: the command line and load
    averages that produced it ("Produced by ..."), and its own heading, which the page's
    subheader already says."""
    lines = [line for line in block.splitlines() if not line.startswith("Produced by ")]
    while lines and (not lines[0].strip() or lines[0].startswith("### ")):
        lines.pop(0)
    return "\n".join(lines)


def without_columns(markdown: str, dropped: set[str]) -> str:
    """A Markdown table without the named columns (cells hold no `|`: the benchmark writes
    them so); other lines as they are."""
    lines = markdown.splitlines()
    header = next((line for line in lines if line.startswith("|")), None)
    if header is None:
        return markdown
    names = [cell.strip() for cell in header.strip().strip("|").split("|")]
    keep = [i for i, name in enumerate(names) if name not in dropped]

    def narrowed(line: str) -> str:
        if not line.startswith("|"):
            return line
        cells = line.strip().strip("|").split("|")
        return "|" + "|".join(cells[i] for i in keep if i < len(cells)) + "|"

    return "\n".join(narrowed(line) for line in lines)


st.subheader("What each guarantee costs here")
if claims := full_run_section("Published claims"):
    # The published figures' conditions and sources are in the folded table below: on the
    # first screen they made each row taller than a 150% screen (the page walk measured it).
    claims = without_columns(claims, {"their conditions", "source"})
    st.caption(
        "From the lab's last full cost benchmark on this kind of machine (2 cores, 3 brokers). "
        "Positive = slower than the base. Each published figure was measured against its own "
        "baseline; see the folded tables below."
    )
    st.markdown(claims)
else:
    st.info("No full cost benchmark is recorded yet; the quick run below measures one here.")

with st.expander("What is published, and under which conditions"):
    wrapped_table(
        [
            {
                "claim": c.what,
                "published": c.figure,
                "conditions": c.conditions,
                "source": c.source,
            }
            for c in published.CLAIMS
        ]
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
        f"{cond['messages per trial']:,} timed per trial after "
        f"{cond.get('warm-up messages per trial', 0):,} untimed, "
        f"{result.matrix.conditions['rounds']} shuffled rounds; {before['cores']} cores, load "
        f"average {before['load average (1/5/15 min)']} before and "
        f"{cond['after']['load average (1/5/15 min)']} after; librdkafka "
        f"{before['librdkafka']}. Spread = the farthest round from the median."
        + (
            " On one broker, acks=1 and acks=all wait for the same single replica, so "
            "at-most-once (acks=1) and at-least-once can only tie here."
            if cond["nodes"] == 1
            else ""
        )
    )
    judged = report.quick_steadiness(result.matrix, result.matrix.sizes[0])
    if judged.comparable:
        st.success(report.steadiness_text(judged))
        show_measurements(result)
        return
    st.warning(
        report.steadiness_text(judged)
        + " Below, the claims beside the last full benchmark, whose trials are longer and more;"
        " this run's own numbers are in the box after it."
    )
    claims = full_run_section("Published claims")
    if claims:
        st.markdown("**The claims, beside the last full benchmark**")
        st.markdown(claims)
    else:
        st.caption("No full run recorded yet: `python -m benchmarks.cost --readme` writes one.")
    with st.expander("This quick run's numbers (too noisy to compare)"):
        show_measurements(result)


def show_measurements(result: QuickResult) -> None:
    """The quick run's own tables and chart."""
    st.markdown("**The claims, beside this run**")
    wrapped_table(report.claim_rows(result.matrix, result.latency))
    room_chart(throughput_figure(result.matrix, result.matrix.sizes[0]), width="stretch")
    st.markdown("**Throughput** (overhead: positive = slower than the base, paired by round)")
    room_table(
        pd.DataFrame(report.throughput_rows(result.matrix)),
        hide_index=True,
        width="stretch",
    )
    st.markdown("**End-to-end latency**, one transactional stream read both ways")
    room_table(
        pd.DataFrame(report.latency_rows(result.latency)),
        hide_index=True,
        width="stretch",
    )
    if result.yardsticks is not None:
        st.markdown("**The engine's producer and the proxy against a bare loop**")
        room_table(
            pd.DataFrame(report.yardstick_rows(result.yardsticks)),
            hide_index=True,
            width="stretch",
        )


st.subheader("Measure it here")
st.caption(
    "The quick run takes more than a minute (its progress shows while it runs): fewer, "
    "shorter trials than the full benchmark, so its spread is wider, and it says when it is "
    "too noisy to compare."
)
service = cluster_service()
if service.state == "idle":
    service.find_running()  # a cluster started from the command line is as good as ours
ready = service.state == "ready" and service.cluster is not None
if not ready:
    st.info("The cluster is not ready yet; its progress shows in the sidebar.")
with st.expander("Parameters"):
    left, right = st.columns(2)
    messages = left.number_input(
        "Messages per trial", 500, 200_000, QUICK_MESSAGES, step=500, key="cost_messages"
    )
    rounds = right.number_input("Rounds", 1, 10, 3, key="cost_rounds")
    yardsticks = st.checkbox(
        "Also time the engine's producer and the proxy against a bare loop",
        value=True,
        key="cost_yardsticks",
    )
# Only the presenter loads the cluster: a quick run beside a class's runs skews both.
if is_presenter() and st.button(
    "▶ Run the quick benchmark", type="primary", disabled=not ready, key="cost_run"
):
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

with st.expander("The published figures, against their own baselines"):
    st.markdown(
        "Confluent's 3% and 20% were measured against producers that differ from the lab's "
        "levels: an at-least-once producer that keeps one request in flight (in order), and "
        "an at-most-once producer with acks=1 and five in flight. The lab measures both beside "
        "its own levels, so that each figure is compared with its own baseline."
    )
    if published_block := recorded_block(PUBLISHED_START, PUBLISHED_END):
        st.markdown(room_block(published_block))
    else:
        st.caption("Not measured yet.")

with st.expander("Every table of the last full run"):
    if full_run():
        st.markdown(room_block(full_run()))
    else:
        st.caption("No full run recorded yet.")
