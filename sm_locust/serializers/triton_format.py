"""`triton` and `triton-json`: requests for NVIDIA Triton on a SageMaker endpoint (KServe v2 protocol).

Triton takes the KServe v2 inference protocol through InvokeEndpoint, in two kinds (`kserve.py`
holds the wire facts; docs/payloads.md, "Triton"):

- `triton` (aliases `triton-binary`, `kserve-binary`): the binary tensor extension. A JSON document
  naming each input (`parameters.binary_data_size`) followed by the raw little-endian tensors, with
  Content-Type `application/vnd.sagemaker-triton.binary+json;json-header-size=N`, N exact per body.
  Answers are asked for in binary too (`binary_output`, default on).
- `triton-json` (aliases `kserve-v2`, `kserve-json`): the same document with each tensor's values in
  `data`, flat and row-major; `application/json`. Answers in JSON unless `binary_output` is on.

A request object is a dict of arrays, one per input, keyed by tensor name (an `.npz` with
`--batch-size K` gives each body [K, ...] rows of every array); `input_names` renames keys
(`input_ids=INPUT__0`) or names the one array of a `.npy` (`input_names="input_ids"`).
Datatypes come from the numpy dtype (int32 -> INT32, text -> BYTES) or from `input_datatypes`
(`input_ids=INT32,attention_mask=INT32`); a value the datatype cannot hold is refused before the
test. `output_names` names the outputs asked for. Answers decode into {output name: array}
whichever kind they come in, so `--validate-response` checks names, shapes and rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from sm_locust.serializers import kserve
from sm_locust.serializers.base import SerializationError, Serializer
from sm_locust.serializers.content_types import JSON, TRITON, canonical

TRUE_WORDS = ("on", "true", "yes", "1")
FALSE_WORDS = ("off", "false", "no", "0")


def _switch(value: object, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS or text in FALSE_WORDS:
        return text in TRUE_WORDS
    raise SerializationError(f"{what} must be on or off, got {value!r}")


def _pairs(value: Mapping[str, str] | str | None, what: str, example: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in value.items()}
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in str(value).split(","))):
        key, sep, name = part.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise SerializationError(f"{what} entry {part!r} is not KEY=VALUE (e.g. {example})")
        out[key.strip()] = name.strip()
    return out


def parse_input_names(value: Mapping[str, str] | str | None) -> tuple[dict[str, str], str | None]:
    """`"ids=input_ids,mask=attention_mask"` -> ({key: tensor name}, None); `"input_ids"` (the one
    array of a .npy) -> ({}, "input_ids")."""
    if isinstance(value, str) and value.strip() and "=" not in value:
        name = value.strip()
        if "," in name:
            raise SerializationError(f"input names {name!r}: one bare name (a .npy's input) or KEY=NAME pairs "
                                     "(an .npz's), e.g. input_ids or ids=input_ids,mask=attention_mask")
        return {}, name
    return _pairs(value, "input names", "ids=input_ids"), None


def parse_output_names(value: Any) -> tuple[str, ...]:
    """`"logits,probs"` or a list -> the output names asked for."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(v).strip() for v in items if str(v).strip())


class TritonSerializer(Serializer):
    """`triton`: Triton's binary tensor extension through SageMaker (see the module docstring)."""

    name = "triton"
    format: ClassVar[str | None] = TRITON
    default_content_type = canonical(TRITON)
    binary_inputs = True
    default_binary_output = True

    def __init__(self, input_names: Mapping[str, str] | str | None = None,
                 input_datatypes: Mapping[str, str] | str | None = None,
                 output_names: object = None, binary_output: object = None, content_type: str | None = None):
        super().__init__(content_type)
        self.input_names, self.array_name = parse_input_names(input_names)
        self.input_datatypes = {key: kserve.datatype(v, f"--input-datatypes {key}=")
                                for key, v in _pairs(input_datatypes, "input datatypes", "input_ids=INT32").items()}
        self.output_names = parse_output_names(output_names)
        self.binary_output = (self.default_binary_output if binary_output in (None, "")
                              else _switch(binary_output, "binary output"))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(outputs={list(self.output_names)}, binary_output={self.binary_output}, "
                f"content_type={self.content_type!r})")

    def tensors(self, obj: object) -> list[kserve.Tensor]:
        """The named input tensors of a request object (a dict of arrays, or one array and its name)."""
        if isinstance(obj, Mapping):
            if self.array_name is not None:
                raise SerializationError(f"input names {self.array_name!r} is one bare name, for a .npy; this source "
                                         f"holds {len(obj)} arrays: give KEY=NAME pairs (or none, to keep the keys)")
            named = [(str(key), self.input_names.get(str(key), str(key)), np.asarray(value))
                     for key, value in obj.items()]
        else:
            if self.array_name is None:
                raise SerializationError("one array (a .npy) has no tensor name: give --input-names NAME, the "
                                         "model's input (e.g. --input-names input_ids)")
            named = [(self.array_name, self.array_name, np.asarray(obj))]
        unknown = set(self.input_datatypes) - {k for k, _, _ in named} - {n for _, n, _ in named}
        if unknown:
            raise SerializationError(f"--input-datatypes names {sorted(unknown)[0]!r}, which is not an input; the "
                                     f"inputs are {', '.join(n for _, n, _ in named)}")
        out = []
        for key, name, arr in named:
            given = self.input_datatypes.get(name) or self.input_datatypes.get(key)
            out.append(kserve.Tensor(name, given or kserve.datatype_of(arr.dtype, f"input {name!r}"), arr))
        return out

    def encode(self, obj: object) -> tuple[bytes, str]:
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return bytes(obj), self.content_type_of(bytes(obj))
        body, content_type = kserve.encode_request(self.tensors(obj), binary=self.binary_inputs,
                                                   outputs=self.output_names, binary_output=self.binary_output)
        return body, self.content_type if self.content_type != self.default_content_type else content_type

    def _serialize(self, obj: object) -> bytes:
        return self.encode(obj)[0]

    def content_type_of(self, body: bytes) -> str:
        """A binary body's exact Content-Type: its JSON document's length read from the body itself."""
        if self.content_type != self.default_content_type:
            return self.content_type
        size = kserve.document_length(body)
        return kserve.binary_content_type(size) if size < len(body) else canonical(JSON)

    def _deserialize(self, data: bytes) -> dict[str, np.ndarray]:
        return kserve.decode_answer(data, None).tensors

    def _deserialize_typed(self, data: bytes, content_type: str | None) -> dict[str, np.ndarray]:
        return kserve.decode_answer(data, content_type).tensors


class TritonJsonSerializer(TritonSerializer):
    """`triton-json`: the same requests with every tensor's values in JSON `data` (`application/json`)."""

    name = "triton-json"
    format = None  # it reads its own JSON answers (`decoder_for` keeps it for application/json); the JSON
    # format's reader stays `json`, which also reads KServe v2 answers
    default_content_type = canonical(JSON)
    binary_inputs = False
    default_binary_output = False

    def content_type_of(self, body: bytes) -> str:
        return self.content_type


def triton_rows(body: bytes) -> int | None:
    """Rows in a Triton binary request read as bytes: the first dimension of its first input."""
    doc = kserve.decode_request(body, kserve.BINARY_MIME).document
    shape = (doc.get("inputs") or [{}])[0].get("shape") or []
    return int(shape[0]) if shape else None


__all__ = ["TritonJsonSerializer", "TritonSerializer", "parse_input_names", "parse_output_names", "triton_rows"]
