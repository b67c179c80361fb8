"""Rows: how many a request carries, and how to cut it into K parts of consecutive rows.

Responses are checked against the rows their request sent (`--validate-response`), and fan-out
(`--split K`) sends a request's rows as K parts; both need to know a request's rows. A request
object (a ranking dict, a dict of tensors, an array) is counted and sliced before it is encoded
(`request_rows`, `split_rows`); a body read as bytes is counted and split in its own format, by
the format module the Content-Type names (`content_types.format_of`):

| format | rows | parts |
|---|---|---|
| json | `instances`, or the first dimension of `inputs` | the same document, other keys kept |
| jsonlines | one per line (a one-line body: as json) | consecutive lines |
| csv | one per line, a header line excepted | consecutive lines, header on every part |
| npy | first dimension | `.npy` parts |
| protobuf | first dimension of the first input | PredictRequests, model spec kept |
| numpy-raw | (not counted) | only with `shape=` custom attributes; each part gets its own |
| triton | first dimension of the first input | (not split: split the .npz rows instead) |

Counting is best effort (None when it cannot tell); splitting what cannot be split is a one-line
UsageError. Both run once per static body, before the test, never on the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sm_locust.errors import UsageError
from sm_locust.serializers.base import Part, SerializationError, common_rows, part_slices
from sm_locust.serializers.content_types import (
    CSV,
    JSON,
    JSON_LINES,
    NPY,
    NUMPY_RAW,
    PROTOBUF,
    TRITON,
    base_content_type,
    format_of,
)
from sm_locust.serializers.csv_format import csv_rows, split_csv
from sm_locust.serializers.json_format import json_rows, jsonlines_rows, split_json, split_jsonlines
from sm_locust.serializers.numpy_formats import npy_rows, raw_layout, split_npy, split_raw
from sm_locust.serializers.protobuf_format import protobuf_rows, split_protobuf
from sm_locust.serializers.ranking import FEAT_IDS, is_ranking
from sm_locust.serializers.triton_format import triton_rows

_ROWS: dict[str | None, Callable[[bytes], int | None]] = {
    JSON: json_rows,
    JSON_LINES: jsonlines_rows,
    CSV: csv_rows,
    NPY: npy_rows,
    PROTOBUF: protobuf_rows,
    TRITON: triton_rows,
}
_SPLITTERS: dict[str | None, Callable[[bytes, int, str, str | None], list[Part]]] = {
    JSON: split_json,
    JSON_LINES: split_jsonlines,
    CSV: split_csv,
    NPY: split_npy,
    PROTOBUF: split_protobuf,
    NUMPY_RAW: split_raw,
}
SPLITTABLE = ("JSON (instances/inputs), JSON Lines, CSV, npy, protobuf PredictRequest, "
              "numpy-raw with shape= custom attributes")


def request_rows(obj: Any) -> int | None:
    """Rows in a request object (a ranking dict, a dict of tensors, or an array); None if unknown."""
    try:
        if is_ranking(obj):
            arr = np.asarray(obj[FEAT_IDS])
            return 1 if arr.ndim == 1 else int(arr.shape[0])
        if isinstance(obj, dict):
            first = next(iter(obj.values()), None)
            arr = np.asarray(first)
        elif isinstance(obj, (np.ndarray, list)):
            arr = np.asarray(obj)
        else:
            return None
        return int(arr.shape[0]) if arr.ndim >= 1 else None
    except (ValueError, TypeError):
        return None


def body_rows(body: bytes, content_type: str | None) -> int | None:
    """Rows in an encoded request body, or None when the format or shape does not say."""
    count = _ROWS.get(format_of(content_type))
    if count is None:
        return None
    try:
        return count(body)
    except (SerializationError, ValueError, TypeError, StopIteration):
        return None


def split_rows(obj: object, k: int, where: str) -> list[object]:
    """K request objects holding consecutive rows of `obj` (an array, or a dict of arrays)."""
    if isinstance(obj, Mapping):
        arrays = {key: np.asarray(value) for key, value in obj.items()}
        if FEAT_IDS in arrays and arrays[FEAT_IDS].ndim == 1:
            arrays = {key: a.reshape(1, -1) for key, a in arrays.items()}  # one ranking row
        n = common_rows(arrays.values())
        if n is None:
            raise UsageError(f"{where}: cannot split: the inputs do not all have the same number of rows")
        return [{key: a[s] for key, a in arrays.items()} for s in part_slices(n, k, where)]
    if isinstance(obj, (np.ndarray, list, tuple)):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            raise UsageError(f"{where}: cannot split a scalar payload into rows")
        return [arr[s] for s in part_slices(arr.shape[0], k, where)]
    raise UsageError(f"{where}: cannot split a {type(obj).__name__} payload into rows; give arrays or a dict of arrays")


def split_body(body: bytes, content_type: str | None, k: int, where: str,
               custom_attributes: str | None = None) -> list[Part]:
    """K parts holding consecutive rows of an encoded body, each in the body's own format."""
    fmt = format_of(content_type)
    try:
        splitter = _SPLITTERS.get(fmt)
        if fmt == NUMPY_RAW and raw_layout(custom_attributes) is None:
            splitter = None  # a bare buffer without shape= has no rows to split
        if splitter is None:
            raise UsageError(f"{where}: cannot split a {base_content_type(content_type) or 'untyped'} body into rows; "
                             f"--split works with {SPLITTABLE} bodies, and with .npy/.npz or function sources "
                             "encoded by --serializer")
        return splitter(body, k, where, custom_attributes)
    except SerializationError as exc:
        raise UsageError(f"{where}: cannot split: {exc}") from None


__all__ = ["SPLITTABLE", "Part", "body_rows", "part_slices", "request_rows", "split_body", "split_rows"]
