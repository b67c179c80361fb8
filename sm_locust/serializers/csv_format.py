"""`csv`: text/csv bodies, one row per line, as SageMaker's built-in algorithms take them.

A ranking dict is written as 78 columns (39 ids as integers, then 39 values); an array as its
rows (a 1-D array is one row). Floats are written with enough digits to read back the same
float32/float64. An optional header line (`header=True`) names the columns. Decoding skips a
header line when the first line is not numeric, and returns float64 [N, K] ([N] for one column).
A CSV body read as bytes has one row per line (`body_rows`) and splits between lines, its
header line kept on every part (`split_body`).
"""

from __future__ import annotations

import io

import numpy as np

from sm_locust.config.options import parse_bool
from sm_locust.serializers.base import Part, SerializationError, Serializer, part_slices
from sm_locust.serializers.content_types import CSV, canonical
from sm_locust.serializers.ranking import FEAT_IDS, FEAT_VALS, NUM_FIELDS, as_single_array, is_ranking


def _fmt(dtype: np.dtype) -> str:
    if dtype.kind in "biu":
        return "%d"
    return "%.17g" if dtype.itemsize >= 8 else "%.9g"


def is_number(cell: str) -> bool:
    """True for a CSV cell that parses as a number (a header row has none)."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_csv(data: bytes, what: str = "body", delimiter: str = ",") -> np.ndarray:
    """float64 [N, K] from CSV bytes (header line skipped when not numeric)."""
    try:
        text = data.decode("utf-8-sig")  # Excel's "CSV UTF-8" starts with a byte-order mark
    except UnicodeDecodeError:
        raise SerializationError(f"{what} is not UTF-8 text, so not CSV") from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and not all(is_number(c) for c in lines[0].split(delimiter)):
        lines = lines[1:]
    if not lines:
        raise SerializationError(f"{what} holds no CSV rows")
    try:
        arr = np.loadtxt(lines, delimiter=delimiter, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise SerializationError(f"{what} is not numeric CSV with the same number of columns per row: {exc}") from None
    return arr


class CsvSerializer(Serializer):
    """`csv`: comma-separated numbers, `text/csv`; `header=True` adds a column-name line."""

    name = "csv"
    format = CSV
    default_content_type = canonical(CSV)

    def __init__(self, header: bool = False, delimiter: str = ",", content_type: str | None = None):
        super().__init__(content_type)
        self.header = parse_bool(header, "header")
        self.delimiter = delimiter

    def _serialize(self, obj: object) -> bytes:
        if is_ranking(obj):
            arr = as_single_array(obj, np.float64)
            fmt: str | list[str] = ["%d"] * NUM_FIELDS + ["%.9g"] * NUM_FIELDS
            names = [f"{FEAT_IDS}_{i}" for i in range(NUM_FIELDS)] + [f"{FEAT_VALS}_{i}" for i in range(NUM_FIELDS)]
        else:
            arr = as_single_array(obj)
            if arr.ndim == 1:
                arr = arr.reshape(1, -1)
            if arr.ndim != 2:
                raise SerializationError(f"CSV holds a 2-D table; the payload is {arr.ndim}-D {list(arr.shape)}")
            fmt = _fmt(arr.dtype)
            names = [f"c{i}" for i in range(arr.shape[1])]
        buf = io.StringIO()
        np.savetxt(buf, arr, fmt=fmt, delimiter=self.delimiter, newline="\n",
                   header=self.delimiter.join(names) if self.header else "", comments="")  # fmt: skip
        return buf.getvalue().encode("utf-8")

    def _deserialize(self, data: bytes) -> np.ndarray:
        arr = read_csv(data, "response", self.delimiter)
        return arr.ravel() if arr.shape[1] == 1 else arr


def csv_rows(body: bytes) -> int:
    """Rows in a CSV request body (a non-numeric header line is not a row)."""
    return int(read_csv(body).shape[0])


def split_csv(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K CSV bodies of consecutive lines; a header line is kept on every part."""
    lines = [ln for ln in body.decode("utf-8-sig", errors="replace").splitlines() if ln.strip()]
    header = lines[:1] if lines and not all(is_number(c) for c in lines[0].split(",")) else []
    rows = lines[len(header):]
    return [Part("\n".join(header + rows[s]).encode() + b"\n", s.stop - s.start, custom_attributes)
            for s in part_slices(len(rows), k, where)]
