"""Fault injection and capacity settings for the local endpoint, and the per-request decision.

`EndpointConfig` is every knob of `sm-locust serve`, frozen; `validate` checks each field by its
`OptionSpec` (endpoint/options.py) and what spans fields. `FaultPlan` decides per request: a normal
answer or which SageMaker error, after how much added latency; pure (seeded RNG, no I/O). A request
can force a fault with the custom attribute `sm-locust-fault=<Code>` (local endpoint only).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from sm_locust.endpoint import options as specs
from sm_locust.endpoint.options import BY_DEST, MAX_STREAM_TOKENS, MAX_THREADS, PROTOCOLS
from sm_locust.errors import UsageError
from sm_locust.util.numbers import PROCESSES_PER_CORE

if TYPE_CHECKING:
    from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
    from sm_locust.endpoint.components import ComponentSpec
    from sm_locust.endpoint.fleet import FleetConfig
    from sm_locust.endpoint.llm import LlmConfig
    from sm_locust.endpoint.multimodel import MultiModelConfig
    from sm_locust.endpoint.serverless import ServerlessConfig

__all__ = ["MAX_STREAM_TOKENS", "MAX_THREADS", "PROTOCOLS", "EndpointConfig", "FaultPlan"]

# settings objects, not flags
EMULATIONS = ("llm", "serverless", "multi_model", "inference_components", "fleet", "async_inference")

INJECTED_MODEL_FAILURE = (500, "model failure injected")  # what an injected ModelError's container answered


def model_error_message(status: int, original: str) -> str:
    """SageMaker's ModelError text for a container that answered `status` with `original`."""
    kind = "server" if status >= 500 else "client"
    return f'Received {kind} error ({status}) from primary with message "{original}".'


# code -> (HTTP status, default message); the shapes botocore parses (see docs/facts.md). ValidationError
# is for what the API itself checks (body size, header values, endpoint name); a request the model
# rejects is a ModelError, as on SageMaker.
ERRORS: dict[str, tuple[int, str]] = {
    "ValidationError": (400, "Request is invalid"),
    "ModelError": (424, model_error_message(*INJECTED_MODEL_FAILURE)),
    "ModelNotReadyException": (429, "Model is not ready to serve requests yet"),
    "ThrottlingException": (429, "Rate exceeded"),
    "InternalFailure": (500, "An internal failure occurred"),
    "ServiceUnavailable": (503, "The service is unavailable"),
}

FORCE_ATTRIBUTE = "sm-locust-fault"
DROP = "DropConnection"


def _default(dest: str) -> Any:
    """A field's default: its OptionSpec's, written once there."""
    return BY_DEST[dest].default


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"{name}={value!r} is not a whole number") from None
    return None


@dataclass(frozen=True)
class EndpointConfig:
    """Everything `sm-locust serve` can be told, frozen (`dataclasses.replace` for a changed copy).
    Ratios are in [0, 1]; times in milliseconds; defaults and ranges are the OptionSpecs'."""

    host: str = _default("host")
    port: int = 8080
    workers: int = 1
    threads: int = _default("threads")
    max_concurrency: int = _default("max_concurrency")
    service_time_ms: float = _default("service_time_ms")  # fixed time each request holds a concurrency slot
    latency_ms: float = _default("latency_ms")  # added latency per request (outside the slot)
    jitter_ms: float = _default("jitter_ms")  # uniform extra latency in [0, jitter_ms]
    throttle_ratio: float = _default("throttle_ratio")
    model_error_ratio: float = _default("model_error_ratio")
    error_ratio: float = _default("error_ratio")  # 5xx: InternalFailure and ServiceUnavailable, half each
    drop_ratio: float = _default("drop_ratio")  # close the connection without an answer
    cold_start_ms: float = _default("cold_start_ms")  # extra latency on each worker's first invocation
    not_ready_s: float = _default("not_ready_s")  # answer ModelNotReadyException for this long after start
    endpoint_name: str | None = None  # when set, other names answer ValidationError
    variant_name: str = _default("variant_name")
    seed: int | None = None
    cloudwatch_url: str | None = None  # publish CloudWatch-style metrics there (see metrics.py)
    metrics_interval_s: float = _default("metrics_interval_s")  # seconds between two publications to cloudwatch_url
    metrics_endpoint_name: str | None = None  # EndpointName dimension (default: endpoint_name, else "sm-locust-local")
    first_token_ms: float = _default("first_token_ms")
    token_ms: float = _default("token_ms")  # streams: delay between two PayloadParts
    stream_tokens: int = _default("stream_tokens")  # streams: PayloadParts per response; 0 = one per row's prediction
    stream_error_ratio: float = _default("stream_error_ratio")
    max_batch_size: int = _default("max_batch_size")  # dynamic batching (sm_locust/endpoint/batching.py): 0 or 1 = off
    max_batch_delay_ms: float = _default("max_batch_delay_ms")
    batch_item_cost: float = _default("batch_item_cost")
    protocol: str = _default("protocol")
    model_inputs: str = _default("model_inputs")
    model_outputs: str = _default("model_outputs")  # --protocol triton: the model's outputs (default logits:FP32:-1,2)
    llm: LlmConfig | None = None  # an LLM instead of the ranking model (sm-locust serve --llm)
    serverless: ServerlessConfig | None = None  # serverless emulation (--serverless-*)
    multi_model: MultiModelConfig | None = None  # MME emulation (--multi-model)
    inference_components: tuple[ComponentSpec, ...] | None = None  # --inference-components
    fleet: FleetConfig | None = None  # several instances that autoscale (--instances)
    async_inference: AsyncEndpointConfig | None = None  # InvokeEndpointAsync queued, results to S3 (--async)

    def validate(self) -> None:
        """Each field by its OptionSpec (type, range, choices: a ValueError with the command line's words),
        then what spans fields."""
        for item in fields(self):
            spec = specs.by_dest().get(item.name)
            value = getattr(self, item.name)
            if spec is None or value is None or item.name in EMULATIONS:
                continue
            try:
                spec.parse(value)
            except UsageError as exc:
                if item.name == "workers":  # a fork per worker (also SAGEMAKER_MODEL_SERVER_WORKERS)
                    raise ValueError(f"{exc.message} ({PROCESSES_PER_CORE} per core)") from None
                raise ValueError(exc.message) from None
        total = self.throttle_ratio + self.model_error_ratio + self.error_ratio + self.drop_ratio
        if total > 1.0:
            raise ValueError(f"fault ratios add up to {total:g}; their sum must not exceed 1")
        if self.llm is not None:
            self.llm.validate()
            if self.stream_error_ratio + self.llm.error_ratio > 1.0:
                raise ValueError(f"--stream-error-ratio and --llm-error-ratio add up to "
                                 f"{self.stream_error_ratio + self.llm.error_ratio:g}; their sum must not exceed 1")
        self._check_protocol()
        if self.serverless is not None:
            self.serverless.validate()
            clash = [flag for flag, on in (("--max-concurrency", self.max_concurrency),
                                           ("--max-batch-size", self.max_batch_size > 1),
                                           ("--llm", self.llm is not None)) if on]
            if clash:
                raise ValueError(f"{', '.join(clash)} cannot be combined with the serverless emulation "
                                 "(--serverless-*), whose MaxConcurrency throttles instead of queueing; leave it out")
        if self.multi_model is not None or self.inference_components:
            self._check_targets()
        if self.fleet is not None:
            self.fleet.validate()
            clash = [flag for flag, on in (("--serverless-*", self.serverless is not None),
                                           ("--llm", self.llm is not None),
                                           ("--max-batch-size", self.max_batch_size > 1),
                                           ("--multi-model", self.multi_model is not None),
                                           ("--inference-components", bool(self.inference_components))) if on]
            if clash:
                raise ValueError(f"{', '.join(clash)} cannot be combined with the fleet emulation (--instances); "
                                 "leave it out")

    def _check_protocol(self) -> None:
        """--protocol triton: a model its flags describe, and nothing it cannot run with."""
        if self.protocol != "triton":
            given = [flag for flag, value in (("--model-inputs", self.model_inputs),
                                              ("--model-outputs", self.model_outputs)) if value]
            if given:
                raise ValueError(f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} a Triton model; add "
                                 "--protocol triton")
            return
        from sm_locust.endpoint.triton import model_for  # lazy: numpy; server.py reads this module without it

        model_for(self)
        clash = [flag for flag, on in (("--llm", self.llm is not None), ("--stream-tokens", self.stream_tokens),
                                       ("--multi-model", self.multi_model is not None),
                                       ("--inference-components", bool(self.inference_components))) if on]
        if clash:
            raise ValueError(f"--protocol triton cannot be combined with {', '.join(clash)}; leave it out")

    def _check_targets(self) -> None:
        """--multi-model and --inference-components: valid, and not combined with what they cannot run with."""
        if self.multi_model is not None:
            self.multi_model.validate()
        kind = "--multi-model" if self.multi_model is not None else "--inference-components"
        components = bool(self.inference_components)
        clash = [flag for flag, on in (("--inference-components", self.multi_model is not None and components),
                                       ("--serverless-*", self.serverless is not None), ("--llm", self.llm is not None),
                                       ("--max-concurrency (the copies are the concurrency)",
                                        components and self.max_concurrency),
                                       ("--max-batch-size", components and self.max_batch_size > 1))
                 if on]
        if clash:
            raise ValueError(f"{kind} cannot be combined with {', '.join(clash)}; leave it out")

    @property
    def per_worker_concurrency(self) -> int:
        """The concurrency slots each worker process holds (the total split evenly, at least 1)."""
        if not self.max_concurrency:
            return 0
        return max(1, -(-self.max_concurrency // self.workers))

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_changes(self, **changes: Any) -> EndpointConfig:
        """This config with `changes` (an unknown name is a TypeError naming it)."""
        return replace(self, **changes)

    @classmethod
    def from_environment(cls, **overrides) -> EndpointConfig:
        """Defaults from the SageMaker container environment, then explicit overrides (None = not given)."""
        values: dict[str, Any] = {}
        port = _env_int("SAGEMAKER_BIND_TO_PORT")
        workers = _env_int("SAGEMAKER_MODEL_SERVER_WORKERS", "SAGEMAKER_GUNICORN_WORKERS")
        if port is not None:
            values["port"] = port
        if workers is not None:
            values["workers"] = workers
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)


@dataclass(frozen=True)
class Decision:
    """What to do with one request."""

    error: str | None = None  # an ERRORS code, DROP, or None to answer normally
    added_latency_ms: float = 0.0
    message: str | None = None  # overrides the code's default message


def parse_custom_attributes(value: str | None) -> dict[str, str]:
    """`a=1;b=2` (or comma-separated) -> {'a': '1', 'b': '2'}; bare words map to ''."""
    result: dict[str, str] = {}
    if not value:
        return result
    for part in value.replace(",", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        key, _, val = part.partition("=")
        result[key.strip()] = val.strip()
    return result


class FaultPlan:
    """Decides, per request, the fault (if any) and the added latency, from a seeded RNG."""

    def __init__(self, config: EndpointConfig, rng: random.Random | None = None):
        self.config = config
        self.rng = rng or random.Random(config.seed)
        c = config
        # cumulative thresholds on one uniform draw
        self._bands = [
            (c.throttle_ratio, "ThrottlingException"),
            (c.model_error_ratio, "ModelError"),
            (c.error_ratio / 2, "InternalFailure"),
            (c.error_ratio / 2, "ServiceUnavailable"),
            (c.drop_ratio, DROP),
        ]

    def decide(self, attributes: dict[str, str] | None = None, not_ready: bool = False) -> Decision:
        c = self.config
        latency = c.latency_ms + (self.rng.uniform(0.0, c.jitter_ms) if c.jitter_ms else 0.0)
        forced = (attributes or {}).get(FORCE_ATTRIBUTE)
        if forced:
            if forced not in ERRORS and forced != DROP:
                valid = ", ".join(sorted([*ERRORS, DROP]))
                return Decision("ValidationError", 0.0, f"unknown {FORCE_ATTRIBUTE} {forced!r}; use one of: {valid}")
            return Decision(forced, latency)
        if not_ready:
            return Decision("ModelNotReadyException", latency)
        draw = self.rng.random()
        edge = 0.0
        for ratio, code in self._bands:
            edge += ratio
            if ratio and draw < edge:
                return Decision(code, latency)
        return Decision(None, latency)
