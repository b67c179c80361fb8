"""Payload serializers: how a request object becomes bytes, and a response body becomes arrays.

Looked up by the name users type (`--serializer protobuf`) in `SERIALIZERS`; `create_serializer`
builds one with its options and names the valid serializers or options on a typo.

| name | aliases | Content-Type | carries |
|---|---|---|---|
| `json` | | application/json | dict of tensors, one array, or a ready request |
| `protobuf` | `tfs-protobuf`, `protobuf-string`, `tfs` | application/x-protobuf | TF-Serving PredictRequest |
| `npy` | `numpy` | application/x-npy | one array (np.save) |
| `numpy-raw` | `numpy-string`, `numpy-bytes` | application/octet-stream | one array, bare buffer |
| `csv` | | text/csv | one 2-D array |
| `raw` | `bytes` | application/octet-stream | bytes as given |

Ranking requests are `{"feat_ids": int64 [N,39], "feat_vals": float32 [N,39]}`; the single-array
formats pack them into [N, 78] (see `ranking.py`). Response checks live in `validation.py`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.registry import Registry
from sm_locust.serializers.base import SerializationError, Serializer, base_content_type
from sm_locust.serializers.csv_format import CsvSerializer
from sm_locust.serializers.json_format import JsonSerializer
from sm_locust.serializers.numpy_formats import NpySerializer, NumpyRawSerializer
from sm_locust.serializers.protobuf_format import ProtobufSerializer
from sm_locust.serializers.raw import RawSerializer

SERIALIZERS: Registry[type[Serializer]] = Registry("serializer")
SERIALIZERS.add("json", JsonSerializer)
SERIALIZERS.add("protobuf", ProtobufSerializer, "tfs-protobuf", "protobuf-string", "tfs")
SERIALIZERS.add("npy", NpySerializer, "numpy")
SERIALIZERS.add("numpy-raw", NumpyRawSerializer, "numpy-string", "numpy-bytes")
SERIALIZERS.add("csv", CsvSerializer)
SERIALIZERS.add("raw", RawSerializer, "bytes")

# Response Content-Type -> the serializer that decodes it.
CONTENT_TYPES: dict[str, str] = {
    "application/json": "json",
    "text/json": "json",
    "application/x-npy": "npy",
    "application/npy": "npy",
    "application/x-protobuf": "protobuf",
    "application/protobuf": "protobuf",
    "application/vnd.google.protobuf": "protobuf",
    "x-protobuf": "protobuf",
    "text/csv": "csv",
    "application/octet-stream": "numpy-raw",
}


def create_serializer(name: str, **options: Any) -> Serializer:
    """A serializer by name (or alias) with its options; typos name the valid choices."""
    cls = SERIALIZERS.get(name)
    params = inspect.signature(cls.__init__).parameters
    valid = [p for p in params if p != "self"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UsageError(
            f"serializer {SERIALIZERS.canonical(name)!r} does not take option {unknown[0]!r}; "
            f"it takes: {', '.join(valid)}"
        )
    return cls(**options)


@functools.cache
def _default(name: str) -> Serializer:
    return SERIALIZERS.get(name)()


def decoder_for(content_type: str | None, fallback: Serializer) -> Serializer:
    """The serializer that decodes a response of `content_type`; `fallback` when it is the
    fallback's own type, unknown or absent. A bare buffer stays with raw/numpy-raw fallbacks."""
    kind = base_content_type(content_type)
    if not kind or kind == base_content_type(fallback.content_type):
        return fallback
    name = CONTENT_TYPES.get(kind)
    if name is None or name == fallback.name:
        return fallback
    if name == "numpy-raw" and fallback.name == "raw":
        return fallback
    return _default(name)


def request_rows(obj: Any) -> int | None:
    """Rows in a request object (a ranking dict, a dict of tensors, or an array); None if unknown."""
    import numpy as np

    from sm_locust.serializers.ranking import FEAT_IDS, is_ranking

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


from sm_locust.serializers.validation import ResponseValidator  # noqa: E402  (uses decoder_for)

__all__ = [
    "CONTENT_TYPES",
    "SERIALIZERS",
    "CsvSerializer",
    "JsonSerializer",
    "NpySerializer",
    "NumpyRawSerializer",
    "ProtobufSerializer",
    "RawSerializer",
    "ResponseValidator",
    "SerializationError",
    "Serializer",
    "create_serializer",
    "decoder_for",
    "request_rows",
]
