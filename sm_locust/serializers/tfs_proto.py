"""TF-Serving `PredictRequest` / `PredictResponse` without installing TensorFlow.

The messages are described here with `descriptor_pb2` (field numbers per docs/facts.md), added to a
*private* descriptor pool (a real TensorFlow in the process never clashes), and their classes made
by `message_factory` on first call, then cached. Tensors are written with `tensor_content` (raw
little-endian bytes, the default) or the typed repeated fields (`float_val`, ...); both are read.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2
from google.protobuf.message import DecodeError

from sm_locust.serializers.base import SerializationError

# tensorflow/core/framework/types.proto
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_INT64, DT_BOOL, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 9, 10, 17, 19, 22, 23

DATA_TYPE_NAMES = {
    "DT_INVALID": 0, "DT_FLOAT": DT_FLOAT, "DT_DOUBLE": DT_DOUBLE, "DT_INT32": DT_INT32,
    "DT_UINT8": DT_UINT8, "DT_INT16": DT_INT16, "DT_INT8": DT_INT8, "DT_STRING": DT_STRING,
    "DT_COMPLEX64": 8, "DT_INT64": DT_INT64, "DT_BOOL": DT_BOOL, "DT_BFLOAT16": 14,
    "DT_UINT16": DT_UINT16, "DT_COMPLEX128": 18, "DT_HALF": DT_HALF, "DT_UINT32": DT_UINT32,
    "DT_UINT64": DT_UINT64,
}  # fmt: skip

# numpy dtype -> (DataType, typed repeated field)
_NUMPY_TO_TF: dict[np.dtype, tuple[int, str]] = {
    np.dtype(np.float32): (DT_FLOAT, "float_val"),
    np.dtype(np.float64): (DT_DOUBLE, "double_val"),
    np.dtype(np.int32): (DT_INT32, "int_val"),
    np.dtype(np.uint8): (DT_UINT8, "int_val"),
    np.dtype(np.int16): (DT_INT16, "int_val"),
    np.dtype(np.int8): (DT_INT8, "int_val"),
    np.dtype(np.int64): (DT_INT64, "int64_val"),
    np.dtype(np.bool_): (DT_BOOL, "bool_val"),
    np.dtype(np.uint16): (DT_UINT16, "int_val"),
    np.dtype(np.float16): (DT_HALF, "half_val"),
    np.dtype(np.uint32): (DT_UINT32, "uint32_val"),
    np.dtype(np.uint64): (DT_UINT64, "uint64_val"),
}
_TF_TO_NUMPY: dict[int, tuple[np.dtype, str]] = {tf: (dt, f) for dt, (tf, f) in _NUMPY_TO_TF.items()}

_F = descriptor_pb2.FieldDescriptorProto


def _field(msg, name: str, number: int, ftype: int, *, repeated: bool = False, type_name: str = "") -> None:
    f = msg.field.add(name=name, number=number, type=ftype)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        f.type_name = type_name


def _file(name: str, package: str, *deps: str) -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    fd.dependency.extend(deps)
    return fd


def _files() -> list[descriptor_pb2.FileDescriptorProto]:
    types = _file("tensorflow/core/framework/types.proto", "tensorflow")
    enum = types.enum_type.add(name="DataType")
    for label, number in DATA_TYPE_NAMES.items():
        enum.value.add(name=label, number=number)

    shape = _file("tensorflow/core/framework/tensor_shape.proto", "tensorflow")
    shape_msg = shape.message_type.add(name="TensorShapeProto")
    dim = shape_msg.nested_type.add(name="Dim")
    _field(dim, "size", 1, _F.TYPE_INT64)
    _field(dim, "name", 2, _F.TYPE_STRING)
    _field(shape_msg, "dim", 2, _F.TYPE_MESSAGE, repeated=True, type_name=".tensorflow.TensorShapeProto.Dim")
    _field(shape_msg, "unknown_rank", 3, _F.TYPE_BOOL)

    tensor = _file(
        "tensorflow/core/framework/tensor.proto",
        "tensorflow",
        "tensorflow/core/framework/tensor_shape.proto",
        "tensorflow/core/framework/types.proto",
    )
    t = tensor.message_type.add(name="TensorProto")
    _field(t, "dtype", 1, _F.TYPE_ENUM, type_name=".tensorflow.DataType")
    _field(t, "tensor_shape", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.TensorShapeProto")
    _field(t, "version_number", 3, _F.TYPE_INT32)
    _field(t, "tensor_content", 4, _F.TYPE_BYTES)
    _field(t, "float_val", 5, _F.TYPE_FLOAT, repeated=True)
    _field(t, "double_val", 6, _F.TYPE_DOUBLE, repeated=True)
    _field(t, "int_val", 7, _F.TYPE_INT32, repeated=True)
    _field(t, "string_val", 8, _F.TYPE_BYTES, repeated=True)
    _field(t, "scomplex_val", 9, _F.TYPE_FLOAT, repeated=True)
    _field(t, "int64_val", 10, _F.TYPE_INT64, repeated=True)
    _field(t, "bool_val", 11, _F.TYPE_BOOL, repeated=True)
    _field(t, "dcomplex_val", 12, _F.TYPE_DOUBLE, repeated=True)
    _field(t, "half_val", 13, _F.TYPE_INT32, repeated=True)
    _field(t, "uint32_val", 16, _F.TYPE_UINT32, repeated=True)
    _field(t, "uint64_val", 17, _F.TYPE_UINT64, repeated=True)

    model = _file("tensorflow_serving/apis/model.proto", "tensorflow.serving", "google/protobuf/wrappers.proto")
    spec = model.message_type.add(name="ModelSpec")
    _field(spec, "name", 1, _F.TYPE_STRING)
    _field(spec, "version", 2, _F.TYPE_MESSAGE, type_name=".google.protobuf.Int64Value")
    _field(spec, "signature_name", 3, _F.TYPE_STRING)

    predict = _file(
        "tensorflow_serving/apis/predict.proto",
        "tensorflow.serving",
        "tensorflow/core/framework/tensor.proto",
        "tensorflow_serving/apis/model.proto",
    )
    req = predict.message_type.add(name="PredictRequest")
    _field(req, "model_spec", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.serving.ModelSpec")
    _map(req, "tensorflow.serving.PredictRequest", "inputs", 2, "InputsEntry")
    _field(req, "output_filter", 3, _F.TYPE_STRING, repeated=True)
    resp = predict.message_type.add(name="PredictResponse")
    _map(resp, "tensorflow.serving.PredictResponse", "outputs", 1, "OutputsEntry")
    _field(resp, "model_spec", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.serving.ModelSpec")
    return [types, shape, tensor, model, predict]


def _map(msg, full_name: str, name: str, number: int, entry: str) -> None:
    """A `map<string, TensorProto>` field: a repeated nested *Entry message with map_entry set."""
    nested = msg.nested_type.add(name=entry)
    nested.options.map_entry = True
    _field(nested, "key", 1, _F.TYPE_STRING)
    _field(nested, "value", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.TensorProto")
    _field(msg, name, number, _F.TYPE_MESSAGE, repeated=True, type_name=f".{full_name}.{entry}")


@functools.cache
def messages() -> SimpleNamespace:
    """The message classes (built on first use, then cached): PredictRequest, PredictResponse,
    ModelSpec, TensorProto, TensorShapeProto."""
    pool = descriptor_pool.DescriptorPool()
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    for fd in _files():
        pool.Add(fd)

    def cls(full_name: str):
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))

    return SimpleNamespace(
        PredictRequest=cls("tensorflow.serving.PredictRequest"),
        PredictResponse=cls("tensorflow.serving.PredictResponse"),
        ModelSpec=cls("tensorflow.serving.ModelSpec"),
        TensorProto=cls("tensorflow.TensorProto"),
        TensorShapeProto=cls("tensorflow.TensorShapeProto"),
    )


def _tensor_dtype(arr: np.ndarray) -> tuple[int, str]:
    if arr.dtype.kind in "US":
        return DT_STRING, "string_val"
    key = arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype
    try:
        return _NUMPY_TO_TF[np.dtype(key)]
    except KeyError:
        valid = ", ".join(sorted(str(d) for d in _NUMPY_TO_TF)) + ", str, bytes"
        raise SerializationError(f"dtype {arr.dtype} has no TF-Serving tensor type; use one of: {valid}") from None


def fill_tensor(tensor: Any, value: Any, *, use_tensor_content: bool = True) -> None:
    """Write `value` (array-like) into a TensorProto message in place."""
    arr = np.asarray(value)
    tf_type, typed_field = _tensor_dtype(arr)
    tensor.dtype = tf_type
    for size in arr.shape:
        tensor.tensor_shape.dim.add(size=int(size))
    if tf_type == DT_STRING:
        flat = arr.ravel().tolist()
        tensor.string_val.extend(v if isinstance(v, bytes) else str(v).encode("utf-8") for v in flat)
    elif use_tensor_content:
        tensor.tensor_content = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    elif tf_type == DT_HALF:
        tensor.half_val.extend(arr.astype(np.float16).ravel().view(np.uint16).tolist())
    else:
        getattr(tensor, typed_field).extend(arr.ravel().tolist())


def make_tensor_proto(value: object, *, use_tensor_content: bool = True) -> Any:
    """A new TensorProto holding `value` (like `tf.make_tensor_proto`, without TensorFlow)."""
    tensor = messages().TensorProto()
    fill_tensor(tensor, value, use_tensor_content=use_tensor_content)
    return tensor


def tensor_to_array(tensor: Any, name: str = "tensor") -> np.ndarray:
    """The numpy array a TensorProto holds (`tf.make_ndarray` without TensorFlow)."""
    shape = tuple(int(d.size) for d in tensor.tensor_shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.dtype == DT_STRING:
        values = np.asarray(list(tensor.string_val), dtype=object if not tensor.string_val else None)
        dtype = values.dtype
        typed = values
    else:
        try:
            dtype, typed_field = _TF_TO_NUMPY[tensor.dtype]
        except KeyError:
            raise SerializationError(f"{name}: unsupported tensor dtype {tensor.dtype}") from None
        if tensor.tensor_content:
            content = tensor.tensor_content
            if len(content) != count * dtype.itemsize:
                raise SerializationError(
                    f"{name}: tensor_content holds {len(content)} bytes; shape {list(shape)} of {dtype} needs "
                    f"{count * dtype.itemsize}"
                )
            return np.frombuffer(content, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)
        raw = getattr(tensor, typed_field)
        if tensor.dtype == DT_HALF:
            typed = np.asarray(list(raw), dtype=np.uint16).view(np.float16)
        else:
            typed = np.asarray(list(raw), dtype=dtype)
    if typed.size == count:
        return typed.reshape(shape)
    if typed.size == 1:  # TensorProto rule: one value fills the whole shape
        return np.full(shape, typed[0], dtype=typed.dtype)
    raise SerializationError(f"{name}: {typed.size} values do not fill shape {list(shape)}")


@dataclass
class Predict:
    """A decoded PredictRequest or PredictResponse: model spec plus named tensors as arrays."""

    tensors: dict[str, np.ndarray]
    model_name: str = ""
    signature_name: str = ""
    version: int | None = None
    output_filter: list[str] = field(default_factory=list)


def _set_spec(spec: Any, model_name: str, signature_name: str, version: int | None) -> None:
    if model_name:
        spec.name = model_name
    if signature_name:
        spec.signature_name = signature_name
    if version is not None:
        spec.version.value = int(version)


def _read_spec(msg: Any, tensors: dict[str, np.ndarray], **extra: Any) -> Predict:
    spec = msg.model_spec
    version = spec.version.value if spec.HasField("version") else None
    return Predict(tensors, spec.name, spec.signature_name, version, **extra)


def encode_predict_request(
    inputs: Mapping[str, object],
    *,
    model_name: str = "model",
    signature_name: str = "serving_default",
    version: int | None = None,
    output_filter: Iterable[str] = (),
    use_tensor_content: bool = True,
) -> bytes:
    """Serialized `tensorflow.serving.PredictRequest` with one TensorProto per named input."""
    if not inputs:
        raise SerializationError("a PredictRequest needs at least one input tensor")
    req = messages().PredictRequest()
    _set_spec(req.model_spec, model_name, signature_name, version)
    for name, value in inputs.items():
        fill_tensor(req.inputs[str(name)], value, use_tensor_content=use_tensor_content)
    req.output_filter.extend(output_filter)
    return req.SerializeToString(deterministic=True)  # map entries in key order: the same bytes every time


def _parse(cls: Any, data: bytes, what: str) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise SerializationError(f"body is not a TF-Serving {what}: {exc}") from None
    return msg


def decode_predict_request(data: bytes) -> Predict:
    """The inputs (as arrays) and model spec of a serialized PredictRequest."""
    req = _parse(messages().PredictRequest, data, "PredictRequest")
    if not req.inputs:
        raise SerializationError("body is not a TF-Serving PredictRequest with inputs (no input tensors found)")
    tensors = {name: tensor_to_array(t, f"input {name!r}") for name, t in req.inputs.items()}
    return _read_spec(req, tensors, output_filter=list(req.output_filter))


def encode_predict_response(
    outputs: Mapping[str, object],
    *,
    model_name: str = "model",
    signature_name: str = "serving_default",
    version: int | None = None,
    use_tensor_content: bool = True,
) -> bytes:
    """Serialized `tensorflow.serving.PredictResponse` with one TensorProto per named output."""
    resp = messages().PredictResponse()
    _set_spec(resp.model_spec, model_name, signature_name, version)
    for name, value in outputs.items():
        fill_tensor(resp.outputs[str(name)], value, use_tensor_content=use_tensor_content)
    return resp.SerializeToString(deterministic=True)


def decode_predict_response(data: bytes) -> Predict:
    """The outputs (as arrays) and model spec of a serialized PredictResponse."""
    resp = _parse(messages().PredictResponse, data, "PredictResponse")
    if not resp.outputs:
        raise SerializationError("body is not a TF-Serving PredictResponse with outputs (no output tensors found)")
    return _read_spec(resp, {name: tensor_to_array(t, f"output {name!r}") for name, t in resp.outputs.items()})
