"""The cost benchmark's measurements on a real 1-node cluster: the structure, not the speed.

Each trial's messages are counted in its topic with kcat, an independent client, so a rate is
only reported for messages that really arrived.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from engine.cost.latency import ISOLATIONS, run_latency
from engine.cost.suite import run_quick
from engine.cost.throughput import BASELINE, run_matrix, setups
from engine.cost.yardsticks import (
    BARE,
    BARE_PROXY,
    ENGINE_BATCH,
    ENGINE_EACH,
    PERF_TEST,
    run_yardsticks,
)

pytestmark = pytest.mark.kafka


def count_in_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> int:
    """Messages in a topic, read to the end by kcat (one offset per line: values may hold \\n)."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by `./lab test`; install it to run this test by hand"
    args = ["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"]
    out = subprocess.run(
        [kcat, *args, "-X", f"isolation.level={isolation}", "-f", "%o\\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return len(out.stdout.splitlines())


def test_every_setup_delivers_its_messages_and_gets_a_rate(cluster1):
    direct = cluster1.direct_bootstrap
    m = run_matrix(
        direct,
        direct,
        nodes=1,
        sizes=[100, 1024],
        counts={100: 400, 1024: 300},
        rounds=2,
        warmup=20,
        keep_topics=True,
    )
    labels = [s.label for s in setups()]
    assert sorted(m.setups) == sorted(labels)
    assert len(m.trials) == len(labels) * 2 * 2
    for trial in m.trials:
        assert trial.delivered == trial.sent == {100: 400, 1024: 300}[trial.size], trial
        assert trial.failed == 0 and trial.msgs_per_s > 0 and trial.mib_per_s > 0
        # The untimed warm-up messages are in the topic too, and in no rate.
        assert trial.warmup == 20
        stored = count_in_topic(direct, trial.topic)
        if trial.setup == "at-most-once (acks=0)":
            # No broker answers acks=0: the client reports a message delivered once it is on
            # the socket, and the broker may still drop it (7 of 420, and once all of them,
            # in 3 runs of this test): at most once is all that acks=0 promises.
            assert stored <= trial.delivered + trial.warmup, trial
        else:
            assert stored == trial.delivered + trial.warmup, trial
        if "transactional" in trial.setup:
            assert trial.transactions >= 1
    for size in (100, 1024):
        assert len(m.rates(BASELINE, size)) == 2
        m.overhead("transactional (100 ms)", size)  # paired by round: computes for every size


def test_read_committed_waits_for_the_commit(cluster1):
    direct = cluster1.direct_bootstrap
    run = run_latency(
        direct,
        direct,
        nodes=1,
        txn_lengths=[200],
        rounds=1,
        rate=200,
        seconds={200: 3.0},
        keep_topics=True,
    )
    (trial,) = run.trials
    assert trial.produced == 600
    # The first second is warm-up and left out; the rest reached both consumers.
    for iso in ISOLATIONS:
        assert len(trial.latencies_ms[iso]) == 400
        assert min(trial.latencies_ms[iso]) >= 0
    assert count_in_topic(direct, trial.topic) == 600
    # A message of a 200 ms transaction waits on average ~100 ms for the commit marker.
    assert trial.pct("read_committed", 50) > trial.pct("read_uncommitted", 50)


def test_yardsticks_each_send_everything(cluster1):
    direct = cluster1.direct_bootstrap
    run = run_yardsticks(
        direct,
        cluster1.proxied_bootstrap,
        nodes=1,
        count=1500,
        each_count=100,
        rounds=1,
        contenders=[BARE, BARE_PROXY, ENGINE_BATCH, ENGINE_EACH, PERF_TEST],
        keep_topics=True,
    )
    expected = {ENGINE_EACH: 100}
    for contender, rates in run.rates.items():
        assert len(rates) == 1 and rates[0] > 0, contender
        (topic,) = run.topics[contender]
        assert count_in_topic(direct, topic) == expected.get(contender, 1500), contender
    assert run.ratio(ENGINE_BATCH, BARE).median > 0


def test_the_quick_run_fits_the_page(cluster1):
    result = run_quick(cluster1, messages=300, rounds=1, warmup=30)
    assert result.matrix.sizes == [1024]
    assert result.latency.txn_lengths() == [100]
    assert result.yardsticks is not None
    assert set(result.yardsticks.rates) == {BARE, ENGINE_BATCH, BARE_PROXY}
    assert result.conditions["nodes"] == 1
    assert all(t.warmup == 30 and t.delivered == 300 for t in result.matrix.trials)
