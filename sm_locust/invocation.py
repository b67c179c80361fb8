"""What one invocation is and how its failure is named: the contract every transport shares.

Both transports (boto3 and the fast signed HTTP path) report through Locust's `request` event in
the same way, so the failure table reads the same whichever is used:

- `request_type` is the API operation (`InvokeEndpoint`, `InvokeEndpointWithResponseStream`, ...);
- `name` is the endpoint name, or `endpoint/variant`, `endpoint/model` when a target is set; a
  traffic mix (`sm_locust.mix`: many models or components) keeps the endpoint's one entry
  (`target_in_name=False`) and records each target apart (summary.json `targets`);
- a failure is an `InvocationError` whose text starts with the error code botocore would give
  (`ThrottlingException: Rate exceeded`, `ModelError: ...`, `EndpointConnectionError: ...`), so
  Locust's failure table groups failures by code. Its repr is that same text. Code and message are
  the endpoint's words: sanitised (`sm_locust.sanitize`) and bounded before anything shows them.

What counts (`is_invocation`, the one rule the recorder, summary.json, gates, compare and report
apply): every entry is a logical invocation except the latency series timed inside one (`TTFT`,
`InterChunk`: a stream fires them beside its `InvokeEndpointWithResponseStream` entry) and the
parts of a fan-out request (`<name>/part`: each part is inside its `InvokeEndpointSplit` entry).
Counting those as requests would count one stream three times and dilute its error rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sm_locust.sanitize import clean

INVOKE_ENDPOINT = "InvokeEndpoint"
INVOKE_ENDPOINT_STREAM = "InvokeEndpointWithResponseStream"
INVOKE_ENDPOINT_ASYNC = "InvokeEndpointAsync"

TTFT = "TTFT"  # a stream's time to first token (call start -> first PayloadPart)
INTER_CHUNK = "InterChunk"  # the gaps between a stream's PayloadParts
LATENCY_SERIES = frozenset((TTFT, INTER_CHUNK))
"""Request types that time part of an invocation: latency series beside the invocations, never requests."""
MODEL_WAIT_HEADER = "X-Sm-Locust-Model-Wait-Ms"
"""Response header of the local multi-model emulation: the ms a request waited for its model's download
and load (absent on a cache hit). SageMaker has no per-request signal; the client reads it when present."""
PART_SUFFIX = "/part"
"""Name suffix of a fan-out part (`--split K`): the endpoint's view, already inside its logical request."""

_VOLATILE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
MAX_MESSAGE = 200
MAX_CODE = 80


class InvocationError(Exception):
    """A failed invocation, named by its error code; reported to Locust, never raised to a User."""

    def __init__(self, code: str, message: str = "", status: int | None = None):
        # the endpoint's text: sanitised here, once, before Locust's failure table, its CSV, log and web UI
        code = clean(code, MAX_CODE) or "Error"
        message = clean(_VOLATILE.sub("<id>", " ".join(str(message).split())), MAX_MESSAGE)
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status

    def __repr__(self) -> str:
        return str(self)


def is_latency_series(request_type: str) -> bool:
    """A TTFT / InterChunk entry: a latency measured inside an invocation, not a request."""
    return request_type in LATENCY_SERIES


def is_invocation(request_type: str, name: str) -> bool:
    """A Locust entry (or failure) counted as logical invocations: not a latency series, not a fan-out part."""
    return request_type not in LATENCY_SERIES and not name.endswith(PART_SUFFIX)


def error_code(error: object) -> str:
    """The code a failure is counted under in summary.json (`ThrottlingException`, ...)."""
    if isinstance(error, InvocationError):
        return error.code
    text = str(error)
    head = text.split(":", 1)[0].strip()
    if head and " " not in head and len(head) < 80:
        return head
    return type(error).__name__ if not isinstance(error, str) else "Error"


def attribute_values(custom_attributes: str | None) -> dict[str, str]:
    """CustomAttributes (request or response) as key=value pairs separated by `;`:
    `shape=N,78;dtype=float32;trace=x` -> {"shape": "N,78", "dtype": "float32", "trace": "x"} (keys lower case)."""
    values = {}
    for part in (custom_attributes or "").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


@dataclass(frozen=True)
class Invocation:
    """One prepared request: the body is already encoded, headers already chosen.

    Payload sources build these once before a test; the request path only sends them.
    """

    body: bytes
    content_type: str | None = "application/json"
    accept: str | None = None
    custom_attributes: str | None = None
    target_model: str | None = None
    target_variant: str | None = None
    target_container_hostname: str | None = None
    inference_component: str | None = None
    inference_id: str | None = None
    enable_explanations: str | None = None
    session_id: str | None = None
    rows: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    target_in_name: bool = True
    """False for a traffic mix: the entry name leaves the model / component out (one entry per endpoint)."""

    @property
    def target(self) -> str | None:
        """The model (TargetModel) or inference component this request names; None: the endpoint's own."""
        return self.target_model or self.inference_component

    def request_name(self, endpoint_name: str) -> str:
        """The Locust entry name: the endpoint, refined by the target when one is set."""
        target = self.target_variant or (self.target_model or self.inference_component if self.target_in_name else None)
        return f"{endpoint_name}/{target}" if target else endpoint_name

    def boto3_kwargs(self) -> dict:
        """Keyword arguments for `sagemaker-runtime` `invoke_endpoint`, minus EndpointName."""
        pairs = {
            "Body": self.body,
            "ContentType": self.content_type,
            "Accept": self.accept,
            "CustomAttributes": self.custom_attributes,
            "TargetModel": self.target_model,
            "TargetVariant": self.target_variant,
            "TargetContainerHostname": self.target_container_hostname,
            "InferenceComponentName": self.inference_component,
            "InferenceId": self.inference_id,
            "EnableExplanations": self.enable_explanations,
            "SessionId": self.session_id,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def http_headers(self) -> dict[str, str]:
        """The wire headers InvokeEndpoint sends for these fields (docs/facts.md)."""
        pairs = {
            "Content-Type": self.content_type,
            "Accept": self.accept,
            "X-Amzn-SageMaker-Custom-Attributes": self.custom_attributes,
            "X-Amzn-SageMaker-Target-Model": self.target_model,
            "X-Amzn-SageMaker-Target-Variant": self.target_variant,
            "X-Amzn-SageMaker-Target-Container-Hostname": self.target_container_hostname,
            "X-Amzn-SageMaker-Inference-Component": self.inference_component,
            "X-Amzn-SageMaker-Inference-Id": self.inference_id,
            "X-Amzn-SageMaker-Enable-Explanations": self.enable_explanations,
            "X-Amzn-SageMaker-Session-Id": self.session_id,
        }
        return {k: v for k, v in pairs.items() if v is not None}
