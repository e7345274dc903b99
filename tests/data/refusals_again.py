"""Count the refusals of every recorded run again, offline: `python -m tests.data.refusals_again`.

The checker once counted every `fenced` line as one "fenced" count; it now counts what was
refused, by kind (engine.judging.checker.count_refusals). Most recorded runs (tests/data/recorded/
runs/NAME.tar.gz) predate the judge's settings.json and cannot be judged again whole, but
their histories and the proxy's records are kept: this counts each level's refusals from
them, puts the counts in the level's result in place of the old `fenced`, and says the
headline again from the recorded verdicts with the new counts (engine.judging.explain). Every
other recorded number is left as the run recorded it. It rewrites result.json inside each
archive and tests/data/recorded/NAME.json alike, so the two still agree.
"""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from engine.judging.checker import LevelCounts, Verdict, count_refusals
from engine.judging.explain import explain
from engine.run import record
from tests.data.record import HERE, RUNS

# judge() adds the database's sentence to the idempotency-key level's headline.
DATABASE = "; the database applied "


def proxy_faults(level_dir: Path, result: dict[str, Any]) -> list[dict[str, Any]]:
    """What the fault proxy saw of the level: stored.json's copy, else the result's faults."""
    stored = json.loads((level_dir / record.STORED).read_text())
    if "proxy_faults" in stored:
        return list(stored["proxy_faults"])
    return [f for f in result.get("faults", []) if f.get("source") == "proxy"]


def counted_again(level: str, level_dir: Path, result: dict[str, Any], pipeline: str) -> None:
    """The level's result with its refusals counted by kind and its headline said again."""
    history = record.read_history(level_dir)
    refusals = count_refusals(history, proxy_faults(level_dir, result))
    fields = LevelCounts.__dataclass_fields__
    counts = LevelCounts(**{k: v for k, v in result.items() if k in fields})
    counts = replace(counts, **asdict(refusals), fenced=refusals.total)
    verdicts = [Verdict(**v) for v in json.loads((level_dir / record.VERDICTS).read_text())]
    headline = explain(level, pipeline, history, counts, verdicts).headline
    old = result["explain"]["headline"]
    if DATABASE in old:
        headline += DATABASE + old.split(DATABASE, 1)[1]
    result.update(asdict(refusals), fenced=refusals.total)
    result["explain"]["headline"] = headline
    if headline != old:
        print(f"  {level}: {old!r}\n  {' ' * len(level)}  -> {headline!r}", file=sys.stderr)


def main() -> int:
    for archive_path in sorted(RUNS.glob("*.tar.gz")):
        name = archive_path.name.removesuffix(".tar.gz")
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(archive_path) as archive:
                archive.extractall(tmp, filter="data")
                run_id = archive.getnames()[0].split("/")[0]
            folder = Path(tmp) / run_id
            output = json.loads((folder / record.RESULT).read_text())
            config = json.loads((folder / record.CONFIG).read_text())
            pipeline = config["scenario"].get("pipeline", "producer")
            print(name, file=sys.stderr)
            for level, result in output["results"].items():
                counted_again(level, record.level_folder(folder, level), result, pipeline)
            text = json.dumps(output, indent=1, sort_keys=True)
            (folder / record.RESULT).write_text(text)
            (HERE / f"{name}.json").write_text(text)
            with tarfile.open(archive_path, "w:gz") as archive:
                archive.add(folder, arcname=run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
