"""`protobuf`: TF-Serving PredictRequest bodies, the seed's "protobuf string" payload.

The seed's client builds `predict_pb2.PredictRequest` (model name, `serving_default` signature,
`feat_ids` int64 and `feat_vals` float32 tensors) and sends `SerializeToString()`; its
`inference.py` checks `context.request_content_type == 'X-protobuf'`. With a custom
`inference.py` the Content-Type is whatever that handler tests for, so it is an option here:
the default is `application/x-protobuf`; pass `content_type="X-protobuf"` to match the seed.
A PredictRequest read as bytes has the rows of its first input (`body_rows`) and splits into
PredictRequests of consecutive rows with the same model spec (`split_body`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from sm_locust.errors import UsageError
from sm_locust.serializers import tfs_proto
from sm_locust.serializers.base import Part, SerializationError, Serializer, common_rows, part_slices
from sm_locust.serializers.content_types import PROTOBUF, canonical
from sm_locust.serializers.ranking import FEAT_IDS, FEAT_VALS, is_ranking, ranking_arrays


def parse_names(value: Mapping[str, str] | str | None) -> dict[str, str]:
    """`"feat_ids=ids,feat_vals=vals"` (CLI form) or a mapping -> {payload key: tensor name}."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    names: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in str(value).split(","))):
        key, sep, tensor = part.partition("=")
        if not sep or not key.strip() or not tensor.strip():
            raise SerializationError(f"input_names entry {part!r} is not KEY=TENSOR_NAME (e.g. feat_ids=ids)")
        names[key.strip()] = tensor.strip()
    return names


def _tensor(value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats become DT_FLOAT, as tf.make_tensor_proto does
    return arr


class ProtobufSerializer(Serializer):
    """`protobuf` (aliases `tfs-protobuf`, `protobuf-string`): TF-Serving PredictRequest bytes."""

    name = "protobuf"
    format = PROTOBUF
    default_content_type = canonical(PROTOBUF)

    def __init__(
        self,
        model_name: str = "model",
        signature_name: str = "serving_default",
        version: int | None = None,
        input_name: str = "inputs",
        input_names: Mapping[str, str] | str | None = None,
        output_filter: Iterable[str] | str = (),
        use_tensor_content: bool = True,
        content_type: str | None = None,
    ):
        super().__init__(content_type)
        self.model_name = model_name
        self.signature_name = signature_name
        self.version = None if version in (None, "") else int(version)
        self.input_name = input_name
        self.input_names = parse_names(input_names)
        if isinstance(output_filter, str):
            output_filter = [s.strip() for s in output_filter.split(",") if s.strip()]
        self.output_filter = list(output_filter)
        self.use_tensor_content = use_tensor_content

    def tensors(self, obj: object) -> dict[str, np.ndarray]:
        """The named input tensors for `obj` (a dict of arrays, a ranking dict, or one array)."""
        if isinstance(obj, Mapping):
            tensors = {str(k): _tensor(v) for k, v in obj.items()}
            if is_ranking(obj):
                tensors[FEAT_IDS], tensors[FEAT_VALS] = ranking_arrays(obj)
        else:
            tensors = {self.input_name: _tensor(obj)}
        return {self.input_names.get(k, k): v for k, v in tensors.items()}

    def _serialize(self, obj: object) -> bytes:
        return tfs_proto.encode_predict_request(
            self.tensors(obj),
            model_name=self.model_name,
            signature_name=self.signature_name,
            version=self.version,
            output_filter=self.output_filter,
            use_tensor_content=self.use_tensor_content,
        )

    def _deserialize(self, data: bytes) -> dict[str, np.ndarray]:
        return tfs_proto.decode_predict_response(data).tensors


def protobuf_rows(body: bytes) -> int | None:
    """Rows in a PredictRequest: the first dimension of its first input."""
    first = next(iter(tfs_proto.decode_predict_request(body).tensors.values()))
    return int(first.shape[0]) if first.ndim else None


def split_protobuf(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K PredictRequests holding consecutive rows of every input (model spec kept)."""
    req = tfs_proto.decode_predict_request(body)
    rows = common_rows(req.tensors.values())
    if rows is None:
        raise UsageError(f"{where}: cannot split this PredictRequest: its inputs do not "
                         "all have the same number of rows")
    return [
        Part(tfs_proto.encode_predict_request({name: a[s] for name, a in req.tensors.items()},
                                              model_name=req.model_name,
                                              signature_name=req.signature_name, version=req.version,
                                              output_filter=req.output_filter), s.stop - s.start, custom_attributes)
        for s in part_slices(rows, k, where)
    ]
