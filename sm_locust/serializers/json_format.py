"""JSON bodies (orjson), in the TF-Serving REST shapes SageMaker JSON containers understand.

Requests: a dict already shaped as a request (`instances`, `inputs`, `signature_name`, ...) is
dumped as it is; a dict of tensors (such as the ranking dict) is wrapped as `{"inputs": {...}}`
(columns, the default) or `{"instances": [{...}, ...]}` (rows, `layout="instances"`); a single
array or list becomes `{"instances": [...]}`. numpy arrays and scalars are written natively.

Responses: `{"predictions": [...]}` or `{"outputs": [...]}` -> one numpy array; `{"outputs":
{name: [...]}}` or any other object of lists (the seed's `{"prob": [...]}`) -> dict of arrays;
a bare list -> array. A KServe v2 answer (Triton's JSON kind: `{"outputs": [{"name", "datatype",
"shape", "data"}]}`) -> {name: array of its shape} (`kserve.py`).

Bodies read as bytes: `body_rows` counts a request's rows (`instances`, or the first dimension of
`inputs`; a KServe v2 request: its first input's first dimension) and `split_body` cuts it into
parts of consecutive rows, other keys kept (a KServe v2 request is not cut: split its source rows). JSON Lines
(`application/jsonlines`) holds one record per line: a body of several lines has one row per
line and splits between lines; a body of one line is one JSON document, read as above.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import orjson

from sm_locust.errors import UsageError
from sm_locust.serializers import kserve
from sm_locust.serializers.base import Part, SerializationError, Serializer, common_rows, part_slices
from sm_locust.serializers.content_types import JSON, canonical
from sm_locust.serializers.ranking import FEAT_IDS, FEAT_VALS, is_ranking, ranking_arrays

REQUEST_KEYS = frozenset({"instances", "inputs", "signature_name", "examples", "context"})
LAYOUTS = ("inputs", "instances")
_OPTS = orjson.OPT_SERIALIZE_NUMPY


def _default(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (bytes, bytearray)):
        return obj.decode("utf-8")
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(obj: object) -> bytes:
    """orjson with numpy support; a clear SerializationError for what JSON cannot hold."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTS)
    except (orjson.JSONEncodeError, TypeError, UnicodeDecodeError) as exc:
        raise SerializationError(f"cannot encode the payload as JSON: {exc}") from None


def _arrays(value: object) -> object:
    if isinstance(value, list):
        try:
            arr = np.asarray(value)
        except ValueError:
            return value
        return arr if arr.dtype.kind in "biuf" else value
    if isinstance(value, (int, float)):
        return np.asarray(value)
    return value


class JsonSerializer(Serializer):
    """`json`: orjson bodies, `application/json`."""

    name = "json"
    format = JSON
    default_content_type = canonical(JSON)

    def __init__(self, layout: str = "inputs", content_type: str | None = None):
        super().__init__(content_type)
        if layout not in LAYOUTS:
            raise SerializationError(f"unknown JSON layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")
        self.layout = layout

    def _serialize(self, obj: object) -> bytes:
        if isinstance(obj, Mapping) and not (REQUEST_KEYS & set(obj)):
            tensors = dict(obj)
            if is_ranking(obj):
                tensors[FEAT_IDS], tensors[FEAT_VALS] = ranking_arrays(obj)
            if self.layout == "inputs":
                return dumps({"inputs": tensors})
            arrays = {k: np.asarray(v) for k, v in tensors.items()}
            n = common_rows(arrays.values())
            if n is None:
                raise SerializationError("layout 'instances' needs every input to have the same number of rows")
            return dumps({"instances": [{k: a[i] for k, a in arrays.items()} for i in range(n)]})
        if isinstance(obj, (np.ndarray, list, tuple)):
            return dumps({"instances": obj if not isinstance(obj, tuple) else list(obj)})
        return dumps(obj)

    def _deserialize(self, data: bytes) -> object:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(f"response is not valid JSON: {exc}") from None
        if isinstance(doc, list):
            return _arrays(doc)
        if isinstance(doc, dict):
            if kserve.is_outputs_document(doc):
                return kserve.decode_tensors(doc["outputs"], memoryview(b""), "outputs")
            for key in ("predictions", "outputs"):
                if key in doc:
                    inner = doc[key]
                    if isinstance(inner, dict):
                        return {k: _arrays(v) for k, v in inner.items()}
                    return _arrays(inner)
            return {k: _arrays(v) for k, v in doc.items()}
        return doc


# -- bodies read as bytes (row counts for validation, parts for fan-out) ----------------------


def _first_dim(value: object) -> int | None:
    return len(value) if isinstance(value, list) else None


def json_rows(body: bytes) -> int | None:
    """Rows in a JSON request body (`instances`, or the first dimension of `inputs`), or None."""
    doc = orjson.loads(body)
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("instances"), list):
        return len(doc["instances"])
    inputs = doc.get("inputs")
    if isinstance(inputs, dict) and inputs:
        return _first_dim(next(iter(inputs.values())))
    if isinstance(inputs, list) and _is_kserve(inputs):
        shape = inputs[0].get("shape")
        return int(shape[0]) if isinstance(shape, list) and shape else None
    return _first_dim(inputs)


def _is_kserve(inputs: object) -> bool:
    """A KServe v2 `inputs` list: named tensors with a shape."""
    return isinstance(inputs, list) and bool(inputs) and all(
        isinstance(i, dict) and "name" in i and "shape" in i for i in inputs)


def split_json(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K JSON bodies holding consecutive rows of `instances` or `inputs` (other keys kept)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("instances"), list):
        rows = doc["instances"]
        return [Part(orjson.dumps({**doc, "instances": rows[s]}), s.stop - s.start, custom_attributes)
                for s in part_slices(len(rows), k, where)]
    inputs = doc.get("inputs") if isinstance(doc, dict) else None
    if _is_kserve(inputs):
        raise UsageError(f"{where}: cannot split a KServe v2 (Triton) body read as bytes; give the rows as an .npz "
                         "with --serializer triton-json, which splits them before encoding")
    if isinstance(inputs, list):
        return [Part(orjson.dumps({**doc, "inputs": inputs[s]}), s.stop - s.start, custom_attributes)
                for s in part_slices(len(inputs), k, where)]
    if isinstance(inputs, dict) and inputs and all(isinstance(v, list) for v in inputs.values()):
        lengths = {len(v) for v in inputs.values()}
        if len(lengths) == 1:
            return [Part(orjson.dumps({**doc, "inputs": {n: v[s] for n, v in inputs.items()}}), s.stop - s.start,
                         custom_attributes)
                    for s in part_slices(lengths.pop(), k, where)]
    raise UsageError(f"{where}: cannot split this JSON body: it needs an \"instances\" list or \"inputs\" with rows")


def json_lines(body: bytes) -> list[bytes]:
    """The non-blank lines of a JSON Lines body, each one JSON document (checked)."""
    lines = [line.strip() for line in body.split(b"\n") if line.strip()]
    for i, line in enumerate(lines, start=1):
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(f"line {i} of the JSON Lines body is not JSON: {exc}") from None
    return lines


def jsonlines_rows(body: bytes) -> int | None:
    """Rows in a JSON Lines body: one per line; a one-line body is read as a JSON document."""
    lines = json_lines(body)
    return json_rows(lines[0]) if len(lines) == 1 else len(lines)


def split_jsonlines(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K JSON Lines bodies of consecutive lines; a one-line body is split as a JSON document."""
    lines = json_lines(body)
    if len(lines) == 1:
        return split_json(lines[0], k, where, custom_attributes)
    return [Part(b"\n".join(lines[s]) + b"\n", s.stop - s.start, custom_attributes)
            for s in part_slices(len(lines), k, where)]
