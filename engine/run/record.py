"""Recorded runs under runs/RUN_ID/: everything needed to replay a run without Kafka.

runs/RUN_ID/
  run.json              status (running, complete, failed, interrupted), reason, times,
                        levels, and the owner (pid:start) of a run that is going on
  scenario.yaml         the scenario exactly as it was run
  config.json           the validated scenario, the cluster, each level's client settings
  result.json           the `engine run --json` object
  metrics.json          the same object computed by Spark (`engine metrics`), once computed
  levels/LEVEL/         history.jsonl (every event, merged), verdicts.json, stored.json
                        (what was read back), settings.json (how the level ran): with the
                        history, engine.judging.judge's three inputs, so a level can be judged
                        again offline (load_judged_inputs); and each client's own history
                        (PROCESS_HISTORY), spec and log, nemesis.jsonl and outbox.jsonl

This module is the folder's one owner: the file names are known here only (a unit test,
tests/unit/test_house.py, keeps it so).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml

from engine.base import paths, settings
from engine.base.errors import LabError
from engine.judging.checker import Verdict, verdicts_to_rows
from engine.judging.judge import LevelResult, LevelSettings, ReadBack
from engine.model.history import HistoryLine, merge, write_columns
from engine.model.levels import LEVELS
from engine.proc import leash

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# The run folder's layout: its file names are known here only; every other module asks.
RUN_META = "run.json"
SCENARIO_FILE = "scenario.yaml"
CONFIG = "config.json"
RESULT = "result.json"
METRICS = "metrics.json"
LEVELS_DIR = "levels"
# In levels/LEVEL/: written at the end, from every process's own history file.
HISTORY = "history.jsonl"
# The same history's fields that Spark reads, as Parquet (engine.model.history.write_columns).
HISTORY_COLUMNS = "history.parquet"
VERDICTS = "verdicts.json"
STORED = "stored.json"  # what was read back (engine.judging.judge.ReadBack)
LEVEL_SETTINGS = "settings.json"  # how the level was run (engine.judging.judge.LevelSettings)
# In levels/LEVEL/, written during the run: the nemesis's own history, and the producing
# application's record of sends and acks (engine.roles.producer).
NEMESIS_HISTORY = "nemesis.jsonl"
OUTBOX = "outbox.jsonl"
# The application's record of which instance owns a transactional.id (engine.roles.common).
PRODUCER_OWNER = "producer-owner.txt"
PROCESSOR_OWNER = "processor-owner.txt"
# One process's own history in levels/LEVEL/ (process_history names them): history.jsonl
# (every event merged, at the end) and outbox.jsonl (the producer's application record)
# are not, and would count events twice.
PROCESS_HISTORY = re.compile(r"(producer|processor|sink|source|nemesis)(-\d+)?\.jsonl")


class RunNotFoundError(LabError):
    pass


class CorruptRunError(LabError):
    pass


def validate_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(run_id) or ".." in run_id:
        raise RunNotFoundError(
            f"'{run_id}' is not a run id (letters, digits, dots, dashes and underscores)."
        )
    return run_id


def run_folder(run_id: str) -> Path:
    return paths.runs_dir() / validate_run_id(run_id)


def level_folder(folder: Path, level: str) -> Path:
    """A level's folder in a run folder (levels/LEVEL/)."""
    return folder / LEVELS_DIR / level


def process_history(level_dir: Path, instance: str) -> Path:
    """Where a process instance (`producer`, `processor#2`) writes its own history."""
    return level_dir / f"{instance.replace('#', '-')}.jsonl"


def write_history(level_dir: Path, history: list[dict[str, Any]]) -> None:
    """A level's merged history as history.jsonl, and the Parquet copy Spark reads."""
    (level_dir / HISTORY).write_text("".join(json.dumps(e) + "\n" for e in history))
    write_columns(history, level_dir / HISTORY_COLUMNS)


def write_judge_inputs(
    level_dir: Path, history: list[dict[str, Any]], read: ReadBack, settings: LevelSettings
) -> None:
    """Keep what a level is judged from (engine.judging.judge.judge's arguments), before it
    is judged: a level whose judgement fails can be judged again offline (load_judged_inputs)."""
    write_history(level_dir, history)
    (level_dir / STORED).write_text(json.dumps(read.to_json()))
    (level_dir / LEVEL_SETTINGS).write_text(json.dumps(settings.to_json()))


def write_verdicts(level_dir: Path, verdicts: list[Verdict]) -> None:
    """A level's verdicts, once it was judged."""
    (level_dir / VERDICTS).write_text(json.dumps(verdicts_to_rows(verdicts)))


def read_history(level_dir: Path) -> list[dict[str, Any]]:
    """A level's merged history.jsonl (written before the level was judged)."""
    return [json.loads(line) for line in (level_dir / HISTORY).read_text().splitlines() if line]


def load_judged_inputs(
    level_dir: Path,
) -> tuple[list[dict[str, Any]], ReadBack, LevelSettings]:
    """(history, what was read back, how the level ran): engine.judging.judge.judge's arguments.

    Only a level recorded since the judge kept its settings (settings.json) has them all.
    """
    try:
        return (
            read_history(level_dir),
            ReadBack.from_json(json.loads((level_dir / STORED).read_text())),
            LevelSettings.from_json(json.loads((level_dir / LEVEL_SETTINGS).read_text())),
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CorruptRunError(
            f"The level folder {level_dir} cannot be judged again ({type(exc).__name__}: "
            f"{exc}); a run recorded before the judge kept settings.json cannot."
        ) from exc


def _write_json(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """Write atomically: a full disk or a crash leaves the old file, never half a new one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=indent, sort_keys=True, default=str))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LabError(
            f"Could not write {path} ({exc.strerror}). Free some disk space; earlier runs are "
            "untouched."
        ) from exc


def create_run_folder(run_id, scenario, source_text, cluster, levels: list[str]) -> Path:
    folder = run_folder(run_id)
    folder.mkdir(parents=True, exist_ok=False)
    text = source_text or yaml.safe_dump(scenario.model_dump(), sort_keys=False)
    (folder / SCENARIO_FILE).write_text(text)
    _write_json(
        folder / CONFIG,
        {
            "scenario": scenario.model_dump(),
            "levels": {
                name: {
                    "producer": LEVELS[name].producer,
                    "consumer": LEVELS[name].sink_config(scenario.sink_isolation),
                    "commit": LEVELS[name].commit,
                }
                for name in levels
            },
            "cluster": {
                "backend": cluster.backend,
                "nodes": cluster.node_ids,
                "kafka_version": cluster.kafka_version,
                "direct_bootstrap": cluster.direct_bootstrap,
                "proxied_bootstrap": cluster.proxied_bootstrap,
            },
        },
    )
    _write_json(
        folder / RUN_META,
        {
            "run_id": run_id,
            "scenario": scenario.name,
            "status": "running",
            "levels": levels,
            "started_at": time.time(),
            # Who runs it: a run whose owner is gone while it is "running" was interrupted.
            "owner": leash.owner_token(),
        },
    )
    return folder


def finish_run(
    folder: Path,
    *,
    status: str,
    results: dict[str, LevelResult],
    reason: str | None = None,
    not_run: dict[str, str] | None = None,
) -> None:
    """Record how a run ended; `not_run` names levels that could not run, with the reason."""
    meta = json.loads((folder / RUN_META).read_text())
    meta.update(status=status, reason=reason, finished_at=time.time())
    if not_run:
        meta["not_run"] = not_run
    _write_json(
        folder / RESULT,
        run_output(meta["run_id"], meta["scenario"], results),
    )
    _write_json(folder / RUN_META, meta)


def run_output(
    run_id: str,
    scenario: str,
    results: dict[str, LevelResult],
    not_run: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The `engine run --json` object (and result.json): each level's result as JSON."""
    output: dict[str, Any] = {
        "run_id": run_id,
        "scenario": scenario,
        "results": {name: result.to_json() for name, result in results.items()},
    }
    if not_run:
        output["not_run"] = not_run
    return output


@dataclass(frozen=True)
class RecordedLevel:
    """One level of a recorded run: the judge's verdicts, what was read back, the history."""

    verdicts: list[dict[str, Any]]
    stored: dict[str, Any]  # engine.judging.judge.ReadBack, as saved
    history: list[dict[str, Any]]


def judged_levels(result: dict[str, Any]) -> dict[str, LevelResult]:
    """Each level's result in an `engine run --json` object (result.json), typed, in its
    order; CorruptRunError if one cannot be read back."""
    try:
        return {
            level: LevelResult.from_json(level, data)
            for level, data in (result.get("results") or {}).items()
        }
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CorruptRunError(
            f"The result of run '{result.get('run_id', '?')}' is damaged "
            f"({type(exc).__name__}: {exc}); other runs are fine. Delete its folder, or run "
            "the scenario again."
        ) from exc


@dataclass(frozen=True)
class RecordedRun:
    """A recorded run as the pages and tests read it (load_run): run.json's meta, the
    result (`engine run --json`'s object), each judged level, the scenario as it was run
    and config.json (empty when unreadable). The pages draw each level's result from
    `levels_judged`, typed; `results` is the same as result.json holds it."""

    meta: dict[str, Any]
    result: dict[str, Any]
    levels: dict[str, RecordedLevel]
    scenario_text: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id", ""))

    @property
    def results(self) -> dict[str, Any]:
        """Each level's judged result as result.json holds it (JSON), by level."""
        return self.result.get("results") or {}

    @cached_property
    def levels_judged(self) -> dict[str, LevelResult]:
        """Each level's judged result, typed (read once), by level in result.json's order."""
        return judged_levels(self.result)

    @property
    def kafka_version(self) -> str | None:
        return kafka_version_of(self.config)


def load_run(run_id: str) -> RecordedRun:
    """The recorded run: meta, result, and each level's verdicts, history and stored records."""
    folder = run_folder(run_id)
    if not folder.is_dir():
        raise RunNotFoundError(
            f"There is no run '{run_id}' in {paths.runs_dir()}. `python -m engine runs` lists them."
        )
    try:
        meta = json.loads((folder / RUN_META).read_text())
        result = (
            json.loads((folder / RESULT).read_text())
            if (folder / RESULT).exists()
            else {"results": {}}
        )
        levels = {}
        for name in result.get("results", {}):
            level_dir = level_folder(folder, name)
            levels[name] = RecordedLevel(
                verdicts=json.loads((level_dir / VERDICTS).read_text()),
                stored=json.loads((level_dir / STORED).read_text()),
                history=read_history(level_dir),
            )
        scenario_text = (folder / SCENARIO_FILE).read_text()
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        raise CorruptRunError(
            f"The run folder {folder} is damaged ({type(exc).__name__}: {exc}); other runs are "
            "fine. Delete that folder, or run the scenario again."
        ) from exc
    run = RecordedRun(meta, result, levels, scenario_text, _read_config(folder))
    _ = run.levels_judged  # read now: a level's damaged result is said here, not on a page
    return run


def _stamp(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def saved_stamp(run_id: str, which: Literal["result", "metrics"]) -> float | None:
    """When a run's result.json or metrics.json was last written (None: not there): the
    version a page's shared cache parses once."""
    name = {"result": RESULT, "metrics": METRICS}[which]
    return _stamp(run_folder(run_id) / name)


def runs_signature() -> tuple[tuple[str, float | None], ...]:
    """(run id, run.json's stamp) for every run folder: list_runs changes only with it."""
    root = paths.runs_dir()
    folders = sorted(root.iterdir()) if root.is_dir() else []
    return tuple((f.name, _stamp(f / RUN_META)) for f in folders if f.is_dir())


def level_events(run_id: str, level: str) -> list[HistoryLine]:
    """Every event a level's processes wrote so far, merged in time order (an interrupted
    run's, which has no merged history.jsonl)."""
    return merge(sorted(level_folder(run_folder(run_id), level).glob("*.jsonl")))


def _read_config(folder: Path) -> dict[str, Any]:
    """The run's config.json (the scenario as run, each level's settings); {} if unreadable."""
    try:
        return json.loads((folder / CONFIG).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def kafka_version_of(config: dict[str, Any]) -> str | None:
    """The Kafka version a run's cluster ran, from its config.json; None if not recorded."""
    return (config.get("cluster") or {}).get("kafka_version") or None


def run_kafka_version(run_id: str) -> str | None:
    """The Kafka version the run was made on (Metrics and Replay name it)."""
    return kafka_version_of(_read_config(run_folder(run_id)))


def run_status(run_id: str) -> str:
    """ "running", "complete", "failed" or "interrupted" from run.json; "missing" when it
    cannot be read."""
    try:
        return str(json.loads((run_folder(run_id) / RUN_META).read_text())["status"])
    except (OSError, json.JSONDecodeError, KeyError):
        return "missing"


def load_result(run_id: str) -> dict[str, Any]:
    """The run's result.json alone (no histories or verdicts); {"results": {}} before it ends."""
    folder = run_folder(run_id)
    if not folder.is_dir():
        raise RunNotFoundError(f"There is no run '{run_id}' in {paths.runs_dir()}.")
    path = folder / RESULT
    try:
        return json.loads(path.read_text()) if path.exists() else {"results": {}}
    except (OSError, json.JSONDecodeError) as exc:
        raise CorruptRunError(f"The run file {path} is damaged ({exc}).") from exc


def load_judged(run_id: str) -> dict[str, LevelResult]:
    """The run's result.json alone, each level's result typed; {} before the run ends."""
    return judged_levels(load_result(run_id))


def save_metrics(run_id: str, output: dict[str, Any], *, source: str) -> None:
    """Keep Spark's metrics of a run beside it, so charts across runs need no recomputing."""
    folder = run_folder(run_id)
    if not folder.is_dir():
        raise RunNotFoundError(f"There is no run '{run_id}' in {paths.runs_dir()}.")
    # Without indent: metrics.json holds the verdict table (12,000 rows for a class's run),
    # and json.dumps uses its C encoder only without one (0.06 s here, against 0.18 s).
    data = {**output, "source": source, "computed_at": time.time()}
    _write_json(folder / METRICS, data, indent=None)


def load_metrics(run_id: str) -> dict[str, Any] | None:
    """Spark's saved metrics of a run, or None if they were never computed (or are damaged)."""
    path = run_folder(run_id) / METRICS
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


# A run recorded before runs named their owner is taken as interrupted when nothing in its
# folder has changed for this long.
UNOWNED_IDLE_S = 300.0


def _last_write(folder: Path) -> float:
    """The newest modification time of any file in the run's folder: about when it stopped."""
    newest = 0.0
    for path in folder.rglob("*"):
        try:
            newest = max(newest, path.stat().st_mtime)
        except OSError:
            continue
    return newest


def owner_gone(meta: dict[str, Any], folder: Path | None = None) -> bool:
    """Whether a "running" run has lost the process that ran it (a crash, a SIGKILL)."""
    if meta.get("status") != "running":
        return False
    owner = meta.get("owner")
    if owner:
        return not leash.process_alive(str(owner))
    folder = folder or run_folder(str(meta.get("run_id", "")))
    return time.time() - _last_write(folder) > UNOWNED_IDLE_S


def recorded_events(folder: Path | str) -> dict[str, dict[str, int]]:
    """Each level's event lines written so far, by history file (client or nemesis); the
    folder or the run's id."""
    folder = run_folder(folder) if isinstance(folder, str) else folder
    recorded: dict[str, dict[str, int]] = {}
    for level_dir in sorted((folder / LEVELS_DIR).glob("*")):
        counts = {}
        for history in sorted(level_dir.glob("*.jsonl")):
            try:
                with history.open("rb") as lines:
                    counts[history.stem] = sum(1 for line in lines if line.strip())
            except OSError:
                continue
        if counts:
            recorded[level_dir.name] = counts
    return recorded


def mark_interrupted(folder: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Record that a run stopped with its owner: when, and what it had written by then."""
    stopped = _last_write(folder) or time.time()
    owner = str(meta.get("owner") or "").partition(":")[0]
    who = f"the process that ran it (pid {owner})" if owner else "the process that ran it"
    meta = {
        **meta,
        "status": "interrupted",
        "reason": (
            f"This run was interrupted: {who} stopped during the run, "
            f"{max(0.0, stopped - float(meta.get('started_at') or stopped)):.1f} s after it "
            "began. Nothing was judged; what the clients wrote until then is kept."
        ),
        "finished_at": stopped,
        "recorded": recorded_events(folder),
    }
    _write_json(folder / RUN_META, meta)
    return meta


def _run_metas() -> Iterator[tuple[Path, Any]]:
    """(folder, its parsed run.json, or None if unreadable) for every run folder."""
    root = paths.runs_dir()
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if not folder.is_dir() or not RUN_ID_PATTERN.fullmatch(folder.name):
            continue
        try:
            yield folder, json.loads((folder / RUN_META).read_text())
        except (OSError, json.JSONDecodeError):
            yield folder, None


def interrupt_orphaned_runs() -> list[str]:
    """Mark every "running" run whose owner is gone as interrupted; returns their ids.

    What a starting dashboard (and `engine run`, `engine runs`) does about a crashed one.
    """
    marked = []
    for folder, meta in _run_metas():
        if isinstance(meta, dict) and owner_gone(meta, folder):
            try:
                mark_interrupted(folder, meta)
            except LabError:
                continue  # a full disk: it stays "running" in its file, listed as interrupted
            marked.append(folder.name)
    return marked


def list_runs() -> list[dict[str, Any]]:
    """Every run's meta, newest first; damaged folders are listed as such, not skipped.

    A "running" run whose owner is gone is listed as "interrupted" even before a starting
    dashboard writes so into its run.json (`interrupt_orphaned_runs`).
    """
    runs = []
    for folder, meta in _run_metas():
        if meta is None:
            runs.append({"run_id": folder.name, "status": "damaged", "started_at": 0})
            continue
        if meta.get("status") == "running" and meta.get("owner") and owner_gone(meta, folder):
            meta = {**meta, "status": "interrupted"}
        runs.append(meta)
    runs.sort(key=lambda r: r.get("started_at", 0), reverse=True)
    return runs


def keep_runs_setting() -> int:
    """How many recorded runs to keep (LAB_KEEP_RUNS, default 200); older ones are pruned."""
    return settings.KEEP_RUNS.integer(minimum=1)


def prune_runs(keep: int | None = None) -> list[str]:
    """Delete all but the newest `keep` runs; returns the deleted ids."""
    keep = keep_runs_setting() if keep is None else keep
    removed = []
    for meta in list_runs()[keep:]:
        shutil.rmtree(run_folder(meta["run_id"]), ignore_errors=True)
        removed.append(meta["run_id"])
    return removed
