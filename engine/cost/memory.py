"""Peak memory of the whole stack: the 3-node cluster, Spark and the dashboard, under load.

Every 0.5 s the sampler reads, from /proc, the resident set size (RSS) and the proportional
set size (PSS, which splits pages shared between processes) of every process of each part:

- cluster: the three Kafka JVMs and the fault proxy;
- spark: the dashboard's SparkSession JVM (app.py starts it in the background; the Metrics
  page computes a run's metrics with it);
- dashboard: `streamlit run app.py` and its other children: the role processes of a run.

Meanwhile a headless browser runs the Failure lab's default scenario on the dashboard, opens
the Metrics page (Spark reads that run back from Kafka), then other pages; the browser itself
is the audience's and is not counted. Before that, 50,000 × 1 KB messages go through the
proxy into the cluster, so the brokers hold a loaded page cache and warm heaps.

The peak of the sum is what the machine must hold at once. RSS counts shared pages in each
process, so its sum overstates; PSS does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.cluster.embedded import EmbeddedCluster
from engine.commands.dashboard import serve_dashboard, stop_group
from engine.cost.throughput import BenchmarkError, new_topic, produce_trial, setups

Progress = Callable[[str, float], None]
GIB = 1024.0


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0
    return 0


def rss_kib(pid: int) -> int:
    return _status_kib(pid, "VmRSS:")


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0
    return 0


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree(pid: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    """`pid` and all its descendants."""
    kids = kids if kids is not None else children_map()
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += kids.get(current, [])
    return out


@dataclass
class Peak:
    """Peak MiB of each part and of the sum, by RSS and by PSS."""

    rss: dict[str, float] = field(default_factory=dict)
    pss: dict[str, float] = field(default_factory=dict)
    samples: int = 0


class Sampler(threading.Thread):
    """Samples the memory of named groups of process trees until stopped."""

    def __init__(
        self, groups: dict[str, Callable[[dict[int, list[int]]], set[int]]], every_s: float = 0.5
    ) -> None:
        super().__init__(daemon=True, name="memory-sampler")
        self.groups = groups
        self.every_s = every_s
        self.peak = Peak()
        self._stop_event = threading.Event()

    def sample(self) -> None:
        kids = children_map()
        total_rss = total_pss = 0.0
        for name, members in self.groups.items():
            pids = members(kids)
            rss = sum(rss_kib(p) for p in pids) / 1024
            pss = sum(pss_kib(p) for p in pids) / 1024
            self.peak.rss[name] = max(self.peak.rss.get(name, 0.0), rss)
            self.peak.pss[name] = max(self.peak.pss.get(name, 0.0), pss)
            total_rss, total_pss = total_rss + rss, total_pss + pss
        self.peak.rss["total"] = max(self.peak.rss.get("total", 0.0), total_rss)
        self.peak.pss["total"] = max(self.peak.pss.get("total", 0.0), total_pss)
        self.peak.samples += 1

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.every_s)

    def stop(self) -> Peak:
        self._stop_event.set()
        self.join(10)
        return self.peak


def start_dashboard(state_dir: Path) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free port, adopting the cluster recorded in `state_dir`."""
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(state_dir),
        "LAB_AUTOSTART": "1",  # adopts the running cluster (current.json) instead of starting one
        "LAB_RUNS_DIR": str(state_dir.parent / "runs"),  # the browser's run stays out of runs/
        "LAB_SPARK_AUTOSTART": "1",
    }
    return serve_dashboard(env)


def open_pages(url: str, pages: list[str], notes: dict[str, object]) -> None:
    """In headless Chromium: open the dashboard, run the Failure lab's first scenario, and
    visit `pages`. Notes what happened (the browser is optional: no Chromium, no session)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        notes["browser session"] = "no Chromium: the dashboard served no session"
        return
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            tab = browser.new_page()
            tab.set_default_timeout(120_000)
            tab.goto(url)
            tab.get_by_role("heading", name="Kafka failure lab").wait_for()
            tab.goto(f"{url}/failure_lab")
            tab.get_by_role("heading", name="Failure lab").wait_for()
            tab.get_by_text("node 1: running").wait_for()
            tab.get_by_role("button", name="▶ Run").click()
            tab.get_by_text("Done: run").wait_for(timeout=240_000)
            tab.goto(f"{url}/metrics")
            try:
                tab.get_by_text("Spark's counts equal the engine's checker").wait_for(
                    timeout=300_000
                )
                notes["spark computed the run's metrics"] = True
            except Exception as exc:
                notes["spark computed the run's metrics"] = f"no: {str(exc)[:120]}"
            for page in pages:
                tab.goto(f"{url}/{page}")
                tab.wait_for_timeout(3000)
            browser.close()
        notes["browser session"] = "ran the Failure lab's default scenario, Metrics, " + ", ".join(
            pages
        )
    except Exception as exc:  # the memory figure stands without it; say what was missed
        notes["browser session"] = f"incomplete: {exc}"


def is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


def whole_stack(
    cluster: EmbeddedCluster,
    state_dir: Path,
    *,
    messages: int = 50_000,
    progress: Progress | None = None,
) -> tuple[Peak, dict[str, object]]:
    """Run the dashboard (with its Spark) beside a loaded 3-node cluster; the peak memory."""
    report = progress or (lambda _what, _fraction: None)
    cluster_pids = [n.pid for n in cluster.nodes() if n.pid]
    if cluster.proxy and cluster.proxy.pid:
        cluster_pids.append(cluster.proxy.pid)
    report("starting the dashboard", 0.0)
    server, url = start_dashboard(state_dir)

    def dashboard_tree(kids: dict[int, list[int]]) -> set[int]:
        return set(tree(server.pid, kids))

    sampler = Sampler(
        {
            "cluster": lambda kids: {p for root in cluster_pids for p in tree(root, kids)},
            "spark": lambda kids: {p for p in dashboard_tree(kids) if is_java(p)},
            "dashboard": lambda kids: {p for p in dashboard_tree(kids) if not is_java(p)},
        }
    )
    sampler.start()
    notes: dict[str, object] = {}
    browser = threading.Thread(
        target=open_pages, args=(url, ["log_views", "cost", "replay"], notes), daemon=True
    )
    try:
        report(f"producing {messages:,} x 1 KB through the proxy", 0.1)
        topic = new_topic(cluster.direct_bootstrap, "cost-mem", 3, 3)
        baseline = next(s for s in setups() if s.label == "at-least-once")
        assert cluster.proxied_bootstrap is not None
        produce_trial(cluster.proxied_bootstrap, topic, baseline, 1024, messages)
        notes["messages"] = messages
        report("a browser runs a scenario, then the Metrics page (Spark), on the dashboard", 0.3)
        browser.start()
        browser.join(900)
        time.sleep(2)  # one more sample while everything is still up
    finally:
        peak = sampler.stop()
        stop_group(server)
    report("done", 1.0)
    notes["samples"] = peak.samples
    if not peak.rss.get("spark"):
        raise BenchmarkError(
            "The dashboard started no Spark JVM during the memory test; check that app.py "
            "calls autostart_spark() and that LAB_SPARK_AUTOSTART is not 0."
        )
    return peak, notes
