"""Payload serializers: how a request object becomes bytes, and a response body becomes arrays.

Looked up by the name users type (`--serializer protobuf`) in `SERIALIZERS`; `create_serializer`
builds one with its options and names the valid serializers or options on a typo (the table of
names and formats: docs/payloads.md). Formats are named by Content-Type in one table,
`content_types.py`; a request's rows and fan-out splitting are in `rows.py`, response checks in
`validation.py`.
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
