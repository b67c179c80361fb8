"""The endpoint's options (`--endpoint-name`, `--endpoint-url`, `--payload`, the invocation headers,
timeouts) and `SageMakerSettings`, their typed view: which endpoint a run invokes, with what.

Declared here, below every feature that sends (transport, users, payloads), so each of them can read
the endpoint without importing the others; `sm_locust.config.options.OPTION_PROVIDERS` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sm_locust.aws.runtime_api import check_endpoint_name, check_header
from sm_locust.config.options import Options, OptionSpec, settings_fields, spec_defaults
from sm_locust.errors import UsageError


def _header_check(field: str):
    """The web UI's check of a header typed in its form: the rule `--<flag>` is held to (aws/runtime_api.py);
    a CRLF or a non-ASCII name was accepted there, then failed every request."""
    return lambda text: check_header(field, text)


OPTIONS: list[OptionSpec] = [
    OptionSpec("--endpoint-name", "SM_LOCUST_ENDPOINT_NAME", "", "SageMaker endpoint name to invoke (required)"),
    # Where the signed requests and the session token go, and code loading (module:function): set on
    # the command line only, never from the web UI (sm_locust/locustfiles/_webui.py).
    OptionSpec("--endpoint-url", "SM_LOCUST_ENDPOINT_URL", "",
               "runtime API URL, e.g. http://127.0.0.1:8080 for the local endpoint (default: AWS, or "
               "$AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME)",
               web_ui=False),
    OptionSpec("--region", "SM_LOCUST_REGION", "", "AWS region (default: the boto3 chain, $AWS_REGION / profile)",
               web_ui=False),
    OptionSpec("--aws-profile", "SM_LOCUST_AWS_PROFILE", "", "AWS profile name (default: $AWS_PROFILE / default chain)",
               web_ui=False),
    OptionSpec("--payload", "SM_LOCUST_PAYLOAD", "",
               "request body source: a file sent verbatim, .jsonl, .pkl, folder, .npy/.npz, module:function "
               "(docs/payloads.md)",
               web_ui=False),
    OptionSpec("--content-type", "SM_LOCUST_CONTENT_TYPE", "",
               "Content-Type of the request body "
               "(default: from the payload source; application/json for a plain file)",
               web_check=_header_check("content_type")),
    OptionSpec("--accept", "SM_LOCUST_ACCEPT", "", "Accept header: the response format to ask for",
               web_check=_header_check("accept")),
    OptionSpec("--custom-attributes", "SM_LOCUST_CUSTOM_ATTRIBUTES", "", "X-Amzn-SageMaker-Custom-Attributes",
               web_check=_header_check("custom_attributes")),
    OptionSpec("--target-model", "SM_LOCUST_TARGET_MODEL", "", "TargetModel (multi-model endpoints)",
               web_check=_header_check("target_model")),
    OptionSpec("--target-variant", "SM_LOCUST_TARGET_VARIANT", "", "TargetVariant (production variant)",
               web_check=_header_check("target_variant")),
    OptionSpec("--inference-component", "SM_LOCUST_INFERENCE_COMPONENT", "", "InferenceComponentName",
               web_check=_header_check("inference_component")),
    OptionSpec("--inference-id", "SM_LOCUST_INFERENCE_ID", "", "InferenceId sent with every request",
               web_check=_header_check("inference_id")),
    OptionSpec("--think-time", "SM_LOCUST_THINK_TIME", 0.0,
               "seconds each user waits between calls (default 0: invoke as fast as it can, one call after another)",
               float, minimum=0),
    OptionSpec("--connect-timeout", "SM_LOCUST_CONNECT_TIMEOUT", 5.0, "connection timeout in seconds", float, above=0),
    OptionSpec("--read-timeout", "SM_LOCUST_READ_TIMEOUT", 60.0, "read timeout in seconds", float, above=0),
    OptionSpec("--sm-out", "SM_LOCUST_OUT", "",
               "run folder to write summary.json and timeline.jsonl into (default: a new reports/<run-id>/ per "
               "swarm; with this, later swarms of the web UI write DIR-2, DIR-3, ...)",
               web_ui=False, forward=False, group="output"),
    OptionSpec("--sm-progress", "SM_LOCUST_PROGRESS", 0.0, "print a one-line progress report every N seconds (0 = off)",
               float, web_ui=False, forward=False, minimum=0, group="output"),
    OptionSpec("--sm-closing", "SM_LOCUST_CLOSING", False,
               "the sm-locust command that started Locust prints the verdict in its closing lines (sm-locust run), "
               "so the shape does not print it a second time", bool, web_ui=False, forward=False, group="output"),
]


_DEFAULT = spec_defaults(OPTIONS)


@dataclass(frozen=True)
class SageMakerSettings:
    """The endpoint settings of one run, typed (`from_options`: parsed `Options`); `validate` checks
    what the options' ranges cannot: the name and headers as SageMaker takes them, a payload."""

    endpoint_name: str = _DEFAULT["endpoint_name"]
    endpoint_url: str = _DEFAULT["endpoint_url"]
    region: str = _DEFAULT["region"]
    aws_profile: str = _DEFAULT["aws_profile"]
    payload: str = _DEFAULT["payload"]
    content_type: str = _DEFAULT["content_type"]
    accept: str = _DEFAULT["accept"]
    custom_attributes: str = _DEFAULT["custom_attributes"]
    target_model: str = _DEFAULT["target_model"]
    target_variant: str = _DEFAULT["target_variant"]
    inference_component: str = _DEFAULT["inference_component"]
    inference_id: str = _DEFAULT["inference_id"]
    think_time: float = _DEFAULT["think_time"]
    connect_timeout: float = _DEFAULT["connect_timeout"]
    read_timeout: float = _DEFAULT["read_timeout"]
    sm_out: str = _DEFAULT["sm_out"]
    sm_progress: float = _DEFAULT["sm_progress"]
    transport: str = "fast"  # --transport's default (sm_locust.transport.options; a test checks they agree)
    prompts: str = ""  # --prompts: LLM prompts instead of a payload (sm_locust.payloads.llm)
    trace: str = ""  # --trace: a request trace replayed instead of a payload (sm_locust.payloads.trace)

    @classmethod
    def from_options(cls, options: Options) -> SageMakerSettings:
        return cls(**settings_fields(cls, options))

    def validate(self, *, need_payload: bool = True) -> SageMakerSettings:
        if not self.endpoint_name:
            raise UsageError("no endpoint name: pass --endpoint-name NAME (or set SM_LOCUST_ENDPOINT_NAME)")
        check_endpoint_name(self.endpoint_name)  # SageMaker's pattern: it becomes part of the request path
        for name, value in {"content_type": self.content_type or None, **self.headers()}.items():
            check_header(name, value)  # a CRLF or a 2 KB value would fail every request
        if need_payload and not (self.payload or self.prompts or self.trace):
            raise UsageError("no payload: pass --payload PATH to a request body file (or set SM_LOCUST_PAYLOAD), "
                             "or --prompts (or --trace) for an LLM endpoint")
        if self.endpoint_url and not self.endpoint_url.startswith(("http://", "https://")):
            raise UsageError(f"--endpoint-url {self.endpoint_url!r} must start with http:// or https://")
        return self

    def headers(self) -> dict[str, Any]:
        """Invocation header fields (for `load_payloads`), empty strings as None."""
        return {
            "accept": self.accept or None,
            "custom_attributes": self.custom_attributes or None,
            "target_model": self.target_model or None,
            "target_variant": self.target_variant or None,
            "inference_component": self.inference_component or None,
            "inference_id": self.inference_id or None,
        }
