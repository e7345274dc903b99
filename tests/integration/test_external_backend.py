"""The external backend: a cluster the lab does not own, with faults through its proxy.

The "external" cluster here is the session's 1-node cluster reached at its DIRECT listener,
which advertises its own address, as any cluster the lab did not configure would.
"""

from __future__ import annotations

import pytest

from engine.base.errors import ClusterError, UnsupportedFaultError
from engine.cluster.embedded import pid_alive
from engine.cluster.external import ExternalCluster
from engine.kafka import admin
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario

pytestmark = pytest.mark.kafka


def test_external_cluster_runs_a_scenario_with_real_proxy_faults(cluster1):
    external = ExternalCluster(cluster1.direct_bootstrap)
    external.start()
    try:
        assert (
            external.proxied_bootstrap and external.proxied_bootstrap != cluster1.direct_bootstrap
        )
        # Metadata through the proxy names only the proxy's own listeners.
        view = admin.describe(external.proxied_bootstrap)
        assert cluster1.direct_bootstrap not in view.brokers.values()
        attached = ExternalCluster.attach()
        assert attached.proxied_bootstrap == external.proxied_bootstrap

        scenario = load_scenario(list_scenarios()["ack-loss"])
        output = run_scenario(scenario, attached, levels=["at-least-once", "exactly-once"])
        assert output["results"]["at-least-once"]["duplicates"] == 1
        assert output["results"]["exactly-once"]["duplicates"] == 0
        with pytest.raises(UnsupportedFaultError, match="does not own its brokers"):
            attached.kill_node(1)
    finally:
        external.stop()
    assert not pid_alive(external.proxy.pid)


def test_unreachable_external_cluster_is_a_clear_error():
    with pytest.raises(ClusterError, match=r"No Kafka broker answered at 127\.0\.0\.1:1 "):
        ExternalCluster("127.0.0.1:1").start(timeout=3)
