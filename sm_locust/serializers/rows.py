"""How many rows an encoded request body carries, so responses can be checked against it.

Best effort and format-generic (TF-Serving request shapes, CSV lines, the first dimension of a
.npy or of the first protobuf input); None when it cannot tell. Runs once per static body,
before the test, never on the request path.
"""

from __future__ import annotations

import orjson

from sm_locust.serializers.base import SerializationError, base_content_type

_JSON = ("application/json", "text/json")
_CSV = ("text/csv",)
_NPY = ("application/x-npy", "application/npy")
_PROTOBUF = ("application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf", "x-protobuf")


def _first_dim(value: object) -> int | None:
    if isinstance(value, list):
        return len(value)
    return None


def body_rows(body: bytes, content_type: str | None) -> int | None:
    """Rows in an encoded request body, or None when the format or shape does not say."""
    kind = base_content_type(content_type)
    try:
        if kind in _JSON:
            doc = orjson.loads(body)
            if not isinstance(doc, dict):
                return None
            if isinstance(doc.get("instances"), list):
                return len(doc["instances"])
            inputs = doc.get("inputs")
            if isinstance(inputs, dict) and inputs:
                return _first_dim(next(iter(inputs.values())))
            return _first_dim(inputs)
        if kind in _CSV:
            from sm_locust.serializers.csv_format import read_csv

            return int(read_csv(body).shape[0])
        if kind in _NPY:
            from sm_locust.serializers.numpy_formats import load_npy

            arr = load_npy(body)
            return int(arr.shape[0]) if arr.ndim else None
        if kind in _PROTOBUF:
            from sm_locust.serializers.tfs_proto import decode_predict_request

            first = next(iter(decode_predict_request(body).tensors.values()))
            return int(first.shape[0]) if first.ndim else None
    except (orjson.JSONDecodeError, SerializationError, ValueError, TypeError):
        return None
    return None


__all__ = ["body_rows"]
