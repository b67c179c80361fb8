"""The sm-locust options: declared once, registered on Locust's parser and on `sm-locust run`.

Registering through `events.init_command_line_parser` means one set of options works everywhere
Locust reads options: the command line, `SM_LOCUST_*` environment variables, `locust.conf`, and the
web UI (where they show and can be edited before each swarm); in distributed runs the master
forwards them to the workers. `sm-locust run` declares the same options on its own parser and
forwards the ones given to the Locust process unchanged.

Each feature declares its options as a list of `OptionSpec` in its own module, listed in
`OPTION_PROVIDERS`; `SageMakerSettings` is the validated, typed view of the endpoint options.

One path from options to settings: the same option arrives typed from the command line and as text
from the web UI form (Locust keeps a None default's form value as a string) or an env var, so every
settings object reads it with `option_value` and parses it with `parse_bool` / `parse_number`;
garbage is a one-line `UsageError` naming the flag and the value, wherever it came from.
`open_loop_settings` reads the open-loop options (`--arrival`, `--rate-per-user`,
`--max-in-flight`) for the open-loop users and for `ShapeSettings` alike; it lives here, below
both, because the shapes import the users (a users -> shapes import would close a cycle).
"""

from __future__ import annotations

import argparse
import importlib
import os
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from sm_locust.aws.runtime_api import check_endpoint_name, check_header
from sm_locust.errors import UsageError
from sm_locust.plateau.arrival import ARRIVALS
from sm_locust.util.numbers import argument_type, check_number

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def option_value(options: Any, name: str) -> Any:
    """The option `name` (dest) from parsed options, argparse args or settings; None when unset or empty."""
    value = getattr(options, name, None)
    return None if value == "" else value


def given_fields(settings_class: type, options: Any) -> dict[str, Any]:
    """The fields of a settings dataclass that `options` sets (by dest name; None = not given)."""
    values = {}
    for f in fields(settings_class):
        value = getattr(options, f.name, None)
        if value is not None:
            values[f.name] = value
    return values


def parse_bool(value: Any, flag: str | None = None, default: bool = False) -> bool:
    """true/false, on/off, yes/no, 1/0 (any case) or a bool; None -> `default`; else a UsageError."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise UsageError(f"{flag + ' ' if flag else ''}must be true or false (or on/off, yes/no, 1/0), got {value!r}")


def parse_number(value: Any, flag: str, cast: type = float, default: Any = None, **bounds: Any) -> Any:
    """`value` as a finite float (or an int with `cast=int`) within `bounds` (minimum, maximum, above,
    below: `sm_locust.util.numbers`); None or "" -> `default`; else a UsageError naming `flag`."""
    if value is None or value == "":
        return default
    return check_number(value, flag, cast, **bounds)


class _BadArgument(argparse.ArgumentTypeError, ValueError):
    """argparse prints its text after the flag; an env-var default catches it as a ValueError."""


def _bool_argument(value: str | bool) -> bool:
    try:
        return parse_bool(value)
    except UsageError as exc:
        raise _BadArgument(str(exc)) from None


@dataclass(frozen=True)
class OptionSpec:
    """One option, as Locust and `sm-locust run` both declare it."""

    flag: str
    env_var: str
    default: Any
    help: str
    type: Any = None  # None = str
    web_ui: bool = True
    choices: tuple | None = None
    forward: bool = True  # `sm-locust run` passes it on to the Locust process
    web_check: Any = None  # text typed in the web UI form -> a one-line UsageError when it cannot work
    minimum: float | None = None  # numbers: the range (sm_locust.util.numbers), wherever the value comes from
    above: float | None = None
    maximum: float | None = None
    below: float | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def bounds(self) -> dict[str, float]:
        pairs = (("minimum", self.minimum), ("above", self.above), ("maximum", self.maximum), ("below", self.below))
        return {k: v for k, v in pairs if v is not None}

    def argparse_kwargs(self) -> dict:
        kwargs: dict[str, Any] = {"default": self.default, "help": self.help}
        if self.type is bool:
            kwargs["type"] = _bool_argument
        elif self.type in (int, float):
            kwargs["type"] = argument_type(self.type, **self.bounds)
        elif self.type is not None:
            kwargs["type"] = self.type
        if self.choices:
            kwargs["choices"] = list(self.choices)
        return kwargs

    def from_env(self, text: str) -> Any:
        """The value of `SM_LOCUST_*` text for this option, or a one-line UsageError naming the variable
        (argparse does not check a default, so garbage would otherwise surface mid-run as a traceback)."""
        kwargs = self.argparse_kwargs()
        try:
            value = kwargs.get("type", str)(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise UsageError(f"{self.env_var}={text!r} is not valid for {self.flag}: {exc}") from None
        if self.choices and value not in self.choices:
            raise UsageError(f"{self.env_var}={text!r} is not valid for {self.flag}: choose one of "
                             f"{', '.join(self.choices)}")
        return value


ENDPOINT_OPTIONS: list[OptionSpec] = [
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
               "(default: from the payload source; application/json for a plain file)"),
    OptionSpec("--accept", "SM_LOCUST_ACCEPT", "", "Accept header: the response format to ask for"),
    OptionSpec("--custom-attributes", "SM_LOCUST_CUSTOM_ATTRIBUTES", "", "X-Amzn-SageMaker-Custom-Attributes"),
    OptionSpec("--target-model", "SM_LOCUST_TARGET_MODEL", "", "TargetModel (multi-model endpoints)"),
    OptionSpec("--target-variant", "SM_LOCUST_TARGET_VARIANT", "", "TargetVariant (production variant)"),
    OptionSpec("--inference-component", "SM_LOCUST_INFERENCE_COMPONENT", "", "InferenceComponentName"),
    OptionSpec("--inference-id", "SM_LOCUST_INFERENCE_ID", "", "InferenceId sent with every request"),
    OptionSpec("--think-time", "SM_LOCUST_THINK_TIME", 0.0,
               "seconds each user waits between calls (default 0: invoke as fast as it can, one call after another)",
               float, minimum=0),
    OptionSpec("--connect-timeout", "SM_LOCUST_CONNECT_TIMEOUT", 5.0, "connection timeout in seconds", float, above=0),
    OptionSpec("--read-timeout", "SM_LOCUST_READ_TIMEOUT", 60.0, "read timeout in seconds", float, above=0),
    OptionSpec("--sm-out", "SM_LOCUST_OUT", "", "run folder to write summary.json and timeline.jsonl into",
               web_ui=False, forward=False),
    OptionSpec("--sm-progress", "SM_LOCUST_PROGRESS", 0.0, "print a one-line progress report every N seconds (0 = off)",
               float, web_ui=False, forward=False, minimum=0),
]

# "module:attribute" of every list of OptionSpec; a feature adds its own line here.
OPTION_PROVIDERS: tuple[str, ...] = (
    "sm_locust.config.options:ENDPOINT_OPTIONS",
    "sm_locust.shapes.settings:OPTIONS",
    "sm_locust.config.options:OPEN_LOOP_OPTIONS",
    "sm_locust.payloads.options:OPTIONS",
    "sm_locust.transport.options:OPTIONS",
    "sm_locust.payloads.llm:OPTIONS",
    "sm_locust.shapes.tokens:OPTIONS",
    "sm_locust.mix.options:OPTIONS",
)


def all_option_specs() -> list[OptionSpec]:
    specs: list[OptionSpec] = []
    for provider in OPTION_PROVIDERS:
        module, _, attribute = provider.partition(":")
        specs.extend(getattr(importlib.import_module(module), attribute))
    return specs


def register_options(parser) -> None:
    """Add every sm-locust option to Locust's parser (call from init_command_line_parser).

    Locust's parser itself (not an argument group) knows env_var and include_in_web_ui.
    """
    for spec in all_option_specs():
        parser.add_argument(spec.flag, env_var=spec.env_var, include_in_web_ui=spec.web_ui, **spec.argparse_kwargs())


def add_cli_options(parser, title: str = "sm-locust options (also SM_LOCUST_* env vars)") -> None:
    """Declare the same options on an argparse parser (defaults from the same env vars)."""
    group = parser.add_argument_group(title)
    for spec in all_option_specs():
        if not spec.forward:
            continue
        kwargs = spec.argparse_kwargs()
        env_value = os.environ.get(spec.env_var)
        if env_value is not None and env_value.strip():
            kwargs["default"] = spec.from_env(env_value)
        kwargs["help"] = f"{spec.help} [{spec.env_var}]"
        group.add_argument(spec.flag, **kwargs)


def forwarded_arguments(values: Any) -> list[str]:
    """The command-line flags for the options in `values` that differ from their defaults."""
    args: list[str] = []
    for spec in all_option_specs():
        if not spec.forward or not hasattr(values, spec.dest):
            continue
        value = getattr(values, spec.dest)
        if value is None or value == spec.default:
            continue
        args += [spec.flag, str(value)]
    return args


@dataclass
class SageMakerSettings:
    """Validated endpoint settings for one run (from Locust's parsed options or keyword arguments)."""

    endpoint_name: str = ""
    endpoint_url: str = ""
    region: str = ""
    aws_profile: str = ""
    payload: str = ""
    content_type: str = ""
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
    transport: str = "fast"  # = sm_locust.transport.options.DEFAULT_TRANSPORT
    prompts: str = ""  # LLM prompts instead of a payload (sm_locust.payloads.llm)

    @classmethod
    def from_options(cls, options: Any) -> SageMakerSettings:
        return cls(**given_fields(cls, options))

    def validate(self, *, need_payload: bool = True) -> SageMakerSettings:
        if not self.endpoint_name:
            raise UsageError("no endpoint name: pass --endpoint-name NAME (or set SM_LOCUST_ENDPOINT_NAME)")
        check_endpoint_name(self.endpoint_name)  # SageMaker's pattern: it becomes part of the request path
        for name, value in {"content_type": self.content_type or None, **self.headers()}.items():
            check_header(name, value)  # a CRLF or a 2 KB value would fail every request
        if need_payload and not (self.payload or self.prompts):
            raise UsageError("no payload: pass --payload PATH to a request body file (or set SM_LOCUST_PAYLOAD), "
                             "or --prompts for an LLM endpoint")
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


# -- open loop: read by the open-loop users and by ShapeSettings ----------------------------------

OPEN_LOOP_OPTIONS: list[OptionSpec] = [
    OptionSpec("--arrival", "SM_LOCUST_ARRIVAL", None, "open loop: arrival process, constant (default) or poisson"),
    OptionSpec("--rate-per-user", "SM_LOCUST_RATE_PER_USER", None,
               "open loop: req/s each OpenLoopUser adds (default 1; the user count is rate / this)", float),
    OptionSpec("--max-in-flight", "SM_LOCUST_MAX_IN_FLIGHT", None,
               "open loop: most outstanding requests per process (default 1000); sends past it are dropped and counted",
               int),
]

DEFAULT_ARRIVAL = "constant"
DEFAULT_RATE_PER_USER = 1.0
DEFAULT_MAX_IN_FLIGHT = 1000


class OpenLoopSettings(NamedTuple):
    """The open-loop options with their defaults applied: what an open-loop process runs with."""

    arrival: str = DEFAULT_ARRIVAL
    rate_per_user: float = DEFAULT_RATE_PER_USER
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT


def check_open_loop(rate_per_user: float | None, max_in_flight: int | None) -> None:
    """The open-loop values that cannot work (None = not given)."""
    if rate_per_user is not None and not rate_per_user > 0:
        raise UsageError(f"--rate-per-user must be more than 0 req/s, got {rate_per_user:g}")
    if max_in_flight is not None and max_in_flight < 1:
        raise UsageError(f"--max-in-flight must be at least 1, got {max_in_flight}")


def open_loop_options(options: Any) -> dict[str, Any]:
    """The open-loop options as given (None = not given), parsed and checked."""
    arrival = option_value(options, "arrival")
    if arrival is not None:
        try:
            arrival = ARRIVALS.canonical(str(arrival))  # the registry's error lists the valid names
        except UsageError as exc:
            raise UsageError(f"--arrival: {exc}") from None
    rate_per_user = parse_number(option_value(options, "rate_per_user"), "--rate-per-user", float)
    max_in_flight = parse_number(option_value(options, "max_in_flight"), "--max-in-flight", int)
    check_open_loop(rate_per_user, max_in_flight)
    return {"arrival": arrival, "rate_per_user": rate_per_user, "max_in_flight": max_in_flight}


def open_loop_settings(options: Any) -> OpenLoopSettings:
    """(arrival, rate per user, max in flight) from parsed options, defaults filled, validated."""
    return OpenLoopSettings(**{k: v for k, v in open_loop_options(options).items() if v is not None})
