"""The sm-locust options, registered on Locust's own parser.

Registering through `events.init_command_line_parser` means one set of options works everywhere
Locust reads options: the command line, `SM_LOCUST_*` environment variables, `locust.conf`, and the
web UI (where they show and can be edited before each swarm); in distributed runs the master
forwards them to the workers. `SageMakerSettings` is the validated, typed view the users read.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sm_locust.errors import UsageError

GROUP_TITLE = "sm-locust: SageMaker endpoint"

# (flag, env var, default, help, extra argparse kwargs)
_OPTIONS: list[tuple[str, str, Any, str, dict]] = [
    ("--endpoint-name", "SM_LOCUST_ENDPOINT_NAME", "", "SageMaker endpoint name to invoke (required)", {}),
    ("--endpoint-url", "SM_LOCUST_ENDPOINT_URL", "",
     "runtime API URL, e.g. http://127.0.0.1:8080 for the local endpoint (default: AWS, or $AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME)", {}),
    ("--region", "SM_LOCUST_REGION", "", "AWS region (default: the boto3 chain, $AWS_REGION / profile)", {}),
    ("--aws-profile", "SM_LOCUST_AWS_PROFILE", "", "AWS profile name (default: $AWS_PROFILE / default chain)", {}),
    ("--payload", "SM_LOCUST_PAYLOAD", "", "request body source: a file sent verbatim (see docs/payloads.md for more)", {}),
    ("--content-type", "SM_LOCUST_CONTENT_TYPE", "application/json", "Content-Type of the request body", {}),
    ("--accept", "SM_LOCUST_ACCEPT", "", "Accept header: the response format to ask for", {}),
    ("--custom-attributes", "SM_LOCUST_CUSTOM_ATTRIBUTES", "", "X-Amzn-SageMaker-Custom-Attributes", {}),
    ("--target-model", "SM_LOCUST_TARGET_MODEL", "", "TargetModel (multi-model endpoints)", {}),
    ("--target-variant", "SM_LOCUST_TARGET_VARIANT", "", "TargetVariant (production variant)", {}),
    ("--inference-component", "SM_LOCUST_INFERENCE_COMPONENT", "", "InferenceComponentName", {}),
    ("--inference-id", "SM_LOCUST_INFERENCE_ID", "", "InferenceId sent with every request", {}),
    ("--think-time", "SM_LOCUST_THINK_TIME", 0.0,
     "seconds each user waits between calls (default 0: invoke as fast as it can, one call after another)", {"type": float}),
    ("--connect-timeout", "SM_LOCUST_CONNECT_TIMEOUT", 5.0, "connection timeout in seconds", {"type": float}),
    ("--read-timeout", "SM_LOCUST_READ_TIMEOUT", 60.0, "read timeout in seconds", {"type": float}),
    ("--sm-out", "SM_LOCUST_OUT", "", "run folder to write summary.json and timeline.json into", {"include_in_web_ui": False}),
    ("--sm-progress", "SM_LOCUST_PROGRESS", 0.0, "print a one-line progress report every N seconds (0 = off)",
     {"type": float, "include_in_web_ui": False}),
]


def register_options(parser) -> None:
    """Add the sm-locust options to Locust's parser (call from init_command_line_parser)."""
    # Locust's parser (not an argument group) knows include_in_web_ui; its groups do not.
    for flag, env_var, default, help_text, extra in _OPTIONS:
        parser.add_argument(flag, env_var=env_var, default=default, help=f"[{GROUP_TITLE}] {help_text}", **extra)


def option_flags() -> list[str]:
    return [flag for flag, *_ in _OPTIONS]


@dataclass
class SageMakerSettings:
    """Validated settings for one run (from Locust's parsed options or keyword arguments)."""

    endpoint_name: str = ""
    endpoint_url: str = ""
    region: str = ""
    aws_profile: str = ""
    payload: str = ""
    content_type: str = "application/json"
    accept: str = ""
    custom_attributes: str = ""
    target_model: str = ""
    target_variant: str = ""
    inference_component: str = ""
    inference_id: str = ""
    think_time: float = 0.0
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    sm_out: str = ""
    sm_progress: float = 0.0

    @classmethod
    def from_options(cls, options: Any) -> SageMakerSettings:
        values = {}
        for f in fields(cls):
            value = getattr(options, f.name, None)
            if value is not None:
                values[f.name] = value
        return cls(**values)

    def validate(self, *, need_payload: bool = True) -> SageMakerSettings:
        if not self.endpoint_name:
            raise UsageError("no endpoint name: pass --endpoint-name NAME (or set SM_LOCUST_ENDPOINT_NAME)")
        if need_payload and not self.payload:
            raise UsageError("no payload: pass --payload PATH to a request body file (or set SM_LOCUST_PAYLOAD)")
        if self.endpoint_url and not self.endpoint_url.startswith(("http://", "https://")):
            raise UsageError(f"--endpoint-url {self.endpoint_url!r} must start with http:// or https://")
        if self.think_time < 0:
            raise UsageError(f"--think-time must be 0 or more seconds, got {self.think_time}")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise UsageError("--connect-timeout and --read-timeout must be more than 0 seconds")
        return self

    def headers(self) -> dict[str, str | None]:
        """Invocation header fields (for `load_payloads`), empty strings as None."""
        return {
            "accept": self.accept or None,
            "custom_attributes": self.custom_attributes or None,
            "target_model": self.target_model or None,
            "target_variant": self.target_variant or None,
            "inference_component": self.inference_component or None,
            "inference_id": self.inference_id or None,
        }
