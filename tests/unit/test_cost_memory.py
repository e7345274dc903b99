"""The memory sampler: process trees from /proc and the peak of the sum."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from engine.cost.memory import Sampler, children_map, rss_kib, tree


def test_tree_follows_children_down():
    kids = {1: [2, 3], 3: [4], 4: [5], 9: [10]}
    assert sorted(tree(1, kids)) == [1, 2, 3, 4, 5]
    assert tree(7, kids) == [7]


def test_a_child_process_is_in_our_tree_and_counted():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        assert child.pid in tree(os.getpid(), children_map())
        sampler = Sampler(
            {
                "me": lambda kids: {os.getpid()},
                "child": lambda kids: set(tree(child.pid, kids)),
            }
        )
        sampler.sample()
        sampler.sample()
        peak = sampler.peak
        assert peak.samples == 2
        assert peak.rss["me"] >= rss_kib(os.getpid()) / 1024 * 0.5 > 0
        assert peak.rss["child"] > 0
        assert peak.rss["total"] >= max(peak.rss["me"], peak.rss["child"])
        assert 0 < peak.pss["total"] <= peak.rss["total"] + 1
    finally:
        child.kill()
        child.wait()


def test_a_vanished_process_counts_as_nothing():
    assert rss_kib(2**22 + 12345) == 0
