"""JSON bodies (orjson), in the TF-Serving REST shapes SageMaker JSON containers understand.

Requests: a dict already shaped as a request (`instances`, `inputs`, `signature_name`, ...) is
dumped as it is; a dict of tensors (such as the ranking dict) is wrapped as `{"inputs": {...}}`
(columns, the default) or `{"instances": [{...}, ...]}` (rows, `layout="instances"`); a single
array or list becomes `{"instances": [...]}`. numpy arrays and scalars are written natively.

Responses: `{"predictions": [...]}` or `{"outputs": [...]}` -> one numpy array; `{"outputs":
{name: [...]}}` or any other object of lists (the seed's `{"prob": [...]}`) -> dict of arrays;
a bare list -> array.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from sm_locust.serializers.base import SerializationError, Serializer
from sm_locust.serializers.ranking import FEAT_IDS, FEAT_VALS, is_ranking, ranking_arrays

REQUEST_KEYS = frozenset({"instances", "inputs", "signature_name", "examples", "context"})
LAYOUTS = ("inputs", "instances")
_OPTS = orjson.OPT_SERIALIZE_NUMPY


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (bytes, bytearray)):
        return obj.decode("utf-8")
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> bytes:
    """orjson with numpy support; a clear SerializationError for what JSON cannot hold."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTS)
    except (orjson.JSONEncodeError, TypeError, UnicodeDecodeError) as exc:
        raise SerializationError(f"cannot encode the payload as JSON: {exc}") from None


def _arrays(value: Any) -> Any:
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
    default_content_type = "application/json"

    def __init__(self, layout: str = "inputs", content_type: str | None = None):
        super().__init__(content_type)
        if layout not in LAYOUTS:
            raise SerializationError(f"unknown JSON layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")
        self.layout = layout

    def _serialize(self, obj: Any) -> bytes:
        if isinstance(obj, Mapping) and not (REQUEST_KEYS & set(obj)):
            tensors = dict(obj)
            if is_ranking(obj):
                tensors[FEAT_IDS], tensors[FEAT_VALS] = ranking_arrays(obj)
            if self.layout == "inputs":
                return dumps({"inputs": tensors})
            arrays = {k: np.asarray(v) for k, v in tensors.items()}
            rows = {a.shape[0] if a.ndim else None for a in arrays.values()}
            if len(rows) != 1 or None in rows:
                raise SerializationError("layout 'instances' needs every input to have the same number of rows")
            n = rows.pop()
            return dumps({"instances": [{k: a[i] for k, a in arrays.items()} for i in range(n)]})
        if isinstance(obj, (np.ndarray, list, tuple)):
            return dumps({"instances": obj if not isinstance(obj, tuple) else list(obj)})
        return dumps(obj)

    def _deserialize(self, data: bytes) -> Any:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(f"response is not valid JSON: {exc}") from None
        if isinstance(doc, list):
            return _arrays(doc)
        if isinstance(doc, dict):
            for key in ("predictions", "outputs"):
                if key in doc:
                    inner = doc[key]
                    if isinstance(inner, dict):
                        return {k: _arrays(v) for k, v in inner.items()}
                    return _arrays(inner)
            return {k: _arrays(v) for k, v in doc.items()}
        return doc
