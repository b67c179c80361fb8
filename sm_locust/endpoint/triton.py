"""The local endpoint speaking Triton on SageMaker (`sm-locust serve --protocol triton`).

Reads a KServe v2 request (JSON, or binary tensors after a `json-header-size=N` header;
`serializers.kserve`) as Triton's SageMaker front end and core do, in their order, with their words
and statuses (docs/facts.md, "Triton / KServe v2 on SageMaker", with the upstream sources). A
refusal is Triton's `{"error": ...}` with its status, returned as SageMaker's ModelError 424
(`codecs.CodecError`). The model is `--model-inputs` / `--model-outputs`; outputs are a
deterministic function of each row's inputs (`predict_batch`), one call per batch, so the dynamic
batcher (`--max-batch-size`, `--max-batch-delay-ms`) and `--max-concurrency` shape its capacity.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from sm_locust.endpoint.codecs import CodecError
from sm_locust.endpoint.options import DEFAULT_TRITON_INPUTS, DEFAULT_TRITON_OUTPUTS
from sm_locust.serializers import kserve
from sm_locust.serializers.base import SerializationError

PROTOCOLS = ("sagemaker", "triton")
DEFAULT_INPUTS = DEFAULT_TRITON_INPUTS
DEFAULT_OUTPUTS = DEFAULT_TRITON_OUTPUTS
MODEL_NAME = "model"  # SAGEMAKER_TRITON_DEFAULT_MODEL_NAME's role: the model /invocations runs
MODEL_VERSION = "1"
WILDCARD = -1
BAD_REQUEST, SERVER_ERROR = 400, 500
MAX_DEPTH = 1024  # orjson's nesting limit: a request nested deeper is a 400 (an HTML 500 at 5,000 levels)


# -- the model description ------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of the model config: its name, datatype and dims (-1: any size)."""

    name: str
    datatype: kserve.Datatype
    dims: tuple[int, ...]


def parse_tensors(text: str, flag: str) -> tuple[TensorSpec, ...]:
    """`input_ids:INT32:-1,512;attention_mask:INT32:-1,512` -> the tensor specs (ValueError when malformed)."""
    specs: list[TensorSpec] = []
    for part in filter(None, (p.strip() for p in str(text).split(";"))):
        pieces = part.split(":")
        if len(pieces) != 3 or not pieces[0].strip():
            raise ValueError(f"{flag} entry {part!r} is not NAME:DATATYPE:DIMS (e.g. input_ids:INT32:-1,512)")
        name, type_name, dims_text = (p.strip() for p in pieces)
        try:
            dt = kserve.datatype(type_name, f"{flag} {name}: datatype")
        except SerializationError as exc:
            raise ValueError(str(exc)) from None
        try:
            dims = tuple(int(d) for d in dims_text.split(",") if d.strip())
        except ValueError:
            raise ValueError(f"{flag} {name}: dims {dims_text!r} are not whole numbers (-1 for any size)") from None
        if any(d < WILDCARD for d in dims):
            raise ValueError(f"{flag} {name}: dims {dims_text!r} must be sizes >= 0 or -1 (any size)")
        if name in {s.name for s in specs}:
            raise ValueError(f"{flag} names {name!r} twice")
        specs.append(TensorSpec(name, dt, dims))
    if not specs:
        raise ValueError(f"{flag} names no tensor; give NAME:DATATYPE:DIMS;... (e.g. {DEFAULT_INPUTS})")
    return tuple(specs)


def _dims_text(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"  # triton common DimsListToString


@dataclass(frozen=True)
class TritonModel:
    """The model config Triton would load: inputs and outputs (dims without the batch dimension when
    `max_batch_size` > 0, as in config.pbtxt) and the largest batch a request may carry."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int
    name: str = MODEL_NAME

    @classmethod
    def parse(cls, inputs: str, outputs: str, max_batch_size: int) -> TritonModel:
        """From `--model-inputs` / `--model-outputs` (full shapes: the batch dimension first, as -1, when
        `max_batch_size` > 0) and `--max-batch-size`; ValueError when they do not make a model."""
        if max_batch_size < 0:
            raise ValueError(f"--max-batch-size must be 0 (no batch dimension) or more, got {max_batch_size}")
        specs = {"--model-inputs": parse_tensors(inputs, "--model-inputs"),
                 "--model-outputs": parse_tensors(outputs, "--model-outputs")}
        if max_batch_size > 0:
            for flag, tensors in specs.items():
                for t in tensors:
                    if not t.dims or t.dims[0] != WILDCARD:
                        raise ValueError(f"{flag} {t.name}: with --max-batch-size {max_batch_size} the first dim is "
                                         f"the batch dimension, written -1 (e.g. -1,512); got {_dims_text(t.dims)}")
            specs = {flag: tuple(TensorSpec(t.name, t.datatype, t.dims[1:]) for t in tensors)
                     for flag, tensors in specs.items()}
        for t in specs["--model-outputs"]:
            rest = t.dims[1:] if max_batch_size == 0 else t.dims  # no batching: a first -1 is the request's rows
            if WILDCARD in rest:
                raise ValueError(f"--model-outputs {t.name}: the local model needs every output dim sized but the "
                                 f"batch's (or, with --max-batch-size 0, the first), got {_dims_text(t.dims)}")
        return cls(specs["--model-inputs"], specs["--model-outputs"], max_batch_size)

    def full_dims(self, spec: TensorSpec) -> tuple[int, ...]:
        return ((WILDCARD,) if self.max_batch_size > 0 else ()) + spec.dims

    def describe(self) -> str:
        def text(tensors: tuple[TensorSpec, ...]) -> str:
            return ", ".join(f"{t.name} {t.datatype.name} {_dims_text(self.full_dims(t))}" for t in tensors)
        return (f"Triton protocol: model {self.name!r}, inputs {text(self.inputs)}; outputs {text(self.outputs)}; "
                f"max_batch_size {self.max_batch_size}")


# -- reading a request as Triton does -----------------------------------------------------------


@dataclass
class TritonRequest:
    """A request that passed every check: its inputs (with the batch dimension), batch size, the
    outputs to answer ({name: binary?}, in the model's order) and its id."""

    inputs: dict[str, np.ndarray]
    batch_size: int
    outputs: dict[str, bool]
    request_id: str = ""
    rows: int = 1
    """The rows it carries: its batch size; without a batch dimension, the first input's first
    dimension when the model leaves that dimension free (-1), else 1."""


def _refuse(status: int, message: str) -> CodecError:
    return CodecError(kserve.error_body(message).decode("utf-8"), status)


_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")  # std::stoi: leading blanks, a sign, digits; the rest ignored


def header_length(content_type: str | None, content_length: int) -> int:
    """The JSON document's length, as sagemaker_server.cc `GetInferenceHeaderLength` reads it."""
    if not content_type:
        return content_length
    pos = content_type.find(kserve.BINARY_PREFIX)  # exact, case-sensitive
    if pos < 0:
        return content_length
    if pos != 0:
        raise _refuse(BAD_REQUEST, f"expect MIME type for binary data starts with '{kserve.BINARY_PREFIX}', got: "
                                   f"{content_type}")
    rest = content_type[len(kserve.BINARY_PREFIX):]
    match = _STOI.match(rest)
    if match is None:
        raise _refuse(BAD_REQUEST, f"Unable to parse inference header size, got: {rest}")
    value = int(match.group(1))
    if not -2**31 <= value < 2**31:
        raise _refuse(BAD_REQUEST, f"Unable to parse inference header size, value is out of range, got: {rest}")
    if value < 0 or value > content_length:
        raise _refuse(BAD_REQUEST, f"inference header size should be in range (0, {content_length}), got: {rest}")
    return value


def _parse_document(header: bytes) -> dict:
    """The JSON document, or Triton's 500 in rapidjson's words (`error/en.h`)."""
    if not header.strip():
        raise _refuse(SERVER_ERROR, f"failed to parse the request JSON buffer: The document is empty. at {len(header)}")
    try:
        doc = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # this endpoint's own bound (orjson's), answered as a JSON error, not a crash
            raise _refuse(BAD_REQUEST, f"failed to parse the request JSON buffer: nested more than {MAX_DEPTH:,} "
                                       "levels deep (the local endpoint's limit)") from None
        text = header.decode("latin-1")  # one character per byte: positions are byte offsets
        start = len(text) - len(text.lstrip(" \t\n\r"))
        try:
            _, end = json.JSONDecoder().raw_decode(text, start)
        except RecursionError:
            raise _refuse(BAD_REQUEST, f"failed to parse the request JSON buffer: nested more than {MAX_DEPTH:,} "
                                       "levels deep (the local endpoint's limit)") from None
        except ValueError as bad:
            position = getattr(bad, "pos", exc.pos)
            raise _refuse(SERVER_ERROR, f"failed to parse the request JSON buffer: Invalid value. at {position}") \
                from None
        rest = len(text) - len(text[end:].lstrip(" \t\n\r"))
        if rest < len(text):
            raise _refuse(SERVER_ERROR, "failed to parse the request JSON buffer: The document root must not be "
                                        f"followed by other values. at {rest}") from None
        raise _refuse(SERVER_ERROR, f"failed to parse the request JSON buffer: Invalid value. at {exc.pos}") from None
    return doc


def _json_error(what: str, problem: str) -> CodecError:
    return _refuse(SERVER_ERROR, f"Unable to parse '{what}': {problem}")


MISSING = "attempt to access non-existing object member '{}'"
NOT_ARRAY = "attempt to access JSON non-array as array"
NOT_STRING = "attempt to access JSON non-string as string"
NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NOT_INT = "attempt to access JSON non-signed-integer as signed-integer"
NOT_BOOL = "attempt to access JSON non-boolean as boolean"
NOT_NUMBER = "attempt to access JSON non-number as double"


def _member(obj: object, key: str, kind: type, problem: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _json_error(key, MISSING.format(key))
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _json_error(key, problem)
    return value


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


@dataclass
class _Input:
    name: str
    datatype: kserve.Datatype | None  # None: a datatype Triton does not know (TYPE_INVALID)
    shape: list[int]
    data: bytes


def _content_kind(item: object) -> None:
    """http_server.cc ValidateInputContentType: exactly one of data / binary_data_size / shared memory."""
    params = item.get("parameters") if isinstance(item, dict) else None
    params = params if isinstance(params, dict) else {}
    found = [label for label, present in (("'data'", isinstance(item, dict) and "data" in item),
                                          ("'binary_data_size'", "binary_data_size" in params),
                                          ("'shared_memory_region'", "shared_memory_region" in params)) if present]
    if len(found) != 1:
        tail = " no field is set" if not found else " set " + " ".join(found)
        raise _refuse(BAD_REQUEST, "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                                   "'parameters', 'shared_memory_region' in 'parameters'. But" + tail)


_JSON_ELEMENT = {  # datatype -> (accepts the JSON value?, TritonJson's words when it does not)
    "BOOL": (lambda v: isinstance(v, bool), NOT_BOOL),
    "FP32": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), NOT_NUMBER),
    "FP64": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), NOT_NUMBER),
}


def _json_values(name: str, dt: kserve.Datatype, data: object, count: int) -> bytes:
    """An input's JSON `data` as its binary data, read as ReadDataFromJson does."""
    if not isinstance(data, list):
        raise _json_error("data", NOT_ARRAY)
    flat = kserve.flatten(data) if data else []
    if dt.name == kserve.BYTES:  # the element count is the model's check (_sized), as in Triton's core
        if not all(isinstance(v, str) for v in flat):
            raise _refuse(SERVER_ERROR, f"Unable to parse JSON bytes array: {NOT_STRING}")
        return b"".join(len(v.encode("utf-8")).to_bytes(4, "little") + v.encode("utf-8") for v in flat)
    if dt.name in ("FP16", "BF16"):
        raise _refuse(BAD_REQUEST, f"receiving {dt.name} data via JSON is not supported. Please use the binary "
                                   f"data format for input {name}")
    accepts, problem = _JSON_ELEMENT.get(dt.name) or (
        (lambda v: _is_uint(v), NOT_UINT) if dt.name.startswith("UINT") else
        (lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63, NOT_INT))
    for i, value in enumerate(flat):
        if i >= count:
            raise _json_error("data", "Shape does not match true shape of 'data' field")
        if not accepts(value):
            raise _json_error("data", problem)
    if len(flat) != count:
        raise _refuse(SERVER_ERROR, "Failed to parse 'data' field: shape does not match true shape")
    assert dt.wire is not None
    if dt.name == "BOOL":
        return np.asarray(flat, dtype=np.uint8).tobytes()
    wide = np.asarray(flat, dtype=np.float64 if dt.name.startswith("FP") else
                      (np.uint64 if dt.name.startswith("UINT") else np.int64))
    with np.errstate(all="ignore"):
        return wide.astype(dt.wire).tobytes()  # C casts, as Triton's (int32_t)si: no range check


def parse_request(model: TritonModel, body: bytes, content_type: str | None) -> TritonRequest:
    """The request Triton would run, or the CodecError it would answer (see the module docstring)."""
    size = header_length(content_type, len(body))
    if size == 0:
        return _raw_request(model, body)
    doc = _parse_document(body[:size])
    request_id = ""
    if isinstance(doc, dict) and "id" in doc:
        if not isinstance(doc["id"], str):
            raise _json_error("id", NOT_STRING)
        request_id = doc["id"]
    log = f"[request id: {request_id or '<id_unknown>'}] "
    binary_default = False
    params = doc.get("parameters") if isinstance(doc, dict) else None
    if isinstance(params, dict):
        for key, value in params.items():
            if key == "binary_data_output":
                if not isinstance(value, bool):
                    raise _json_error("binary_data_output", NOT_BOOL)
                binary_default = value
            elif key.startswith("triton_"):
                raise _refuse(BAD_REQUEST, "parameter keys starting with 'triton_' are reserved for Triton usage and "
                                           "should not be specified.")
    items = _member(doc, "inputs", list, NOT_ARRAY)
    given: dict[str, _Input] = {}
    offset = size
    for item in items:
        _content_kind(item)
        name = _member(item, "name", str, NOT_STRING)
        type_name = _member(item, "datatype", str, NOT_STRING)
        shape = _member(item, "shape", list, NOT_ARRAY)
        if not all(_is_uint(d) for d in shape):
            raise _json_error("shape", NOT_UINT)
        dt = kserve.DATATYPES.get(type_name)
        if name in given:
            raise _refuse(BAD_REQUEST, f"{log}input '{name}' already exists in request")
        params = item.get("parameters") or {}
        if "binary_data_size" in params:
            want = params["binary_data_size"]
            if not _is_uint(want):
                raise _json_error("binary_data_size", NOT_UINT)
            available = min(want, len(body) - offset)
            data = body[offset:offset + available]
            offset += available
            if available < want:
                raise _refuse(BAD_REQUEST, f"unexpected size for input '{name}', expecting {want - available} "
                                           f"additional bytes for model '{model.name}'")
        elif "shared_memory_region" in params:
            raise _refuse(BAD_REQUEST, f"Unable to find shared memory region: '{params['shared_memory_region']}'")
        else:
            count = math.prod(shape)
            if count == 0:
                data = b""
            elif dt is None:
                if not isinstance(item.get("data"), list):
                    raise _json_error("data", NOT_ARRAY)
                raise _refuse(BAD_REQUEST, f"invalid datatype for input {name}")
            else:
                data = _json_values(name, dt, item["data"], count)
        given[name] = _Input(name, dt, list(shape), data)
    if offset != len(body):
        raise _refuse(BAD_REQUEST, f"unexpected additional input data for model '{model.name}'")
    asked: dict[str, bool] = {}
    if isinstance(doc, dict) and "outputs" in doc:
        for item in _member(doc, "outputs", list, NOT_ARRAY):
            name = _member(item, "name", str, NOT_STRING)
            binary = binary_default
            out_params = item.get("parameters") or {}
            if isinstance(out_params, dict) and "binary_data" in out_params:
                if not isinstance(out_params["binary_data"], bool):
                    raise _json_error("binary_data", NOT_BOOL)
                binary = out_params["binary_data"]
            asked[name] = binary
    return _normalize(model, given, asked, binary_default, request_id, log)


def _raw_request(model: TritonModel, body: bytes) -> TritonRequest:
    """`json-header-size=0`: the whole body is the one input's data (http_server.cc EVBufferToRawInput;
    core Normalize deduces the shape from the model's config); every output answers in binary."""
    log = "[request id: <id_unknown>] "
    if len(model.inputs) != 1:
        raise _refuse(BAD_REQUEST, f"{log}Raw request must only have 1 input (found 1) to be deduced but got "
                                   f"{len(model.inputs)} inputs in '{model.name}' model configuration")
    spec = model.inputs[0]
    shape = [1] if model.max_batch_size else []
    if spec.datatype.name == kserve.BYTES:
        if list(spec.dims) != [1]:
            raise _refuse(BAD_REQUEST, f"{log}For BYTE datatype raw input '{spec.name}', the model must have input "
                                       "shape [1]")
        data = len(body).to_bytes(4, "little") + body
        shape += [1]
    else:
        if list(spec.dims).count(WILDCARD) > 1:
            raise _refuse(BAD_REQUEST, f"{log}The shape of the raw input '{spec.name}' can not be deduced because "
                                       "there are more than one variable-sized dimension")
        fixed = math.prod(d for d in spec.dims if d != WILDCARD)
        shape += [len(body) // max(1, fixed) // spec.datatype.size if d == WILDCARD else d for d in spec.dims]
        data = body
    given = {spec.name: _Input(spec.name, spec.datatype, shape, data)}
    return _normalize(model, given, {}, True, "", log)


def _normalize(model: TritonModel, given: dict[str, _Input], asked: dict[str, bool], binary_default: bool,
               request_id: str, log: str) -> TritonRequest:
    """core infer_request.cc Normalize: outputs, input count, names and batch size, datatypes, shapes, sizes."""
    outputs = {spec.name for spec in model.outputs}
    for name in asked:
        if name not in outputs:
            raise _refuse(BAD_REQUEST, f"unexpected inference output '{name}' for model '{model.name}'")
    specs = {spec.name: spec for spec in model.inputs}
    if len(given) != len(specs):
        missing = [f"'{n}'" for n in specs if n not in given]
        got = [f"'{n}'" for n in given]
        raise _refuse(BAD_REQUEST, f"{log}expected {len(specs)} inputs but got {len(given)} inputs for model "
                                   f"'{model.name}'. Got input(s) [{','.join(got)}], but missing required input(s) "
                                   f"[{','.join(missing)}]. Please provide all required input(s).")
    batch = 0
    for inp in given.values():
        if inp.name not in specs:
            raise _refuse(BAD_REQUEST, f"unexpected inference input '{inp.name}' for model '{model.name}'")
        if model.max_batch_size > 0:
            if not inp.shape:
                raise _refuse(BAD_REQUEST, f"{log}input '{inp.name}' has no shape but model requires batch "
                                           f"dimension for '{model.name}'")
            if batch == 0:
                batch = inp.shape[0]
            elif inp.shape[0] != batch:
                raise _refuse(BAD_REQUEST, f"{log}input '{inp.name}' batch size does not match other inputs for "
                                           f"'{model.name}'")
    if batch > model.max_batch_size:
        raise _refuse(BAD_REQUEST, f"{log}inference request batch-size must be <= {model.max_batch_size} for "
                                   f"'{model.name}'")
    arrays: dict[str, np.ndarray] = {}
    for inp in given.values():
        spec = specs[inp.name]
        if inp.datatype is None or inp.datatype.name != spec.datatype.name:
            got_type = inp.datatype.name if inp.datatype is not None else "<invalid>"
            raise _refuse(BAD_REQUEST, f"{log}inference input '{inp.name}' data-type is '{got_type}', but model "
                                       f"'{model.name}' expects '{spec.datatype.name}'")
        dims = inp.shape[1:] if model.max_batch_size > 0 else inp.shape
        if len(dims) != len(spec.dims) or any(c != WILDCARD and c != d for c, d in zip(spec.dims, dims, strict=True)):
            note = ("NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
                    "prepended to each input shape. If you want to specify the full shape including the batch dim "
                    "in your input dims config, try setting max_batch_size to zero. See the model configuration "
                    "docs for more info on max_batch_size.") if model.max_batch_size > 0 else ""
            raise _refuse(BAD_REQUEST, f"{log}unexpected shape for input '{inp.name}' for model '{model.name}'. "
                                       f"Expected {_dims_text(model.full_dims(spec))}, got {_dims_text(inp.shape)}. "
                                       f"{note}")
        arrays[inp.name] = _sized(inp, spec, model, log)
    binary = {spec.name: asked.get(spec.name, binary_default) for spec in model.outputs
              if not asked or spec.name in asked}
    rows = batch
    if model.max_batch_size == 0:
        first = model.inputs[0]
        shape = arrays[first.name].shape
        rows = shape[0] if first.dims and first.dims[0] == WILDCARD and shape else 1
    return TritonRequest(arrays, batch, binary, request_id, max(1, rows))


def _sized(inp: _Input, spec: TensorSpec, model: TritonModel, log: str) -> np.ndarray:
    """The input's values, once its byte size matches its shape (core Normalize / ValidateBytesInputs)."""
    count = math.prod(inp.shape)
    if spec.datatype.name == kserve.BYTES:
        values, offset = [], 0
        data = inp.data
        while offset < len(data):
            if len(data) - offset < 4:
                raise _refuse(BAD_REQUEST, f"{log}incomplete string length indicator for inference input "
                                           f"'{inp.name}' for model '{model.name}', expecting 4 bytes but only "
                                           f"{len(data) - offset} bytes available. Please make sure the string "
                                           "length indicator is in one buffer.")
            n = int.from_bytes(data[offset:offset + 4], "little")
            offset += 4
            values.append(data[offset:offset + n])
            offset += n
            if len(values) > count:
                raise _refuse(BAD_REQUEST, f"{log}unexpected number of string elements {len(values)} for inference "
                                           f"input '{inp.name}' for model '{model.name}', expecting {count}")
        if len(values) != count:  # a last element cut short is not checked (ValidateBytesInputs)
            raise _refuse(BAD_REQUEST, f"{log}expected {count} string elements for inference input '{inp.name}' "
                                       f"for model '{model.name}', got {len(values)}")
        out = np.empty(count, dtype=object)
        out[:] = values
        return out.reshape(inp.shape)
    expected = count * spec.datatype.size
    if len(inp.data) != expected:
        raise _refuse(BAD_REQUEST, f"{log}input byte size mismatch for input '{inp.name}' for model "
                                   f"'{model.name}'. Expected {expected}, got {len(inp.data)}")
    return kserve.array_from_bytes(inp.data, spec.datatype, inp.shape, f"input {inp.name!r}")


# -- the model's outputs and the answer -----------------------------------------------------------


def row_scores(model: TritonModel, request: TritonRequest) -> np.ndarray:
    """One number per row (float64 [rows]): the sum of the row's input values (BYTES: their lengths);
    an input without that many rows adds its total to every row. What every output is computed from."""
    rows = request.rows
    total = np.zeros(rows, dtype=np.float64)
    for spec in model.inputs:
        values = request.inputs[spec.name]
        if spec.datatype.name == kserve.BYTES:
            values = np.vectorize(len, otypes=[np.float64])(values) if values.size else values.astype(np.float64)
        values = np.asarray(values, dtype=np.float64)
        if values.ndim and values.shape[0] == rows:
            total += values.reshape(rows, -1).sum(axis=1)
        else:
            total += values.sum()
    return total


def rows_of(request: TritonRequest) -> int:
    """The rows a request counts for in a batch (its batch size; 1 without a batch dimension)."""
    return request.rows


def _per_row(model: TritonModel, spec: TensorSpec) -> bool:
    """An output with one entry per row: every output of a batching model, else one whose first dim is -1."""
    return model.max_batch_size > 0 or bool(spec.dims and spec.dims[0] == WILDCARD)


def predict_batch(model: TritonModel, requests: Sequence[TritonRequest]) -> list[dict[str, np.ndarray]]:
    """Every output of every request of a batch, in one call: output element j of a row
    with score s is sin(s / 1000 + j) (cast to the output's datatype); an output without rows takes
    the request's summed score. Deterministic, a function of the values, so a batched row gets the
    same answer as the row sent alone."""
    scores = [row_scores(model, r) for r in requests]
    results = []
    for request, score in zip(requests, scores, strict=True):
        one = {}
        for spec in model.outputs:
            per_row = _per_row(model, spec)
            inner = spec.dims[1:] if per_row and model.max_batch_size == 0 else spec.dims
            width = math.prod(inner)
            base = score if per_row else score.sum(keepdims=True)
            values = np.sin(base[:, None] / 1000.0 + np.arange(width)[None, :])
            shape = (request.rows, *inner) if per_row else tuple(spec.dims)
            one[spec.name] = _as_output(values, spec.datatype).reshape(shape)
        results.append(one)
    return results


def _as_output(values: np.ndarray, dt: kserve.Datatype) -> np.ndarray:
    if dt.name == kserve.BYTES:
        out = np.empty(values.shape, dtype=object)
        out.reshape(-1)[:] = [f"{v:.6f}".encode() for v in values.reshape(-1)]
        return out
    if dt.name == "BOOL":
        return values > 0
    if dt.name == kserve.BF16:
        return (np.asarray(values, np.float32).view("<u4") & 0xFFFF0000).view("<f4")
    assert dt.wire is not None
    if dt.name.startswith(("INT", "UINT")):
        return np.round(values * 100).astype(dt.values)
    return values.astype(dt.values)


def encode(model: TritonModel, request: TritonRequest, outputs: dict[str, np.ndarray]) -> tuple[bytes, str]:
    """The answer's body and Content-Type; an output Triton cannot write in JSON is its 400."""
    specs = {spec.name: spec for spec in model.outputs}
    tensors = [(kserve.Tensor(name, specs[name].datatype, outputs[name]), binary)
               for name, binary in request.outputs.items()]
    try:
        return kserve.encode_answer(model.name, MODEL_VERSION, tensors, request.request_id or None)
    except SerializationError as exc:
        raise _refuse(BAD_REQUEST, str(exc)) from None


def model_for(config: Any) -> TritonModel | None:
    """The Triton model a config describes (`protocol: triton`), else None."""
    if getattr(config, "protocol", "sagemaker") != "triton":
        return None
    return TritonModel.parse(config.model_inputs or DEFAULT_INPUTS, config.model_outputs or DEFAULT_OUTPUTS,
                             config.max_batch_size)


__all__ = ["DEFAULT_INPUTS", "DEFAULT_OUTPUTS", "PROTOCOLS", "TensorSpec", "TritonModel", "TritonRequest", "encode",
           "header_length", "model_for", "parse_request", "parse_tensors", "predict_batch", "rows_of"]
