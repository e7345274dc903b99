"""Soak: every scenario run again and again on one cluster; nothing may grow or drift.

    .venv/bin/python -m benchmarks.soak [--repeats 20] [--scenarios a,b] [--keep-runs 30]

Per scenario it checks that every run keeps the promises of its file (`expect`), that the
counts stay the same across repeats where the scenario is
deterministic, and it samples, after every round: this process's open file descriptors,
the number of live processes in its session (clients, proxy, JVMs), the RSS of the whole
stack, and the disk use of runs/ (which LAB_KEEP_RUNS keeps bounded by pruning old runs).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from engine.base import paths
from engine.cluster.embedded import EmbeddedCluster
from engine.run.runner import run_scenario
from engine.scenarios.scenario import list_scenarios, load_scenario

COUNTS = ("delivered", "duplicates", "lost", "reordered", "fenced", "aborted_visible")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def stack_rss_mib(clusters: list[EmbeddedCluster]) -> float:
    pids = [os.getpid()] + [n.pid for c in clusters for n in c.nodes() if n.pid]
    pids += [c.proxy.pid for c in clusters if c.proxy and c.proxy.pid]
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def live_children() -> int:
    """Processes whose parent is this one (role processes left behind would show here)."""
    me = str(os.getpid())
    count = 0
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] not in ("Z", "X"):
                count += 1
    return count


def runs_disk_mib() -> float:
    root = paths.runs_dir()
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--keep-runs", type=int, default=30)
    args = parser.parse_args()
    os.environ.setdefault("LAB_STATE_DIR", tempfile.mkdtemp(prefix="lab-soak-"))
    os.environ.setdefault("LAB_RUNS_DIR", tempfile.mkdtemp(prefix="lab-soak-runs-"))
    os.environ["LAB_KEEP_RUNS"] = str(args.keep_runs)
    chosen = [s for s in args.scenarios.split(",") if s] or list(list_scenarios())
    scenarios = {name: load_scenario(list_scenarios()[name]) for name in chosen}
    clusters = {
        n: EmbeddedCluster(f"soak-{n}", node_count=n)
        for n in sorted({s.nodes for s in scenarios.values()})
    }
    for cluster in clusters.values():
        cluster.start(timeout=240)
    outcomes: dict[str, Counter] = defaultdict(Counter)
    broken: Counter[str] = Counter()  # runs whose results broke the file's `expect` block
    samples = []
    began = time.monotonic()
    try:
        for round_no in range(1, args.repeats + 1):
            for name, scenario in scenarios.items():
                output = run_scenario(scenario, clusters[scenario.nodes])
                key = tuple(
                    (lv, tuple(r[c] for c in COUNTS)) for lv, r in sorted(output["results"].items())
                )
                outcomes[name][key] += 1
                for problem in scenario.unmet_expectations(output["results"]):
                    broken[name] += 1
                    print(f"  {name}: promise broken: {problem}", flush=True)
            samples.append(
                (
                    round_no,
                    open_fds(),
                    live_children(),
                    stack_rss_mib(list(clusters.values())),
                    runs_disk_mib(),
                    time.monotonic() - began,
                )
            )
            print(
                f"round {round_no}: fds={samples[-1][1]} children={samples[-1][2]} "
                f"rss={samples[-1][3]:.0f} MiB runs={samples[-1][4]:.1f} MiB "
                f"t={samples[-1][5]:.0f}s",
                flush=True,
            )
    finally:
        for cluster in clusters.values():
            cluster.stop()
    print("\n| scenario | repeats | distinct outcomes | most common share | promises broken |")
    print("|---|---|---|---|---|")
    for name, counter in outcomes.items():
        total = sum(counter.values())
        share = counter.most_common(1)[0][1] / total
        print(f"| {name} | {total} | {len(counter)} | {share:.0%} | {broken[name]} |")
    first, last = samples[0], samples[-1]
    print("\n| sample | open fds | child processes | stack RSS (MiB) | runs/ (MiB) |")
    print("|---|---|---|---|---|")
    for label, s in (("after round 1", first), (f"after round {last[0]}", last)):
        print(f"| {label} | {s[1]} | {s[2]} | {s[3]:.0f} | {s[4]:.1f} |")


if __name__ == "__main__":
    main()
