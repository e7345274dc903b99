"""Record one real run of every scenario as test data: `python -m tests.data.record [NAME...]`.

Each run's results (the counts per level, the faults and the explanation, as `engine run
--json` prints them) go to tests/data/recorded/NAME.json. The unit tests judge the lesson
checks and `teaches` bounds against them offline (tests/unit/test_checks_can_fail.py), as
etcd keeps its robustness histories. For a few runs (JUDGED_AGAIN) what each level was
judged from is kept too, in tests/data/recorded/NAME/LEVEL/ (history.jsonl, stored.json,
settings.json: engine.run.record's level files), and tests/unit/test_judge_recorded.py judges
them again offline through engine.judging.judge.
The run's whole record (its folder under runs/, as Replay reads it) goes to
tests/data/recorded/runs/NAME.tar.gz: the page walk (tests/e2e/test_page_walk.py) draws every
scenario's real run from it without running it. It starts a 1-node cluster for the 1-node scenarios
and a 3-node one for the rest, and stops each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

from engine.base import paths
from engine.run import record
from engine.scenarios.scenario import list_scenarios, load_scenario

HERE = Path(__file__).parent / "recorded"
RUNS = HERE / "runs"  # each recorded run's folder, as NAME.tar.gz

# Control runs: a scenario without its faults, the case a bound contrasts with where no
# other level or scenario shows it failing (nothing to absorb without a lost ack).
CONTROLS = {"ack-loss-without-faults": "ack-loss"}

# Runs kept whole enough to be judged again: a proxy fault (ack-loss) and its control, a
# transactional producer read at both isolations, and a processor pipeline with a crash.
JUDGED_AGAIN = ("ack-loss", "ack-loss-without-faults", "aborted-transaction", "consumer-crash")


def keep_judged_inputs(name: str, run_dir: Path) -> None:
    """Copy each level's judged inputs (engine.run.record's level files) to recorded/NAME/."""
    target = HERE / name
    shutil.rmtree(target, ignore_errors=True)
    for level_dir in sorted((run_dir / record.LEVELS_DIR).iterdir()):
        (target / level_dir.name).mkdir(parents=True)
        for file in (record.HISTORY, record.STORED, record.LEVEL_SETTINGS):
            shutil.copy(level_dir / file, target / level_dir.name / file)


def control_file(name: str, folder: Path) -> Path:
    """The control's scenario file: its scenario with no faults, no expectations."""
    data = yaml.safe_load(list_scenarios()[CONTROLS[name]].read_text())
    data.update(name=name, faults=[], expect={}, teaches={})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def lab(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=timeout
    )


def archive_run(name: str, run_id: str, runs: Path | None = None) -> Path:
    """runs/RUN_ID/ into recorded/runs/NAME.tar.gz, its top folder named by the run id."""
    RUNS.mkdir(parents=True, exist_ok=True)
    target = RUNS / f"{name}.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        archive.add((runs or paths.runs_dir()) / run_id, arcname=run_id)
    return target


def unpack_runs(into: Path) -> dict[str, str]:
    """Every archived run's folder into `into` (a runs folder); {scenario name: run id}."""
    into.mkdir(parents=True, exist_ok=True)
    unpacked = {}
    for target in sorted(RUNS.glob("*.tar.gz")):
        with tarfile.open(target) as archive:
            archive.extractall(into, filter="data")
            unpacked[target.name.removesuffix(".tar.gz")] = archive.getnames()[0].split("/")[0]
    return unpacked


def main(names: list[str]) -> int:
    chosen = {n: p for n, p in list_scenarios().items() if not names or n in names}
    folder = Path(tempfile.mkdtemp(prefix="lab-controls-"))
    runs = Path(tempfile.mkdtemp(prefix="lab-recorded-runs-"))
    os.environ["LAB_RUNS_DIR"] = str(runs)  # the runs' folders, apart from the user's
    for name in CONTROLS:
        if not names or name in names:
            chosen[name] = control_file(name, folder)
    by_nodes: dict[int, list[str]] = {}
    for name, path in chosen.items():
        by_nodes.setdefault(load_scenario(path).nodes, []).append(name)
    HERE.mkdir(parents=True, exist_ok=True)
    failed = 0
    for nodes, group in sorted(by_nodes.items()):
        lab("cluster", "down")
        up = lab("cluster", "up", "--nodes", str(nodes))
        if up.returncode:
            print(up.stderr, file=sys.stderr)
            return 2
        try:
            for name in group:
                done = lab("run", str(chosen[name]), "--json", "--quiet")
                if done.returncode:
                    print(f"{name}: {done.stderr.strip()}", file=sys.stderr)
                    failed += 1
                    continue
                results = json.loads(done.stdout)
                (HERE / f"{name}.json").write_text(json.dumps(results, indent=1, sort_keys=True))
                if name in JUDGED_AGAIN:
                    keep_judged_inputs(name, runs / results["run_id"])
                archive_run(name, results["run_id"], runs)
                print(f"{name}: recorded", file=sys.stderr)
        finally:
            lab("cluster", "down")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
