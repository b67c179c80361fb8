"""Response checks: is the body decodable, and does it have the shape the request implies?

A load test that only counts HTTP 200s can report a fast endpoint that answers garbage. A
`ResponseValidator` decodes each response (by its Content-Type) and checks it; a failure is
returned as `InvocationError("InvalidResponse", why)`, so Locust's failure table counts it under
`InvalidResponse` next to the botocore error codes. It never raises for a bad body.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sm_locust.invocation import Invocation, InvocationError
from sm_locust.serializers.base import SerializationError, Serializer
from sm_locust.serializers.json_format import JsonSerializer

INVALID_RESPONSE = "InvalidResponse"


def _shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("*" if d is None else str(d) for d in shape) + "]"


class ResponseValidator:
    """Checks responses: decodable, expected keys, expected shape, rows matching the request.

    - `serializer`: decodes bodies whose Content-Type it does not recognise (default: json);
    - `expected_keys`: names that must be present when the response carries named outputs
      (a protobuf PredictResponse, or a JSON object such as the seed's `{"prob": [...]}`);
    - `expected_shape`: e.g. `(None,)` or `(None, 1)`; None matches any size;
    - `rows_match_request`: the first dimension of every output equals `Invocation.rows`.
    """

    def __init__(
        self,
        serializer: Serializer | None = None,
        *,
        expected_keys: Iterable[str] = (),
        expected_shape: Sequence[int | None] | None = None,
        rows_match_request: bool = True,
    ):
        self.serializer = serializer if serializer is not None else JsonSerializer()
        self.expected_keys = tuple(expected_keys)
        self.expected_shape = None if expected_shape is None else tuple(expected_shape)
        self.rows_match_request = rows_match_request

    def check(self, body: bytes, content_type: str | None = None, invocation: Invocation | None = None) -> str | None:
        """Why the response is invalid, or None when it passes."""
        if not body:
            return "empty response body"
        try:
            decoded = self.serializer.deserialize(body, content_type)
        except SerializationError as exc:
            return f"cannot decode ({content_type or 'no Content-Type'}): {exc}"
        if isinstance(decoded, bytes):
            return None  # raw bodies: decodable by definition, nothing else to check
        if isinstance(decoded, dict):
            error = decoded.get("error")
            if error is not None and not any(isinstance(v, np.ndarray) for v in decoded.values()):
                # Triton's, KServe's and TF Serving's error document, answered with a 200 (read by the JSON reader
                # when the Content-Type is application/json): an error, whatever the status said
                return f"the answer is an error document: {str(error)[:200]}"
            missing = [k for k in self.expected_keys if k not in decoded]
            if missing:
                return f"missing output {missing[0]!r}; got {sorted(decoded)}"
            arrays = {k: v for k, v in decoded.items() if isinstance(v, np.ndarray)}
        elif isinstance(decoded, np.ndarray):
            if self.expected_keys:
                return f"expected outputs {list(self.expected_keys)} but the response is one unnamed array"
            arrays = {"response": decoded}
        else:
            return f"expected arrays, got a JSON {type(decoded).__name__}"
        rows = invocation.rows if (invocation is not None and self.rows_match_request) else None
        for name, arr in arrays.items():
            why = self._check_array(name, arr, rows)
            if why:
                return why
        return None

    def _check_array(self, name: str, arr: np.ndarray, rows: int | None) -> str | None:
        label = "" if name == "response" else f"output {name!r} "
        if self.expected_shape is not None:
            shape = self.expected_shape
            if arr.ndim != len(shape) or any(e is not None and e != d for e, d in zip(shape, arr.shape, strict=True)):
                return f"{label}shape {list(arr.shape)} does not match expected {_shape_text(shape)}"
        if rows is not None and (arr.ndim == 0 or arr.shape[0] != rows):
            got = "a scalar" if arr.ndim == 0 else f"{arr.shape[0]} rows"
            return f"{label}has {got}; the request sent {rows}"
        return None

    def validate(self, body: bytes, content_type: str | None = None,
                 invocation: Invocation | None = None) -> InvocationError | None:
        """`InvocationError("InvalidResponse", why)` for a bad response, else None."""
        why = self.check(body, content_type, invocation)
        return None if why is None else InvocationError(INVALID_RESPONSE, why)

    __call__ = validate
