"""Spark's verdict table of a run: in metrics.json for a class's runs, in Parquet for big ones.

A run of a few thousand messages keeps its table (one row per level and ledger id) in
metrics.json, where the pages read it whole. A big run's table is never collected into
Python: above `rows_in_memory()` rows, Spark writes it to runs/RUN_ID/verdicts.parquet/
(one folder per level, part files in id order) and the Metrics page reads one page at a
time with pyarrow, scanning batches instead of loading the table.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.base import settings
from engine.run import record

if TYPE_CHECKING:
    import pandas as pd

    from engine.metrics.summary import Judged

PARQUET_DIR = "verdicts.parquet"
# Rows per Parquet part file: a page of the table reads a few of them at most.
ROWS_PER_FILE = 1_000_000


def rows_in_memory() -> int:
    """The most verdict rows (levels x messages) kept in metrics.json (LAB_VERDICT_ROWS)."""
    return settings.VERDICT_ROWS.integer(minimum=0)


def verdict_fields(judged: Judged, run_id: str) -> dict[str, Any]:
    """What metrics.json holds of the table: the rows, or where the Parquet copy is.

    Returns {"verdicts": {level: rows}} for a small run; for a big one
    {"verdicts": None, "verdicts_parquet": PARQUET_DIR} after writing the table beside
    the run (replacing an earlier copy).
    """
    from engine.metrics.summary import verdict_rows

    rows = judged.messages * len(judged.levels)
    if rows <= rows_in_memory():
        return {"verdicts": verdict_rows(judged)}
    target = record.run_folder(run_id) / PARQUET_DIR
    if target.exists():
        shutil.rmtree(target)
    files = max(1, math.ceil(rows / ROWS_PER_FILE))
    (
        judged.verdicts()
        # Range partitions by (level, id) are written as part files in that order.
        .repartitionByRange(files, "level", "id")
        .sortWithinPartitions("level", "id")
        .write.partitionBy("level")
        .parquet(str(target))
    )
    return {"verdicts": None, "verdicts_parquet": PARQUET_DIR}


@dataclass(frozen=True)
class VerdictPage:
    rows: pd.DataFrame  # the checker's columns, in id order
    first: int  # the 0-based position of rows[0] among the matching rows
    total: int  # how many rows of the level match the chosen verdicts


def _level_dataset(run_id: str, level: str) -> Any:
    import pyarrow.dataset as ds

    folder = record.run_folder(run_id) / PARQUET_DIR / f"level={level}"
    if not folder.is_dir():
        raise record.CorruptRunError(
            f"The verdict table of run {run_id} has no level {level} ({folder} is missing); "
            "compute the run's metrics again."
        )
    # Sorted part-file names keep the id order Spark wrote them in.
    return ds.dataset(sorted(str(p) for p in folder.glob("*.parquet")), format="parquet")


def verdict_kinds(run_id: str, level: str) -> list[str]:
    """The distinct verdicts of one level of a Parquet table (one column read)."""
    import pyarrow.compute as pc

    table = _level_dataset(run_id, level).to_table(columns=["verdict"])
    return sorted(pc.unique(table["verdict"]).to_pylist())


def read_page(
    run_id: str, level: str, verdicts: list[str], *, page: int, page_size: int
) -> VerdictPage:
    """Page `page` (0-based) of a level's rows whose verdict is in `verdicts`.

    Scans record batches and keeps only the page's rows, so memory stays at a page and a
    batch whatever the table's size.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds

    dataset = _level_dataset(run_id, level)
    wanted = ds.field("verdict").isin(verdicts)
    total = dataset.count_rows(filter=wanted)
    first = max(0, min(page, max(0, math.ceil(total / page_size) - 1))) * page_size
    taken: list[pa.RecordBatch] = []
    seen = 0
    for batch in dataset.to_batches(filter=wanted, batch_size=64 * 1024):
        if seen + batch.num_rows > first:
            start = max(0, first - seen)
            taken.append(batch.slice(start, page_size - sum(b.num_rows for b in taken)))
            if sum(b.num_rows for b in taken) >= page_size:
                break
        seen += batch.num_rows
    frame = (
        pa.Table.from_batches(taken, schema=dataset.schema).to_pandas()
        if taken
        else pd.DataFrame(columns=dataset.schema.names)
    )
    if "latency_ms" in frame:  # as verdict_rows and the checker round: Python's round
        frame["latency_ms"] = [None if pd.isna(x) else round(x, 2) for x in frame["latency_ms"]]
    if "offsets" in frame:
        frame["offsets"] = [list(x) if x is not None else [] for x in frame["offsets"]]
    return VerdictPage(rows=frame, first=first, total=total)
