"""Request decoding and response encoding for the local endpoint's ranking model.

Per row, 39 feature ids and 39 feature values (`serializers/ranking.py`); requests name their format
by Content-Type (JSON, JSON lines, protobuf, npy, octet-stream, CSV; `serializers.content_types`;
none is JSON), responses follow Accept. What does not decode raises `CodecError` with the
container's status (400 body, 415 Content-Type, 406 Accept), which reaches the caller as SageMaker's
ModelError 424. A bare buffer is float32 [N, 78] unless Custom-Attributes say `shape=` / `dtype=`.
Nothing here unpickles: `.npy` loads with `allow_pickle=False`. Formats: docs/endpoint.md.
"""

from __future__ import annotations

import numpy as np
import orjson

from sm_locust.invocation import attribute_values
from sm_locust.serializers import ranking, tfs_proto
from sm_locust.serializers.base import SerializationError
from sm_locust.serializers.content_types import (
    CSV,
    JSON,
    JSON_LINES,
    NPY,
    NUMPY_RAW,
    PROTOBUF,
    base_content_type,
    canonical,
    format_of,
)
from sm_locust.serializers.csv_format import read_csv
from sm_locust.serializers.json_format import json_lines
from sm_locust.serializers.numpy_formats import (
    dump_npy,
    frombuffer,
    load_npy,
    parse_shape,
)
from sm_locust.serializers.ranking import NUM_FIELDS


class CodecError(ValueError):
    """The model rejects the request: its body, Content-Type or Accept does not fit the model's schema.

    `status` is what the inference container answers (400 bad body, 415 Content-Type, 406 Accept).
    """

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


RAW_DTYPES = ("float16", "float32", "float64", "int32", "int64")
OUTPUT_NAME = "prob"
REQUEST_TYPES = tuple(canonical(f) for f in (JSON, PROTOBUF, NPY, NUMPY_RAW, CSV))
RESPONSE_TYPES = REQUEST_TYPES


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
            if rows and isinstance(rows, list) and not isinstance(rows[0], dict):
                return ranking.unpack(rows)
            ids = np.asarray([r["feat_ids"] for r in rows], dtype=np.int64)
            vals = np.asarray([r["feat_vals"] for r in rows], dtype=np.float32)
        elif isinstance(doc, dict) and "inputs" in doc:
            if not isinstance(doc["inputs"], dict):
                return ranking.unpack(doc["inputs"])
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


def _decode_json_lines(body: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        lines = json_lines(body)
    except SerializationError as exc:
        raise CodecError(str(exc)) from None
    if len(lines) <= 1:
        return _decode_json(body)
    rows = []
    for line in lines:
        doc = orjson.loads(line)
        if isinstance(doc, dict) and ranking.is_ranking(doc):
            rows.append(ranking.ranking_arrays(doc))
        elif isinstance(doc, list):
            rows.append(ranking.unpack(doc))
        else:
            rows.append(_decode_json(line))
    return _check(np.vstack([ids for ids, _ in rows]), np.vstack([vals for _, vals in rows]))


def _decode_protobuf(body: bytes) -> tuple[np.ndarray, np.ndarray]:
    tensors = tfs_proto.decode_predict_request(body).tensors
    if ranking.FEAT_IDS in tensors and ranking.FEAT_VALS in tensors:
        return ranking.ranking_arrays(tensors)
    if len(tensors) == 1:
        return ranking.unpack(next(iter(tensors.values())))
    raise CodecError(
        f"PredictRequest inputs {sorted(tensors)} do not match the ranking model: send "
        f"{ranking.FEAT_IDS!r} int64 [N,{NUM_FIELDS}] and {ranking.FEAT_VALS!r} float32 [N,{NUM_FIELDS}]"
    )


def parse_custom_attributes(custom_attributes: str | None) -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, shape) for a raw buffer from `shape=N,78;dtype=float32` (defaults float32, [N,78])."""
    dtype = np.dtype(np.float32)
    shape: tuple[int, ...] = (-1, ranking.PACKED_COLUMNS)
    for key, value in attribute_values(custom_attributes).items():
        if key == "dtype":
            if value.lower() not in RAW_DTYPES:
                raise CodecError(f"custom attribute dtype={value!r} is not supported; use one of: "
                                 f"{', '.join(RAW_DTYPES)}")
            dtype = np.dtype(value.lower())
        elif key == "shape":
            shape = parse_shape(value) or shape  # an empty shape= keeps the default
    return dtype.newbyteorder("<"), shape


def decode_request(
    body: bytes, content_type: str | None, custom_attributes: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Decode a request body into (feat_ids int64 [N,39], feat_vals float32 [N,39])."""
    content_type = content_type or canonical(JSON)
    fmt = format_of(content_type)
    try:
        if fmt == JSON:
            return _decode_json(body)
        if fmt == JSON_LINES:
            return _decode_json_lines(body)
        if fmt == PROTOBUF:
            return _decode_protobuf(body)
        if fmt == NPY:
            return ranking.unpack(load_npy(body))
        if fmt == NUMPY_RAW:
            dtype, shape = parse_custom_attributes(custom_attributes)
            return ranking.unpack(frombuffer(body, dtype, shape, "body"))
        if fmt == CSV:
            return ranking.unpack(read_csv(body))
    except SerializationError as exc:
        raise CodecError(str(exc)) from None
    kind = base_content_type(content_type)
    raise CodecError(f"unsupported Content-Type {kind!r}; send one of: {', '.join(REQUEST_TYPES)}", 415)


def encode_response(probabilities: np.ndarray, accept: str | None) -> tuple[bytes, str]:
    """Encode the model output as Accept asks; returns (body, content type)."""
    accept = accept if accept and accept.strip() != "*/*" else canonical(JSON)
    fmt = format_of(accept)
    probs = np.asarray(probabilities, dtype=np.float32).reshape(-1)
    if fmt in (JSON, JSON_LINES):
        return orjson.dumps({"predictions": probs.tolist()}), canonical(JSON)
    if fmt == NPY:
        return dump_npy(probs), canonical(NPY)
    if fmt == NUMPY_RAW:
        return probs.astype("<f4").tobytes(), canonical(NUMPY_RAW)
    if fmt == CSV:
        return "".join(f"{p:.9g}\n" for p in probs.tolist()).encode(), canonical(CSV)
    if fmt == PROTOBUF:
        return tfs_proto.encode_predict_response({OUTPUT_NAME: probs}), canonical(PROTOBUF)
    kind = base_content_type(accept)
    raise CodecError(f"unsupported Accept {kind!r}; ask for one of: {', '.join(RESPONSE_TYPES)}", 406)
