"""The payload options (`--serializer`, `--selection`, `--split`, ...) and `prepare_payloads`, the one
function that turns them into what a test sends.

`sm-locust run` (checking before anything starts) and the default locustfile (building the pool per
process) both call it, so they agree. The options are `OptionSpec`s listed in
`config.options.OPTION_PROVIDERS`, one value each so the web UI can edit them; a serializer option
given to a serializer that does not take it is an error naming the serializers it belongs to.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import Options, OptionSpec, settings_fields, spec_defaults
from sm_locust.errors import UsageError
from sm_locust.mix.options import MixSettings, mix_settings
from sm_locust.mix.pool import MixedPool
from sm_locust.payloads import encoded_by_serializer, load_payloads
from sm_locust.payloads.llm import llm_pool
from sm_locust.payloads.split import parts_of
from sm_locust.payloads.trace import TracePool
from sm_locust.serializers import SERIALIZERS, ResponseValidator, create_serializer

OPTIONS: list[OptionSpec] = [
    OptionSpec("--serializer", "SM_LOCUST_SERIALIZER", "",
               "payloads: how .npy/.npz and module:function payloads are encoded, and responses decoded: "
               "json, protobuf, npy, numpy-raw, csv, raw, triton (Triton's binary tensors), triton-json "
               "(KServe v2 JSON) (default json)"),
    OptionSpec("--json-layout", "SM_LOCUST_JSON_LAYOUT", "",
               "json serializer: inputs (columns, default) or instances (rows)"),
    OptionSpec("--model-name", "SM_LOCUST_MODEL_NAME", "",
               "protobuf serializer: PredictRequest model_spec.name (default model)"),
    OptionSpec("--signature-name", "SM_LOCUST_SIGNATURE_NAME", "",
               "protobuf serializer: PredictRequest signature_name (default serving_default)"),
    OptionSpec("--input-names", "SM_LOCUST_INPUT_NAMES", "",
               "protobuf / triton serializers: tensor names for the payload's keys, e.g. feat_ids=ids,feat_vals=vals; "
               "triton: the name of a .npy's one array, e.g. input_ids"),
    OptionSpec("--input-datatypes", "SM_LOCUST_INPUT_DATATYPES", "",
               "triton serializers: Triton datatypes of the inputs, e.g. input_ids=INT32,attention_mask=INT32 "
               "(default: from the arrays' dtypes; a value the type cannot hold is refused)"),
    OptionSpec("--output-names", "SM_LOCUST_OUTPUT_NAMES", "",
               "triton serializers: the outputs to ask for, comma-separated, e.g. logits (default: all)"),
    OptionSpec("--binary-output", "SM_LOCUST_BINARY_OUTPUT", "",
               "triton serializers: ask for answers as binary tensors, on or off (default on for triton, off for "
               "triton-json)"),
    OptionSpec("--array-dtype", "SM_LOCUST_ARRAY_DTYPE", "",
               "npy / numpy-raw serializers: dtype of the array sent, e.g. float32, float64 "
               "(numpy-raw default float32)"),
    OptionSpec("--array-shape", "SM_LOCUST_ARRAY_SHAPE", "",
               "numpy-raw serializer: shape to send, e.g. N,78 (N = any rows)"),
    OptionSpec("--selection", "SM_LOCUST_SELECTION", "",
               "payloads: round-robin (default), random or weighted (default when the source has Weight keys)"),
    OptionSpec("--payload-seed", "SM_LOCUST_PAYLOAD_SEED", 0,
               "payloads: seed for random/weighted selection and .npy/.npz row sampling", int, minimum=0),
    OptionSpec("--batch-size", "SM_LOCUST_BATCH_SIZE", 1, "payloads: rows per request body for .npy/.npz sources", int,
               minimum=1),
    OptionSpec("--max-bodies", "SM_LOCUST_MAX_BODIES", 64,
               "payloads: distinct bodies pre-encoded from a .npy/.npz source", int, minimum=1),
    OptionSpec("--payload-base64", "SM_LOCUST_PAYLOAD_BASE64", False,
               "payloads: every JSONL Body is base64 (as \"BodyEncoding\": \"base64\" on each line)", bool),
    OptionSpec("--split", "SM_LOCUST_SPLIT", 1,
               "fan-out: send each request's rows as K concurrent sub-requests, recorded as one InvokeEndpointSplit "
               "request plus K '<name>/part' requests (default 1: no fan-out)", int, minimum=1),
    OptionSpec("--validate-response", "SM_LOCUST_VALIDATE_RESPONSE", False,
               "decode every response and count a bad one as an InvalidResponse failure (rows must match the request)",
               bool),
    OptionSpec("--expect-outputs", "SM_LOCUST_EXPECT_OUTPUTS", "",
               "with --validate-response: output names the response must hold, comma-separated, e.g. prob"),
    OptionSpec("--expect-shape", "SM_LOCUST_EXPECT_SHAPE", "",
               "with --validate-response: shape of every output, e.g. N or N,1 (N = any size)"),
]

# option dest -> serializer constructor parameter
SERIALIZER_OPTIONS = {
    "json_layout": "layout",
    "model_name": "model_name",
    "signature_name": "signature_name",
    "input_names": "input_names",
    "input_datatypes": "input_datatypes",
    "output_names": "output_names",
    "binary_output": "binary_output",
    "array_dtype": "dtype",
    "array_shape": "shape",
}
DEFAULT_SERIALIZER = "json"


_DEFAULT = spec_defaults(OPTIONS)


@dataclass(frozen=True)
class PayloadSettings:
    """The payload options of one run, by their dest names (defaults: OPTIONS)."""

    serializer: str = _DEFAULT["serializer"]
    json_layout: str = _DEFAULT["json_layout"]
    model_name: str = _DEFAULT["model_name"]
    signature_name: str = _DEFAULT["signature_name"]
    input_names: str = _DEFAULT["input_names"]
    input_datatypes: str = _DEFAULT["input_datatypes"]
    output_names: str = _DEFAULT["output_names"]
    binary_output: str = _DEFAULT["binary_output"]
    array_dtype: str = _DEFAULT["array_dtype"]
    array_shape: str = _DEFAULT["array_shape"]
    selection: str = _DEFAULT["selection"]
    payload_seed: int = _DEFAULT["payload_seed"]
    batch_size: int = _DEFAULT["batch_size"]
    max_bodies: int = _DEFAULT["max_bodies"]
    payload_base64: bool = _DEFAULT["payload_base64"]
    split: int = _DEFAULT["split"]
    validate_response: bool = _DEFAULT["validate_response"]
    expect_outputs: str = _DEFAULT["expect_outputs"]
    expect_shape: str = _DEFAULT["expect_shape"]

    @classmethod
    def from_options(cls, options: Options) -> PayloadSettings:
        return cls(**settings_fields(cls, options))

    def serializer_options(self) -> dict[str, str]:
        """The serializer options given (non-empty), checked against the chosen serializer."""
        name = SERIALIZERS.canonical(self.serializer or DEFAULT_SERIALIZER)
        out = {}
        for dest, param in SERIALIZER_OPTIONS.items():
            value = getattr(self, dest)
            if value in ("", None):
                continue
            takes = [n for n in SERIALIZERS.names()
                     if param in inspect.signature(SERIALIZERS.get(n).__init__).parameters]
            if name not in takes:
                flag = "--" + dest.replace("_", "-")
                raise UsageError(f"{flag} applies to the {' / '.join(takes)} "
                                 f"serializer{'s' if len(takes) > 1 else ''}, not {name!r}; pass --serializer "
                                 f"{takes[0]} or drop {flag}")
            out[param] = value
        return out

    def build_serializer(self):
        return create_serializer(self.serializer or DEFAULT_SERIALIZER, **self.serializer_options())

    def build_validator(self, serializer):
        """A ResponseValidator when --validate-response is on, else None."""
        expected_keys = [k.strip() for k in self.expect_outputs.split(",") if k.strip()]
        expected_shape = parse_expected_shape(self.expect_shape)
        if not self.validate_response:
            if expected_keys or expected_shape is not None:
                raise UsageError("--expect-outputs / --expect-shape only apply with --validate-response on")
            return None
        return ResponseValidator(serializer, expected_keys=expected_keys, expected_shape=expected_shape)


def parse_expected_shape(text: str) -> tuple[int | None, ...] | None:
    """`"N,1"` -> (None, 1); empty -> None (any shape)."""
    if not text or not text.strip():
        return None
    dims: list[int | None] = []
    for part in text.strip("()[] ").split(","):
        part = part.strip()
        if part.upper() in ("N", "*", "?", "-1"):
            dims.append(None)
        elif part.isdigit():
            dims.append(int(part))
        else:
            raise UsageError(f"--expect-shape {text!r} is not a shape such as N or N,1 (whole numbers, N = any size)")
    return tuple(dims)


def check_serializer_applies(ps: PayloadSettings, settings: SageMakerSettings, validates: bool) -> None:
    """`--serializer` encodes .npy/.npz and module:function payloads and decodes responses with
    `--validate-response`; given for a payload sent as it is (a file, folder, .jsonl, .pkl) and no
    validation, it would do nothing, silently (random bytes sent with `--serializer json`): refused."""
    source = settings.payload
    if not ps.serializer or validates or not source or encoded_by_serializer(source):
        return
    raise UsageError(f"--serializer {ps.serializer} does not apply to payload {source!r}: a file, folder, .jsonl or "
                     ".pkl payload is sent as it is (the serializer encodes .npy/.npz and module:function payloads, "
                     "and decodes responses with --validate-response on); drop --serializer, or set --content-type for "
                     "the file's format")


@dataclass
class PreparedPayloads:
    """What a test sends: the pool (bodies already encoded), the validator (or None), the fan-out,
    the traffic mix (`sm_locust.mix`; the pool picks each request's target from it)."""

    pool: Any
    validator: Any
    split: int
    serializer: str
    mix: MixSettings = field(default_factory=lambda: MixSettings(None))

    def describe(self) -> dict:
        """summary.json's `payload` entry: source and body sizes, plus the options that shaped them."""
        out = {"source": self.pool.description, **self.pool.sizes(), "selection": self.pool.selection}
        if self.split > 1:
            lengths = [len(p.body) for inv in self.pool.invocations for p in parts_of(inv) or ()]
            out["split"] = self.split
            out["part_avg_bytes"] = round(sum(lengths) / len(lengths), 1)
        out["validate_response"] = self.validator is not None
        return out


def check_trace_alone(split: int, mixed: bool, async_input: str) -> None:
    """`--trace` sends each row once, whole, by InvokeEndpoint(WithResponseStream): no fan-out, traffic mix or
    asynchronous input (one line naming the flag)."""
    for flag, given in (("--split", split > 1), ("--target-models / --inference-components", mixed),
                        ("--async-input-location", bool(async_input))):
        if given:
            raise UsageError(f"--trace sends each traced request once, as it is, at its time; drop {flag}")


def prepare_payloads(settings: SageMakerSettings, options: Options, *, process: int = 0) -> PreparedPayloads:
    """Build and check everything the payload options ask for (UsageError, one line, when wrong).

    `settings` is the run's `SageMakerSettings` (payload source, Content-Type, headers); `options`
    the run's parsed options (the payload, LLM and mix options among them).
    With a traffic mix (`--target-models`, `--inference-components`) the pool picks each request's
    target, from the seeded stream of Locust process `process` (`sm_locust.mix.options`).
    """
    ps = PayloadSettings.from_options(options)
    serializer = ps.build_serializer()
    validator = ps.build_validator(serializer)
    check_serializer_applies(ps, settings, validator is not None)
    mix = mix_settings(options, split=ps.split)
    pool: object = llm_pool(settings, options) or load_payloads(  # --prompts: LLM requests (payloads/llm.py)
        settings.payload,
        content_type=settings.content_type or None,
        serializer=serializer,
        selection=ps.selection or None,
        seed=ps.payload_seed,
        batch_size=ps.batch_size,
        max_bodies=ps.max_bodies,
        base64=ps.payload_base64,
        split=ps.split,
        max_body_bytes=None if options.async_input_location else MAX_BODY_BYTES,  # async: the input is in S3
        **settings.headers(),
    )
    if isinstance(pool, TracePool):  # each traced request is sent once, as it is, at its time
        check_trace_alone(ps.split, mix.mix is not None, options.async_input_location)
    if mix.mix is not None:
        pool = MixedPool(pool, mix.mix, mix.seed, process)
    return PreparedPayloads(pool, validator, ps.split, serializer.name, mix)
