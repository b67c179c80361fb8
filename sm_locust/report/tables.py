"""Writing the report's CSV files; the per-second one fast enough for a week-long run.

`merged_timeseries.csv` has one row per second: 604,800 rows and 20 to 50 columns for 7 days.
pandas' `to_csv(float_format="%.6g")` formats each number in Python (~50 s for a week here), so
`write_timeseries` hands the frame to pyarrow's C++ CSV writer instead: each float is first rounded
to six significant digits (`round_column`, vectorized: 1234.56789 -> 1234.57, 2.0000001e-05 ->
2e-05, whole numbers stay whole), and pyarrow writes each number's shortest form (`3`, `0.25`,
`1e-7` where pandas wrote `1e-07`), so the file reads back to the same values as before. Without
pyarrow the pandas writer is used. Small tables (steps, hours) keep pandas' writer (quoting of text
cells as pandas does).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from sm_locust.util.outputs import atomic_file

FLOAT_FORMAT = "%.6g"
SIGNIFICANT = 6
CHUNK_ROWS = 1 << 16


def _arrow():
    """(pyarrow, pyarrow.csv), or None when pyarrow is not installed."""
    try:  # lazy: pyarrow, optional at run time (pandas writes without it)
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    return pa, pacsv


def round_column(values: np.ndarray) -> np.ndarray:
    """Each float rounded to SIGNIFICANT significant digits, as `%.6g` prints it (whole-number columns
    are returned as they are). ~10 ms per week-long column."""
    finite = values[np.isfinite(values)]
    if not finite.size or np.array_equal(finite, np.rint(finite)):
        return values
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(np.abs(values)))
        exponent[~np.isfinite(exponent)] = 0.0
        scale = np.power(10.0, SIGNIFICANT - 1 - np.clip(exponent, -290.0, 290.0))
        return np.rint(values * scale) / scale


def write_table(frame: pd.DataFrame, path: str | Path) -> Path:
    """A small table (steps, hours) with pandas' writer."""
    with atomic_file(path, "w", newline="") as fh:
        frame.to_csv(fh, index=False, float_format=FLOAT_FORMAT)
    return Path(path)


def write_timeseries(frame: pd.DataFrame, path: str | Path, *, time: Callable[[np.ndarray], np.ndarray] | None = None,
                     rows_per_chunk: int = CHUNK_ROWS) -> Path:
    """The per-second table: pyarrow's writer when installed (see the module doc), else pandas'.

    `time(epochs) -> strings`: a first column `time` made from `epoch_s` chunk by chunk (so the frame
    is never copied whole). Rows are converted and written `rows_per_chunk` at a time."""
    path = Path(path)
    arrow = _arrow()
    if arrow is None:
        out = frame
        if time is not None:
            out = frame.copy()
            out.insert(0, "time", time(frame["epoch_s"].to_numpy()))
        return write_table(out, path)
    pa, pacsv = arrow
    names = (["time"] if time is not None else []) + [str(c) for c in frame.columns]
    kinds = {}
    for name in frame.columns:
        dtype = frame[name].dtype
        kinds[name] = ("float" if pd.api.types.is_float_dtype(dtype) else
                       "int" if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else "text")
    with atomic_file(path, "wb") as fh:
        fh.write((",".join(names) + "\n").encode())
        writer = None
        for start in range(0, max(1, len(frame)), rows_per_chunk):
            part = frame.iloc[start:start + rows_per_chunk]
            arrays = []
            if time is not None:
                arrays.append(pa.array(time(part["epoch_s"].to_numpy()), type=pa.string()))
            for name, kind in kinds.items():
                values = part[name]
                if kind == "float":
                    arrays.append(pa.array(round_column(values.to_numpy(dtype="float64")), from_pandas=True))
                elif kind == "int":
                    arrays.append(pa.array(values.to_numpy()))
                else:  # text: no comma or quote in the per-second table, written unquoted as pandas does
                    arrays.append(pa.array(values.astype(str).to_numpy(), type=pa.string()))
            table = pa.Table.from_arrays(arrays, names=names)
            if writer is None:
                writer = pacsv.CSVWriter(fh, table.schema, write_options=pacsv.WriteOptions(include_header=False,
                                                                                          quoting_style="none"))
            writer.write_table(table)
        if writer is not None:
            writer.close()
    return path
