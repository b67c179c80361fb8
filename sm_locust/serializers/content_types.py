"""The one table of request/response Content-Types: which wire format a header names.

Why one table: the serializers (decoding responses), the row counter and fan-out (reading and
splitting bodies read as bytes) and the local endpoint (decoding requests, encoding responses)
must agree on what `X-protobuf` or `text/json` means. Each of them asks `format_of` here and
dispatches on the format name; none keeps its own list.

| format | Content-Types (the first is the one sm-locust sends) |
|---|---|
| `json` | application/json, text/json |
| `jsonlines` | application/jsonlines (one JSON record per line) |
| `protobuf` | application/x-protobuf, application/protobuf, application/vnd.google.protobuf, x-protobuf |
| `npy` | application/x-npy, application/npy |
| `numpy-raw` | application/octet-stream, application/x-numpy-raw (a bare array buffer) |
| `csv` | text/csv |
| `triton` | application/vnd.sagemaker-triton.binary+json (`;json-header-size=N`: Triton's binary tensors) |

Matching ignores parameters and case (`Application/JSON; charset=utf-8` is `json`), so the
seed's `X-protobuf` header is `protobuf`. Pure (no imports beyond the standard library): the
endpoint, the serializers and the payloads all import it.
"""

from __future__ import annotations

JSON = "json"
JSON_LINES = "jsonlines"
PROTOBUF = "protobuf"
NPY = "npy"
NUMPY_RAW = "numpy-raw"
CSV = "csv"
TRITON = "triton"

FORMATS: dict[str, tuple[str, ...]] = {
    JSON: ("application/json", "text/json"),
    JSON_LINES: ("application/jsonlines",),
    PROTOBUF: ("application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf", "x-protobuf"),
    NPY: ("application/x-npy", "application/npy"),
    NUMPY_RAW: ("application/octet-stream", "application/x-numpy-raw"),
    CSV: ("text/csv",),
    TRITON: ("application/vnd.sagemaker-triton.binary+json",),
}
"""Format name -> the Content-Types that name it; the first is the canonical one."""

CONTENT_TYPES: dict[str, str] = {ctype: name for name, ctypes in FORMATS.items() for ctype in ctypes}
"""Base Content-Type (lower case, no parameters) -> format name."""


def base_content_type(content_type: str | None) -> str:
    """`Application/JSON; charset=utf-8` -> `application/json` (empty string for None)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def format_of(content_type: str | None) -> str | None:
    """The format a Content-Type names (`json`, `protobuf`, ...), or None when no format does."""
    return CONTENT_TYPES.get(base_content_type(content_type))


def canonical(format_name: str) -> str:
    """The Content-Type sm-locust sends for a format (`protobuf` -> application/x-protobuf)."""
    return FORMATS[format_name][0]


__all__ = ["CONTENT_TYPES", "CSV", "FORMATS", "JSON", "JSON_LINES", "NPY", "NUMPY_RAW", "PROTOBUF",
           "TRITON", "base_content_type", "canonical", "format_of"]
