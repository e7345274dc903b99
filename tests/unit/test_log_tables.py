"""The Log views' tables show no "None" (pages/_log_common.no_none)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from pages._log_common import EMPTY, no_none


def test_empty_cells_are_dashes_and_whole_numbers_stay_whole():
    df = pd.DataFrame(
        {
            "offset": [0, 1, 2],
            "sequence": [0.0, None, 2.0],  # a gap in a whole-number column
            "key": ["a", None, "c"],
            "transaction": [None, None, 3],
            "_state": ["data", "data", "commit"],
        }
    )
    shown = no_none(df)
    cells = [str(v) for v in shown.drop(columns="_state").to_numpy().ravel()]
    assert not any(c in ("None", "nan", "<NA>") for c in cells), cells
    assert list(shown["sequence"]) == ["0", EMPTY, "2"]
    assert list(shown["key"]) == ["a", EMPTY, "c"]
    # Arrow takes every column as it is (Streamlit's fallback logs a traceback otherwise).
    pa.Table.from_pandas(shown)
    assert df["key"].isna().sum() == 1  # the caller's frame is left as it was
