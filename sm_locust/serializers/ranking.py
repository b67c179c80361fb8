"""The ranking model's request schema, shared by the serializers and the local endpoint.

The one home of its constants: the endpoint imports them from here, never the other way round. Per
row, 39 feature ids and 39 feature values (DeepFM): named-input formats (JSON, protobuf) carry
`feat_ids` int64 [N, 39] and `feat_vals` float32 [N, 39]; one-array formats (npy, numpy-raw, CSV)
carry a packed [N, 78] array, ids in columns 0..38. Packing needs a float dtype; float32 holds whole
numbers exactly only up to 2**24, so larger ids are refused in float32 (use float64).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sm_locust.serializers.base import SerializationError

NUM_FIELDS = 39
"""Feature fields per row: 39 ids and 39 values (the TF-Serving DeepFM case)."""
FEAT_IDS = "feat_ids"
FEAT_VALS = "feat_vals"
PACKED_COLUMNS = 2 * NUM_FIELDS
"""A packed row: ids in columns 0..38, values in 39..77."""
FLOAT32_EXACT_MAX = 2**24


def is_ranking(obj: object) -> bool:
    """True for a mapping holding both `feat_ids` and `feat_vals`."""
    return isinstance(obj, Mapping) and FEAT_IDS in obj and FEAT_VALS in obj


def _as_numeric(value: object, what: str) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise SerializationError(f"{what} is not a rectangular array: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise SerializationError(f"{what} must be numeric; got dtype {arr.dtype}")
    return arr


def _whole_ids(ids: np.ndarray, what: str) -> np.ndarray:
    if ids.dtype.kind == "f":
        bad = ~np.isfinite(ids) | (ids != np.rint(ids))
        if bad.any():
            r, c = (int(i) for i in np.argwhere(bad)[0])
            raise SerializationError(f"{what} must be whole numbers; got {ids[r, c].item()!r} at row {r}, column {c}")
        if np.abs(ids).max(initial=0) >= 2**63:
            raise SerializationError(f"{what} do not fit int64")
    return ids.astype(np.int64, copy=False)


def _check_rows(ids: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ids.ndim == 1 and vals.ndim == 1:
        ids, vals = ids.reshape(1, -1), vals.reshape(1, -1)
    if ids.ndim != 2 or ids.shape[1] != NUM_FIELDS or vals.shape != ids.shape:
        raise SerializationError(
            f"feat_ids and feat_vals must both be [N, {NUM_FIELDS}] for the ranking model; "
            f"got {list(ids.shape)} and {list(vals.shape)}"
        )
    if ids.shape[0] == 0:
        raise SerializationError("the ranking request holds no rows")
    return ids, vals


def ranking_arrays(obj: Mapping[str, object]) -> tuple[np.ndarray, np.ndarray]:
    """(feat_ids int64 [N,39], feat_vals float32 [N,39]) from a ranking dict; one row may be 1-D."""
    ids = _as_numeric(obj[FEAT_IDS], FEAT_IDS)
    vals = _as_numeric(obj[FEAT_VALS], FEAT_VALS)
    ids, vals = _check_rows(ids, vals)
    return _whole_ids(ids, FEAT_IDS), vals.astype(np.float32, copy=False)


def pack(obj: Mapping[str, object], dtype: Any = np.float32) -> np.ndarray:
    """The packed [N, 78] array of a ranking dict, in a float dtype."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise SerializationError(
            f"a packed ranking request needs a float dtype (columns 39..77 are feature values); got {dt}"
        )
    ids, vals = ranking_arrays(obj)
    limit = FLOAT32_EXACT_MAX if dt.itemsize <= 4 else 2**53
    if ids.size and np.abs(ids).max() > limit:
        raise SerializationError(
            f"feature id {int(np.abs(ids).max())} cannot be carried exactly in {dt} (limit {limit}); "
            "use dtype float64, or the json/protobuf serializers"
        )
    out = np.empty((ids.shape[0], PACKED_COLUMNS), dtype=dt)
    out[:, :NUM_FIELDS] = ids
    out[:, NUM_FIELDS:] = vals
    return out


def unpack(array: object) -> tuple[np.ndarray, np.ndarray]:
    """(feat_ids, feat_vals) from a packed [N, 78] array (a single 78-value row is accepted)."""
    arr = _as_numeric(array, "the packed ranking array")
    if arr.ndim == 1 and arr.shape[0] == PACKED_COLUMNS:
        arr = arr.reshape(1, PACKED_COLUMNS)
    if arr.ndim != 2 or arr.shape[1] != PACKED_COLUMNS:
        raise SerializationError(
            f"a packed ranking request is [N, {PACKED_COLUMNS}] (ids in columns 0..{NUM_FIELDS - 1}, "
            f"values in {NUM_FIELDS}..{PACKED_COLUMNS - 1}); got {list(arr.shape)}"
        )
    if arr.shape[0] == 0:
        raise SerializationError("the ranking request holds no rows")
    ids = _whole_ids(arr[:, :NUM_FIELDS], "feature ids (columns 0..38)")
    return ids, arr[:, NUM_FIELDS:].astype(np.float32)


def as_single_array(obj: Any, dtype: Any = None) -> np.ndarray:
    """The one array a single-array format carries: a ranking dict is packed, else np.asarray."""
    if is_ranking(obj):
        return pack(obj, np.float32 if dtype is None else dtype)
    if isinstance(obj, Mapping):
        raise SerializationError(
            f"this format carries one array; the dict holds {sorted(map(str, obj))}. "
            f"Pass one array, a ranking dict ({FEAT_IDS}, {FEAT_VALS}), or use json/protobuf"
        )
    try:
        arr = np.asarray(obj)
    except (ValueError, TypeError) as exc:
        raise SerializationError(f"the payload is not a rectangular array: {exc}") from None
    if arr.dtype.kind not in "biufc":
        raise SerializationError(f"the payload must be a numeric array; got dtype {arr.dtype}")
    return arr
