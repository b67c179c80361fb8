"""Invoke-args JSONL: one `invoke_endpoint` argument set per line (sm-serverless-benchmarking format).

`Body` is text (sent as UTF-8), base64 marked with `"BodyEncoding": "base64"` (or every line with
`--payload-base64`), or a JSON object/array sent as compact JSON. The other keys are boto3's
`invoke_endpoint` argument names; `Weight` (>= 0) feeds weighted selection. Binary bodies travel as
base64 here (`pickles.py` reads the pickle form with a plain-data unpickler). Every error names
file:line and why.
"""

from __future__ import annotations

import base64 as b64
import binascii
from pathlib import Path
from typing import Any

import orjson

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.files import read_payload_file, without_bom
from sm_locust.payloads.template import InvocationTemplate

# invoke-args key -> Invocation field
HEADER_KEYS = {
    "ContentType": "content_type",
    "Accept": "accept",
    "CustomAttributes": "custom_attributes",
    "TargetModel": "target_model",
    "TargetVariant": "target_variant",
    "TargetContainerHostname": "target_container_hostname",
    "InferenceComponentName": "inference_component",
    "InferenceId": "inference_id",
    "EnableExplanations": "enable_explanations",
    "SessionId": "session_id",
}
BODY_ENCODINGS = ("base64", "utf-8", "text")
VALID_KEYS = ("Body", "BodyEncoding", *HEADER_KEYS, "Weight")


def _body(args: dict, where: str, force_base64: bool) -> bytes:
    if "Body" not in args:
        raise UsageError(f"{where}: no \"Body\" key; each line needs the request body")
    body, encoding = args["Body"], args.get("BodyEncoding")
    if encoding is not None and (not isinstance(encoding, str) or encoding.lower() not in BODY_ENCODINGS):
        raise UsageError(f"{where}: BodyEncoding {encoding!r} is not one of: {', '.join(BODY_ENCODINGS)}")
    is_base64 = encoding.lower() == "base64" if isinstance(encoding, str) else force_base64
    if isinstance(body, (bytes, bytearray)):  # from a .pkl (pickles.py): already the bytes to send
        return bytes(body)
    if isinstance(body, (dict, list)):
        if is_base64:
            raise UsageError(f"{where}: a base64 Body must be a string, not a JSON {type(body).__name__}")
        return orjson.dumps(body)
    if not isinstance(body, str):
        raise UsageError(f"{where}: Body must be text (or base64 text), got {type(body).__name__}")
    if not is_base64:
        return body.encode("utf-8")
    try:
        return b64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError(f"{where}: Body is marked base64 but does not decode ({exc})") from None


def parse_invoke_args(
    args: object, where: str, template: InvocationTemplate, force_base64: bool = False
) -> tuple[Invocation, float | None]:
    """One invoke-args object -> (Invocation, its Weight or None)."""
    if not isinstance(args, dict):
        raise UsageError(f"{where}: expected a JSON object with a \"Body\" key, got a JSON {type(args).__name__}")
    unknown = [k for k in args if k not in VALID_KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(VALID_KEYS)}")
    fields: dict[str, Any] = {}
    for key, attr in HEADER_KEYS.items():
        value = args.get(key)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{where}: {key} must be a string, got {type(value).__name__}")
        fields[attr] = value
    weight = args.get("Weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0):
        raise UsageError(f"{where}: Weight must be a number >= 0, got {weight!r}")
    body = _body(args, where, force_base64)
    return template.make(body, where=where, **fields), weight


def load_jsonl(path: Path, template: InvocationTemplate,
               force_base64: bool = False) -> tuple[list[Invocation], list[float] | None]:
    """Invocations from an invoke-args JSONL file, plus weights when any line has `Weight`."""
    data = without_bom(read_payload_file(path))
    invocations: list[Invocation] = []
    weights: list[float | None] = []
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            args = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc})") from None
        invocation, weight = parse_invoke_args(args, where, template, force_base64)
        invocations.append(invocation)
        weights.append(weight)
    if not invocations:
        raise UsageError(f"payload file {str(path)!r} holds no invocations; write one JSON object per line")
    if all(w is None for w in weights):
        return invocations, None
    return invocations, [1.0 if w is None else float(w) for w in weights]
