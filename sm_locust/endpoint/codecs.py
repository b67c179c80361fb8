"""Request decoding and response encoding for the local endpoint's ranking model.

The model takes, per row, 39 feature ids and 39 feature values (the TF-Serving ranking case in the
seeds). Requests name their format by Content-Type; responses follow Accept. Anything that does not
decode into that schema raises `CodecError`, which the endpoint answers as a ValidationError (400).

JSON request schema (`application/json`), either row-wise (TF-Serving REST "instances"):
    {"instances": [{"feat_ids": [39 ints], "feat_vals": [39 floats]}, ...]}
or column-wise ("inputs"):
    {"inputs": {"feat_ids": [[39 ints], ...], "feat_vals": [[39 floats], ...]}}
JSON response: {"predictions": [p0, p1, ...]} with one probability per row.
"""

from __future__ import annotations

import numpy as np
import orjson

from sm_locust.endpoint.model import NUM_FIELDS


class CodecError(ValueError):
    """The body cannot be decoded into the model's input schema."""


JSON_TYPES = ("application/json", "application/jsonlines", "text/json")


def _base(content_type: str | None) -> str:
    return (content_type or "application/json").split(";", 1)[0].strip().lower()


def _check(ids: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ids.ndim != 2 or ids.shape[1] != NUM_FIELDS or vals.shape != ids.shape:
        raise CodecError(
            f"feat_ids and feat_vals must both be [N, {NUM_FIELDS}]; got {list(ids.shape)} and {list(vals.shape)}"
        )
    if ids.shape[0] == 0:
        raise CodecError("the request holds no rows")
    return ids, vals


def _decode_json(body: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"body is not valid JSON: {exc}") from None
    try:
        if isinstance(doc, dict) and "instances" in doc:
            rows = doc["instances"]
            ids = np.asarray([r["feat_ids"] for r in rows], dtype=np.int64)
            vals = np.asarray([r["feat_vals"] for r in rows], dtype=np.float32)
        elif isinstance(doc, dict) and "inputs" in doc:
            ids = np.asarray(doc["inputs"]["feat_ids"], dtype=np.int64)
            vals = np.asarray(doc["inputs"]["feat_vals"], dtype=np.float32)
        else:
            raise CodecError('JSON body needs "instances" (rows) or "inputs" (columns) with feat_ids and feat_vals')
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"JSON body does not match the schema: {exc}") from None
    if ids.ndim == 1:
        ids, vals = ids.reshape(1, -1), vals.reshape(1, -1)
    return _check(ids, vals)


def decode_request(
    body: bytes, content_type: str | None, custom_attributes: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Decode a request body into (feat_ids int64 [N,39], feat_vals float32 [N,39])."""
    kind = _base(content_type)
    if kind in JSON_TYPES:
        return _decode_json(body)
    raise CodecError(f"unsupported Content-Type {kind!r}; send application/json")


def encode_response(probabilities: np.ndarray, accept: str | None) -> tuple[bytes, str]:
    """Encode the model output as Accept asks; returns (body, content type)."""
    kind = _base(accept) if accept and accept != "*/*" else "application/json"
    if kind in JSON_TYPES:
        return orjson.dumps({"predictions": probabilities.tolist()}), "application/json"
    raise CodecError(f"unsupported Accept {kind!r}; ask for application/json")
