"""The KServe v2 inference protocol as Triton speaks it through SageMaker: datatypes, tensors, documents.

One home for the wire facts (docs/facts.md, "Triton / KServe v2 on SageMaker") both the client's
`triton` / `triton-json` serializers and the local endpoint (`serve --protocol triton`) use: JSON
documents, binary tensors after a `json-header-size=N` Content-Type, the datatypes (FP16 and BF16
cannot travel in JSON), answers and errors. Values are checked, not trusted: a cast that would
change a value is a one-line `SerializationError` before anything is sent. BF16 travels as its 16
bits and decodes to float32.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from sm_locust.serializers.base import SerializationError

BINARY_MIME = "application/vnd.sagemaker-triton.binary+json"
HEADER_SIZE_KEY = "json-header-size="
BINARY_PREFIX = f"{BINARY_MIME};{HEADER_SIZE_KEY}"
"""What Triton's SageMaker front end looks for, byte for byte, at the start of the Content-Type."""
BINARY_DATA_SIZE = "binary_data_size"
BINARY_DATA = "binary_data"
BINARY_DATA_OUTPUT = "binary_data_output"
BYTES = "BYTES"
BF16 = "BF16"
_LENGTH = struct.Struct("<I")


@dataclass(frozen=True)
class Datatype:
    """One Triton datatype: its name, its element layout on the wire (None: BYTES, variable) and
    whether JSON `data` may carry it."""

    name: str
    wire: np.dtype | None
    json: bool = True

    @property
    def size(self) -> int:
        """Bytes per element on the wire (0 for BYTES)."""
        return 0 if self.wire is None else self.wire.itemsize

    @property
    def values(self) -> np.dtype:
        """The numpy dtype values are held in once decoded (BF16: float32; BYTES: object)."""
        if self.name == BF16:
            return np.dtype(np.float32)
        if self.wire is None:
            return np.dtype(object)
        return self.wire.newbyteorder("=") if self.wire.itemsize > 1 else self.wire


DATATYPES: dict[str, Datatype] = {d.name: d for d in (
    Datatype("BOOL", np.dtype(np.bool_)),
    Datatype("UINT8", np.dtype("<u1")), Datatype("UINT16", np.dtype("<u2")),
    Datatype("UINT32", np.dtype("<u4")), Datatype("UINT64", np.dtype("<u8")),
    Datatype("INT8", np.dtype("<i1")), Datatype("INT16", np.dtype("<i2")),
    Datatype("INT32", np.dtype("<i4")), Datatype("INT64", np.dtype("<i8")),
    Datatype("FP16", np.dtype("<f2"), json=False), Datatype("FP32", np.dtype("<f4")),
    Datatype("FP64", np.dtype("<f8")), Datatype(BF16, np.dtype("<u2"), json=False),
    Datatype(BYTES, None),
)}  # fmt: skip
"""Every Triton datatype by its protocol name (triton-inference-server/common `model_config.cc`)."""


def datatype(name: str, what: str = "datatype") -> Datatype:
    """The Datatype called `name` (any case); a SerializationError naming the valid ones."""
    found = DATATYPES.get(str(name).strip().upper())
    if found is None:
        raise SerializationError(f"{what} {name!r} is not a Triton datatype; use one of: {', '.join(DATATYPES)}")
    return found


def datatype_of(dtype: np.dtype, what: str = "array") -> Datatype:
    """The Triton datatype a numpy dtype is sent as (text -> BYTES)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "SU":
        return DATATYPES[BYTES]
    if dtype.kind == "b":
        return DATATYPES["BOOL"]
    names = {"i": "INT", "u": "UINT", "f": "FP"}
    if dtype.kind in names:
        name = f"{names[dtype.kind]}{dtype.itemsize * 8}"
        if name in DATATYPES:
            return DATATYPES[name]
    raise SerializationError(f"{what}: numpy dtype {dtype} has no Triton datatype; save it as one of bool, "
                             "(u)int8-64, float16/32/64 or text, or give --input-datatypes NAME=TYPE")


# -- values <-> the wire --------------------------------------------------------------------------


def _first_changed(original: np.ndarray, back: np.ndarray) -> object:
    flat_o, flat_b = original.reshape(-1), back.reshape(-1)
    same = (flat_o == flat_b) | ((flat_o != flat_o) & (flat_b != flat_b))  # NaN is itself
    return flat_o[int(np.argmin(same))].item()


def to_wire(arr: np.ndarray, dt: Datatype, what: str) -> np.ndarray:
    """`arr` as `dt` lays it on the wire: little-endian elements (BF16: their 16 bits), or an object
    array of bytes for BYTES. A cast that would change any value is refused."""
    arr = np.asarray(arr)
    if dt.name == BYTES:
        if arr.dtype.kind == "S":
            return arr
        if arr.dtype.kind == "U":
            return np.char.encode(arr, "utf-8")
        if arr.dtype.kind == "O" and all(isinstance(v, bytes) for v in arr.reshape(-1)):
            return arr
        raise SerializationError(f"{what}: {arr.dtype} values cannot be sent as BYTES; BYTES carries text or bytes "
                                 "(save the array as strings, or give --input-datatypes with its numeric type)")
    if arr.dtype.kind not in "biuf":
        raise SerializationError(f"{what}: {arr.dtype} values cannot be sent as {dt.name}; give --input-datatypes "
                                 "NAME=BYTES for text")
    target = np.dtype("<f4") if dt.name == BF16 else dt.wire
    assert target is not None
    if arr.dtype == target:
        out = arr
    elif arr.dtype.kind in "iu" and target.kind in "iu":  # whole numbers: a range check, one pass each
        info = np.iinfo(target)
        low, high = (arr.min(), arr.max()) if arr.size else (0, 0)
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise SerializationError(
                f"{what}: {arr.dtype} values cannot be sent as {dt.name} without changing them (e.g. {int(bad)!r}); "
                f"save the array as {datatype_of(arr.dtype).name.lower()} values that fit {dt.name}, or give "
                "--input-datatypes with a type that holds them")
        out = arr.astype(target)
    else:
        with np.errstate(all="ignore"):
            out = arr.astype(target)
            back = out.astype(arr.dtype)
        same = np.array_equal(back, arr, equal_nan=arr.dtype.kind == "f")
        if not same:
            raise SerializationError(
                f"{what}: {arr.dtype} values cannot be sent as {dt.name} without changing them (e.g. "
                f"{_first_changed(arr, back)!r}); save the array as {datatype_of(arr.dtype).name.lower()} values "
                f"that fit {dt.name}, or give --input-datatypes with a type that holds them")
    if dt.name == BF16:
        bits = np.ascontiguousarray(out, dtype="<f4").view("<u4")
        if (bits & 0xFFFF).any():
            changed = arr.reshape(-1)[int(np.argmax((bits & 0xFFFF).reshape(-1) != 0))].item()
            raise SerializationError(f"{what}: {arr.dtype} values cannot be sent as BF16 without changing them "
                                     f"(e.g. {changed!r} needs more than BF16's 8 significant bits)")
        return (bits >> 16).astype("<u2")
    return np.ascontiguousarray(out)


def tensor_bytes(wire: np.ndarray, dt: Datatype) -> bytes:
    """The binary tensor data of a `to_wire` array: raw elements, or length-prefixed BYTES elements."""
    if dt.name != BYTES:
        return wire.tobytes()
    return b"".join(_LENGTH.pack(len(v)) + v for v in (bytes(x) for x in wire.reshape(-1).tolist()))


def json_data(wire: np.ndarray, dt: Datatype, what: str) -> np.ndarray | list:
    """The flat, row-major JSON `data` of a `to_wire` array: a 1-D array orjson writes natively
    (`OPT_SERIALIZE_NUMPY`: 4x faster than a list; FP32 in its shortest form, which reads back to
    the same FP32), or a list of UTF-8 text for BYTES."""
    if not dt.json:
        raise SerializationError(f"{what}: {dt.name} cannot travel in JSON (Triton refuses it there); send it in "
                                 "the binary kind, --serializer triton")
    flat = wire.reshape(-1)
    if dt.name != BYTES:
        return np.ascontiguousarray(flat, dtype=flat.dtype.newbyteorder("="))
    try:
        return [bytes(v).decode("utf-8") for v in flat.tolist()]
    except UnicodeDecodeError:
        raise SerializationError(f"{what}: BYTES elements that are not UTF-8 text cannot travel in JSON; send them "
                                 "in the binary kind, --serializer triton") from None


def _count(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


def array_from_bytes(data: bytes | memoryview, dt: Datatype, shape: Sequence[int], what: str) -> np.ndarray:
    """A tensor's values from its binary data (BF16 as float32, BYTES as an object array of bytes)."""
    count = _count(shape)
    if dt.name == BYTES:
        values, view, offset = [], memoryview(data), 0
        while offset < len(view):
            if offset + 4 > len(view):
                raise SerializationError(f"{what}: BYTES data ends inside an element's 4-byte length")
            (n,) = _LENGTH.unpack_from(view, offset)
            offset += 4
            if offset + n > len(view):
                raise SerializationError(f"{what}: a BYTES element of {n} bytes runs past the tensor's data")
            values.append(bytes(view[offset:offset + n]))
            offset += n
        if len(values) != count:
            raise SerializationError(f"{what}: {len(values)} BYTES elements for shape {list(shape)}")
        out = np.empty(count, dtype=object)
        out[:] = values
        return out.reshape(tuple(shape))
    assert dt.wire is not None
    if len(data) != count * dt.size:
        raise SerializationError(f"{what}: {len(data)} bytes of {dt.name} data for shape {list(shape)} (needs "
                                 f"{count * dt.size})")
    arr = np.frombuffer(data, dtype=dt.wire)
    if dt.name == BF16:
        return (arr.astype("<u4") << 16).view("<f4").astype(np.float32).reshape(tuple(shape))
    return arr.astype(dt.values, copy=False).reshape(tuple(shape))


def flatten(data: object) -> list:
    """A nested JSON list, flat and row-major."""
    if not isinstance(data, list):
        return [data]
    if data and isinstance(data[0], list):
        out: list = []
        for item in data:
            out.extend(flatten(item))
        return out
    return data


def array_from_json(data: object, dt: Datatype, shape: Sequence[int], what: str) -> np.ndarray:
    """A tensor's values from its JSON `data` (flat or nested, row-major)."""
    flat = flatten(data)
    if len(flat) != _count(shape):
        raise SerializationError(f"{what}: {len(flat)} values in 'data' for shape {list(shape)}")
    if dt.name == BYTES:
        out = np.empty(len(flat), dtype=object)
        out[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in flat]
        return out.reshape(tuple(shape))
    try:
        return np.asarray(flat, dtype=dt.values).reshape(tuple(shape))
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(f"{what}: 'data' does not hold {dt.name} values: {exc}") from None


# -- Content-Type ---------------------------------------------------------------------------------


def binary_content_type(header_size: int) -> str:
    """The Content-Type of a binary body whose JSON document is `header_size` bytes long."""
    return f"{BINARY_PREFIX}{header_size}"


def header_size(content_type: str | None) -> int | None:
    """The `json-header-size` a Content-Type gives (read leniently: any case, spaces), else None."""
    for part in (content_type or "").split(";")[1:]:
        key, sep, value = part.strip().partition("=")
        if sep and key.strip().lower() == HEADER_SIZE_KEY[:-1]:
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def document_length(body: bytes) -> int:
    """The length of the JSON document a body starts with (a binary body read without its Content-Type)."""
    text = bytes(body).decode("latin-1")  # one character per byte: an index in the text is an offset in the body
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError as exc:
        raise SerializationError(f"the body does not start with a JSON document: {exc}") from None
    return end


# -- documents --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    """A named tensor with its datatype and values (any numpy array the datatype can hold)."""

    name: str
    datatype: Datatype
    values: np.ndarray


def encode_request(inputs: Iterable[Tensor], *, binary: bool, outputs: Sequence[str] = (),
                   binary_output: bool = True, what: str = "payload") -> tuple[bytes, str]:
    """A request body and its Content-Type: inputs as binary data (`binary`) or JSON `data`;
    `outputs` named with `binary_data` each, else (binary answers wanted) `binary_data_output`.
    Key order and compact separators are tritonclient's, so equal inputs give equal bytes."""
    documents, blobs = [], []
    for tensor in inputs:
        where = f"{what}: input {tensor.name!r}"
        wire = to_wire(tensor.values, tensor.datatype, where)
        doc: dict[str, object] = {"name": tensor.name, "shape": list(wire.shape), "datatype": tensor.datatype.name}
        if binary:
            blob = tensor_bytes(wire, tensor.datatype)
            doc["parameters"] = {BINARY_DATA_SIZE: len(blob)}
            blobs.append(blob)
        else:
            doc["data"] = json_data(wire, tensor.datatype, where)
        documents.append(doc)
    if not documents:
        raise SerializationError(f"{what}: a Triton request needs at least one input tensor")
    request: dict[str, object] = {"inputs": documents}
    if outputs:
        request["outputs"] = [{"name": name, "parameters": {BINARY_DATA: binary_output}} for name in outputs]
    elif binary_output:
        request["parameters"] = {BINARY_DATA_OUTPUT: True}
    header = orjson.dumps(request, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return header, "application/json"
    return header + b"".join(blobs), binary_content_type(len(header))


@dataclass(frozen=True)
class Decoded:
    """A decoded request or answer: its document and its tensors ({name: array}) in order."""

    document: dict
    tensors: dict[str, np.ndarray]


def _split(body: bytes, content_type: str | None) -> tuple[bytes, memoryview]:
    size = header_size(content_type)
    if size is None and content_type and content_type.lower().startswith(BINARY_MIME):
        size = document_length(body)
    if size is None:
        return body, memoryview(b"")
    if not 0 <= size <= len(body):
        raise SerializationError(f"json-header-size={size} does not fit a body of {len(body)} bytes")
    return body[:size], memoryview(body)[size:]


def _load(header: bytes) -> dict:
    try:
        doc = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise SerializationError(f"the JSON document is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SerializationError("the JSON document is not an object")
    return doc


def decode_tensors(items: object, binary: memoryview, key: str) -> dict[str, np.ndarray]:
    """{name: array} from a document's `inputs` / `outputs` list and the binary data after it."""
    if not isinstance(items, list):
        raise SerializationError(f"{key!r} is not a list of tensors")
    out: dict[str, np.ndarray] = {}
    offset = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise SerializationError(f"{key}[{i}] has no name")
        what = f"{key[:-1]} {item['name']!r}"
        shape = item.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SerializationError(f"{what}: shape {shape!r} is not a list of sizes")
        dt = datatype(item.get("datatype", ""), f"{what}: datatype")
        size = (item.get("parameters") or {}).get(BINARY_DATA_SIZE)
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > len(binary):
                raise SerializationError(f"{what}: binary_data_size {size!r} runs past the body's binary data")
            out[item["name"]] = array_from_bytes(binary[offset:offset + size], dt, shape, what)
            offset += size
        elif "data" in item:
            out[item["name"]] = array_from_json(item["data"], dt, shape, what)
        else:
            raise SerializationError(f"{what} carries neither 'data' nor parameters.binary_data_size")
    if offset != len(binary):
        raise SerializationError(f"{len(binary) - offset} bytes of binary data after the last tensor")
    return out


def decode_answer(body: bytes, content_type: str | None) -> Decoded:
    """An answer's outputs ({name: array}); Triton's `{"error": ...}` is a SerializationError naming it."""
    header, binary = _split(bytes(body), content_type)
    doc = _load(header)
    if "outputs" not in doc:
        if isinstance(doc.get("error"), str):
            raise SerializationError(f"Triton answered an error: {doc['error']}")
        raise SerializationError("the answer has no 'outputs'")
    return Decoded(doc, decode_tensors(doc["outputs"], binary, "outputs"))


def decode_request(body: bytes, content_type: str | None) -> Decoded:
    """A request's inputs ({name: array}), read leniently (the local endpoint reads as Triton does)."""
    header, binary = _split(bytes(body), content_type)
    doc = _load(header)
    return Decoded(doc, decode_tensors(doc.get("inputs"), binary, "inputs"))


def is_outputs_document(doc: object) -> bool:
    """True for a document whose `outputs` is a KServe v2 list of named tensors."""
    items = doc.get("outputs") if isinstance(doc, Mapping) else None
    return (isinstance(items, list) and bool(items)
            and all(isinstance(i, dict) and "name" in i and "datatype" in i for i in items))


def encode_answer(model_name: str, model_version: str, outputs: Iterable[tuple[Tensor, bool]],
                  request_id: str | None = None) -> tuple[bytes, str]:
    """An answer body and its Content-Type as Triton's SageMaker front end writes them: the document
    (`id` when the request had one, `model_name`, `model_version`, `outputs`), then the binary
    outputs in order; the binary MIME with the document's size when any binary data follows."""
    documents, blobs = [], []
    for tensor, binary in outputs:
        wire = to_wire(tensor.values, tensor.datatype, f"output {tensor.name!r}")
        doc: dict[str, object] = {"name": tensor.name, "datatype": tensor.datatype.name, "shape": list(wire.shape)}
        if binary:
            blob = tensor_bytes(wire, tensor.datatype)
            doc["parameters"] = {BINARY_DATA_SIZE: len(blob)}
            if blob:
                blobs.append(blob)
        else:
            doc["data"] = _answer_data(wire, tensor.datatype)
        documents.append(doc)
    answer: dict[str, object] = {"id": request_id} if request_id else {}
    answer.update({"model_name": model_name, "model_version": model_version, "outputs": documents})
    header = orjson.dumps(answer)
    if not blobs:
        return header, "application/json"
    return header + b"".join(blobs), binary_content_type(len(header))


def _answer_data(wire: np.ndarray, dt: Datatype) -> list:
    if not dt.json:  # Triton's words (http_server.cc WriteDataToJson), answered as a 400
        raise SerializationError(f"sending {dt.name} data via JSON is not supported. Please use the binary data "
                                 "format for output")
    if dt.name == BYTES:
        return [bytes(v).decode("utf-8", errors="replace") for v in wire.reshape(-1).tolist()]
    return wire.reshape(-1).tolist()


def error_body(message: str) -> bytes:
    """Triton's error document, `{"error":"..."}`."""
    return orjson.dumps({"error": message})


__all__ = ["BINARY_DATA", "BINARY_DATA_OUTPUT", "BINARY_DATA_SIZE", "BINARY_MIME", "BINARY_PREFIX", "BYTES",
           "DATATYPES", "Datatype", "Decoded", "Tensor", "array_from_bytes", "array_from_json",
           "binary_content_type", "datatype", "datatype_of", "decode_answer", "decode_request", "decode_tensors",
           "document_length", "encode_answer", "encode_request", "error_body", "flatten", "header_size",
           "is_outputs_document", "json_data", "tensor_bytes", "to_wire"]
