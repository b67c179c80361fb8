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
| `triton` | `triton-binary`, `kserve-binary` | (Triton's binary MIME; `triton_format.py`) | KServe v2 binary tensors |
| `triton-json` | `kserve-v2`, `kserve-json` | application/json | KServe v2 JSON tensors |

Ranking requests are `{"feat_ids": int64 [N,39], "feat_vals": float32 [N,39]}`; the single-array
formats pack them into [N, 78] (see `ranking.py`). Response checks live in `validation.py`.

Formats are named by Content-Type in ONE table, `content_types.py` (`format_of`,
`base_content_type`); rows of a request and fan-out's splitting of encoded bodies, each in its
own format, are in `rows.py`.
"""

from __future__ import annotations

import inspect
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.serializers.base import Part, SerializationError, Serializer, decoder_for
from sm_locust.serializers.content_types import CONTENT_TYPES, base_content_type, format_of
from sm_locust.serializers.csv_format import CsvSerializer
from sm_locust.serializers.json_format import JsonSerializer
from sm_locust.serializers.numpy_formats import NpySerializer, NumpyRawSerializer
from sm_locust.serializers.protobuf_format import ProtobufSerializer
from sm_locust.serializers.raw import RawSerializer
from sm_locust.serializers.rows import SPLITTABLE, body_rows, part_slices, request_rows, split_body, split_rows
from sm_locust.serializers.triton_format import TritonJsonSerializer, TritonSerializer
from sm_locust.serializers.validation import ResponseValidator
from sm_locust.util.registry import Registry

SERIALIZERS: Registry[type[Serializer]] = Registry("serializer")
SERIALIZERS.add("json", JsonSerializer)
SERIALIZERS.add("protobuf", ProtobufSerializer, "tfs-protobuf", "protobuf-string", "tfs")
SERIALIZERS.add("npy", NpySerializer, "numpy")
SERIALIZERS.add("numpy-raw", NumpyRawSerializer, "numpy-string", "numpy-bytes")
SERIALIZERS.add("csv", CsvSerializer)
SERIALIZERS.add("raw", RawSerializer, "bytes")
SERIALIZERS.add("triton", TritonSerializer, "triton-binary", "kserve-binary")
SERIALIZERS.add("triton-json", TritonJsonSerializer, "kserve-v2", "kserve-json")


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


__all__ = [
    "CONTENT_TYPES",
    "SERIALIZERS",
    "SPLITTABLE",
    "CsvSerializer",
    "JsonSerializer",
    "NpySerializer",
    "NumpyRawSerializer",
    "Part",
    "ProtobufSerializer",
    "RawSerializer",
    "ResponseValidator",
    "SerializationError",
    "Serializer",
    "TritonJsonSerializer",
    "TritonSerializer",
    "base_content_type",
    "body_rows",
    "create_serializer",
    "decoder_for",
    "format_of",
    "part_slices",
    "request_rows",
    "split_body",
    "split_rows",
]
