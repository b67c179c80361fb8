"""`sm-locust serve`: run the local SageMaker-compatible endpoint in the foreground."""

from __future__ import annotations

import argparse
from typing import Any

from sm_locust.aws.runtime_api import check_endpoint_name, check_header
from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import parse_bool
from sm_locust.endpoint.asyncqueue import MAX_CONCURRENT as MAX_ASYNC_CONCURRENT
from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.components import parse_components
from sm_locust.endpoint.faults import MAX_STREAM_TOKENS, MAX_THREADS, PROTOCOLS, EndpointConfig
from sm_locust.endpoint.fleet import FleetConfig
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.multimodel import SERVE_OPTIONS, MultiModelConfig
from sm_locust.endpoint.serverless import ServerlessConfig
from sm_locust.endpoint.serving import serve_forever
from sm_locust.endpoint.triton import DEFAULT_INPUTS, DEFAULT_OUTPUTS, model_for
from sm_locust.errors import UsageError
from sm_locust.mix.spec import MAX_TARGETS
from sm_locust.scaling.policy import INVOCATIONS, MAX_INSTANCES, ScalingPolicy
from sm_locust.scaling.timeline import MAX_TIME_SCALE
from sm_locust.util.numbers import argument_type, max_processes


def add_parser(subparsers) -> None:
    instances = argument_type(int, minimum=1, maximum=MAX_INSTANCES)
    p = add_command_parser(
        subparsers, "serve",
        description="Serve a real ranking model behind the SageMaker Runtime API (POST /endpoints/NAME/invocations) "
        "and the container contract (GET /ping, POST /invocations), with capacity knobs and fault injection.",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it to your network)")
    p.add_argument("--port", type=int, default=None, help="port (default $SAGEMAKER_BIND_TO_PORT or 8080)")
    g = p.add_argument_group("capacity")
    g.add_argument("--workers", type=argument_type(int, minimum=1, maximum=max_processes()), default=None,
                   help="worker processes (default $SAGEMAKER_MODEL_SERVER_WORKERS, $SAGEMAKER_GUNICORN_WORKERS or 1)")
    g.add_argument("--threads", type=argument_type(int, minimum=1, maximum=MAX_THREADS), default=None,
                   help="threads per worker (>1 switches to gthread workers; default 1 = gevent)")
    g.add_argument("--max-concurrency", type=int, default=None,
                   help="requests served at once across workers; the excess queues (default 0 = unlimited)")
    g.add_argument("--service-time-ms", type=float, default=None,
                   help="fixed time each request holds a slot: capacity = max-concurrency / service time")
    b = p.add_argument_group("dynamic batching (as TF-Serving / Triton; docs/endpoint.md)")
    b.add_argument("--max-batch-size", type=int, default=None,
                   help="requests run together as one batch, at most (default 0 = no batching)")
    b.add_argument("--max-batch-delay-ms", type=float, default=None,
                   help="how long a batch's first request waits for others to join (default "
                        "0: only those already waiting)")
    b.add_argument("--batch-item-cost", type=float, default=None,
                   help="share of --service-time-ms each request after the first adds to a batch (0-1, default 0.2)")
    t = p.add_argument_group("protocol (docs/endpoint.md, \"Triton\")")
    t.add_argument("--protocol", default=None, choices=PROTOCOLS,
                   help="the model behind the endpoint: ranking (default: the ranking model's JSON, protobuf, npy, "
                   "CSV) or triton (NVIDIA Triton's KServe v2 protocol, JSON or binary tensors, as on SageMaker)")
    t.add_argument("--model-inputs", default=None, metavar="NAME:DATATYPE:DIMS;...",
                   help=f"--protocol triton: the model's inputs, full shapes with the batch dimension first as -1 "
                   f"when --max-batch-size > 0 (default {DEFAULT_INPUTS})")
    t.add_argument("--model-outputs", default=None, metavar="NAME:DATATYPE:DIMS;...",
                   help=f"--protocol triton: the model's outputs (default {DEFAULT_OUTPUTS})")
    f = p.add_argument_group("fault injection")
    f.add_argument("--latency-ms", type=float, default=None, help="added latency per request")
    f.add_argument("--jitter-ms", type=float, default=None, help="uniform random extra latency up to this")
    f.add_argument("--throttle-ratio", type=float, default=None,
                   help="share of requests answered ThrottlingException (0-1)")
    f.add_argument("--model-error-ratio", type=float, default=None, help="share answered ModelError 424 (0-1)")
    f.add_argument("--error-ratio", type=float, default=None,
                   help="share answered InternalFailure 500 / ServiceUnavailable 503 (0-1)")
    f.add_argument("--drop-ratio", type=float, default=None, help="share of connections closed without an answer (0-1)")
    f.add_argument("--cold-start-ms", type=float, default=None,
                   help="extra latency on each worker's first invocation; with the serverless emulation: each "
                   "instance's start (ModelSetupTime) when new or idle for --idle-timeout-s")
    f.add_argument("--not-ready-s", type=float, default=None,
                   help="answer ModelNotReadyException for this long after start")
    f.add_argument("--seed", type=int, default=None, help="seed for fault draws (repeatable runs)")
    s = p.add_argument_group("response streams (POST /endpoints/NAME/invocations-response-stream)")
    s.add_argument("--first-token-ms", type=float, default=None, help="delay before the first PayloadPart (default 0)")
    s.add_argument("--token-ms", type=float, default=None, help="delay between two PayloadParts (default 0)")
    s.add_argument("--stream-tokens", type=argument_type(int, minimum=0, maximum=MAX_STREAM_TOKENS), default=None,
                   help="PayloadParts per streamed response (default 0: one per row's prediction)")
    s.add_argument("--stream-error-ratio", type=float, default=None,
                   help="share of streams that fail half-way with a ModelStreamError event (0-1)")
    m = p.add_argument_group("LLM emulation (continuous batching, docs/llm.md)")
    m.add_argument("--llm", action="store_true",
                   help="serve an emulated LLM instead of the ranking model: TGI / LMI {\"inputs\": ...} and "
                   "OpenAI-style {\"messages\": [...]} requests, tokens streamed as a continuous batch makes them")
    m.add_argument("--llm-max-sequences", type=int, default=None,
                   help="sequences decoded at once per worker; more wait in a queue (default 16)")
    m.add_argument("--llm-step-ms", type=float, default=None, help="a decode step's fixed time (default 25)")
    m.add_argument("--llm-step-ms-per-seq", type=float, default=None,
                   help="what each sequence in the batch adds to a step (default 0.6)")
    m.add_argument("--llm-prefill-ms-per-token", type=float, default=None,
                   help="what each prompt token admitted adds to its step (default 0.1)")
    m.add_argument("--llm-output-tokens", default=None,
                   help="answer lengths: 128, 64-256 (uniform) or 128~32 (normal), capped by the request's "
                   "max_new_tokens (default: the request's max_new_tokens, else 128)")
    m.add_argument("--llm-format", default=None, choices=("auto", "tgi", "lmi", "openai"),
                   help="the container whose bytes the streams copy: tgi (SSE events), lmi (JSON lines), openai "
                        "(vLLM's SSE chat chunks) or auto (from the request: inputs -> tgi, messages -> openai)")
    m.add_argument("--llm-server-counts", default=None,
                   help="answers carry the server's token counts when the request asks (details, "
                        "stream_options.include_usage): true (default) or false (never)")
    m.add_argument("--llm-error-ratio", type=float, default=None,
                   help="share of streams that end half-way with their format's in-band error (TGI's error event, "
                        "LMI's error token, vLLM's error chunk) (0-1, default 0)")
    v = p.add_argument_group("serverless emulation (SageMaker Serverless Inference, docs/serverless.md)")
    v.add_argument("--serverless-memory-mb", type=int, default=None,
                   help="MemorySizeInMB, 1024-6144 in 1 GB steps: the model takes --service-time-ms x 6144 / this "
                   "(CPU share proportional to memory); turns the emulation on (default 2048 when another "
                   "--serverless-* flag is given)")
    v.add_argument("--serverless-max-concurrency", type=int, default=None,
                   help="MaxConcurrency, 1-200: instances serving at once across workers; a request beyond them is "
                   "answered ThrottlingException (429) at once (default 20)")
    v.add_argument("--idle-timeout-s", type=float, default=None,
                   help="an instance idle this long is reclaimed; its next request starts cold "
                        "with --cold-start-ms (default 60)")
    v.add_argument("--serverless-compute-share", type=float, default=None,
                   help="share of --service-time-ms that scales with the memory size (0-1, default 1)")
    v.add_argument("--serverless-throttle-ms", type=float, default=None,
                   help="time before a throttled request is answered: the round trip a "
                        "refusal costs a caller (default 10)")
    mm = p.add_argument_group("multi-model endpoint emulation (TargetModel, docs/multi-model.md)")
    mm.add_argument("--multi-model", action="store_true",
                    help="host --model-count models named model-0001.tar.gz ...: a request's TargetModel is loaded "
                    "into memory before it runs (downloaded first unless still on disk), least recently used models "
                    "unloaded when memory is full")
    mm.add_argument("--model-count", type=argument_type(int, minimum=1, maximum=MAX_TARGETS), default=None,
                    help=f"models hosted (default 100, at most {MAX_TARGETS:,})")
    mm.add_argument("--model-size-mb", default=None,
                    help="each model's size in MB, or LO-HI for sizes drawn once per model (default 100)")
    mm.add_argument("--instance-memory-mb", type=float, default=None, help="memory the models share (default 4096)")
    mm.add_argument("--instance-disk-mb", type=float, default=None,
                    help="disk for downloaded models (default: unlimited); a full disk deletes the least recently used")
    mm.add_argument("--model-download-ms", type=float, default=None,
                    help="download time from S3 per model (default 500)")
    mm.add_argument("--model-load-ms", type=float, default=None, help="load time into memory per model (default 500)")
    mm.add_argument("--model-unload-ms", type=float, default=None,
                    help="unload time per model unloaded to make room; the load waits for it (default 0)")
    mm.add_argument("--model-cache-setting", default=None, type=str.capitalize, choices=("Enabled", "Disabled"),
                    help="MultiModelConfig.ModelCacheSetting: Disabled unloads a model after each request "
                    "(default Enabled)")
    mm.add_argument("--model-ready-timeout-s", type=float, default=None,
                    help="a request still waiting for its model after this long is answered ModelNotReadyException "
                    "(default 60, SageMaker's)")
    ic = p.add_argument_group("inference components (InferenceComponentName, docs/multi-model.md)")
    ic.add_argument("--inference-components", default=None, metavar="NAME:COPIES[:MS],...",
                    help="host these components, e.g. a:2,b:1: each with its own copies (requests served at once, "
                    "across workers) and optionally its own service time in ms (default --service-time-ms)")
    a = p.add_argument_group("fleet emulation: a variant of several instances that autoscales (docs/autoscaling.md)")
    a.add_argument("--instances", type=instances, default=None,
                   help="instances serving at the start, each with its own --max-concurrency slots; "
                   "turns the emulation on")
    a.add_argument("--target-value", type=float, default=None,
                   help="target-tracking policy: the metric's target per instance (InvocationsPerInstance: "
                   "per minute); turns autoscaling on (needs --max-instances)")
    a.add_argument("--min-instances", type=instances, default=None, help="the policy's minimum (default --instances)")
    a.add_argument("--max-instances", type=instances, default=None,
                   help=f"the policy's maximum (at most {MAX_INSTANCES:,})")
    a.add_argument("--scaling-metric", default=None,
                   help="SageMakerVariantInvocationsPerInstance (default, one-minute periods) or "
                   "SageMakerVariantConcurrentRequestsPerModelHighResolution (10-s periods)")
    a.add_argument("--scale-out-cooldown-s", type=float, default=None, help="ScaleOutCooldown (default 300, AWS's)")
    a.add_argument("--scale-in-cooldown-s", type=float, default=None, help="ScaleInCooldown (default 300, AWS's)")
    a.add_argument("--instance-start-s", type=float, default=None,
                   help="seconds from a scale-out decision until its instances serve (default 240)")
    a.add_argument("--time-scale", type=argument_type(float, above=0, maximum=MAX_TIME_SCALE), default=None,
                   help="emulated seconds per real second: the control loop, its periods, cooldowns and instance "
                   "starts run this much faster (requests do not); everything reported is in emulated seconds "
                   "(default 1)")
    a.add_argument("--routing", default=None,
                   help="how requests spread over the instances: random (default) or least-outstanding")
    q = p.add_argument_group("asynchronous inference (InvokeEndpointAsync answered in S3, docs/async.md)")
    q.add_argument("--async", action="store_true",
                   help="queue InvokeEndpointAsync, read its input from S3, write the answer to --async-output-path")
    q.add_argument("--async-output-path", default=None, metavar="S3_URI", help="S3OutputPath (needs --async)")
    q.add_argument("--async-failure-path", default=None, metavar="S3_URI",
                   help="S3FailurePath (default: the output path's failures/)")
    q.add_argument("--async-max-concurrent", type=argument_type(int, minimum=1, maximum=MAX_ASYNC_CONCURRENT),
                   default=None, help="MaxConcurrentInvocationsPerInstance: queue workers (default 1)")
    q.add_argument("--async-s3-url", default=None, help="S3 API URL, e.g. a moto server (default: AWS's)")
    e = p.add_argument_group("identity and metrics")
    e.add_argument("--endpoint-name", default=None, help="answer only this endpoint name (default: any name)")
    e.add_argument("--variant-name", default=None, help="production variant reported back (default AllTraffic)")
    e.add_argument("--cloudwatch-url", default=None,
                   help="publish the metrics a SageMaker endpoint has (Invocations, ModelLatency, CPUUtilization, ...) "
                   "to this CloudWatch API URL, e.g. a moto server (docs/endpoint.md)")
    e.add_argument("--metrics-interval", dest="metrics_interval_s", metavar="SECONDS", type=float, default=None,
                   help="seconds between two publications with --cloudwatch-url (default 10)")
    e.add_argument("--metrics-endpoint-name", default=None,
                   help="EndpointName dimension of the metrics (default: --endpoint-name, else sm-locust-local)")


def check_names(args: argparse.Namespace) -> None:
    """The names the endpoint answers to and reports follow SageMaker's rules (sm_locust.aws.runtime_api)."""
    for flag in ("endpoint_name", "metrics_endpoint_name"):
        if getattr(args, flag, None):
            check_endpoint_name(getattr(args, flag), "--" + flag.replace("_", "-"))
    if getattr(args, "variant_name", None):
        check_header("target_variant", args.variant_name, "--variant-name")


def config_from_args(args: argparse.Namespace):
    keys = ("host", "port", "workers", "threads", "max_concurrency", "service_time_ms", "latency_ms", "jitter_ms",
            "throttle_ratio", "model_error_ratio", "error_ratio", "drop_ratio", "cold_start_ms", "not_ready_s",
            "seed", "endpoint_name", "variant_name", "cloudwatch_url", "metrics_interval_s", "metrics_endpoint_name",
            "first_token_ms", "token_ms", "stream_tokens", "stream_error_ratio", "max_batch_size", "max_batch_delay_ms",
            "batch_item_cost", "protocol", "model_inputs", "model_outputs")
    check_names(args)
    try:
        config = EndpointConfig.from_environment(**{k: getattr(args, k) for k in keys})
        config.llm = llm_config_from_args(args)
        config.serverless = serverless_config_from_args(args)
        config.multi_model = multi_model_config_from_args(args)
        if getattr(args, "inference_components", None):
            config.inference_components = parse_components(args.inference_components)
        config.fleet = fleet_config_from_args(args)
        config.async_inference = async_config_from_args(args, config)
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return config


LLM_KEYS = ("max_sequences", "step_ms", "step_ms_per_seq", "prefill_ms_per_token", "output_tokens", "format",
            "server_counts", "error_ratio")


def emulation_flags(args: argparse.Namespace, dests: dict[str, str], switch: str, what: str) -> dict[str, Any] | None:
    """The flags given for an emulation ({setting: value}, from `dests`: setting -> argparse dest) when its
    `switch` is on, None when it is off; one of its flags without the switch is a usage error."""
    given = {key: getattr(args, dest, None) for key, dest in dests.items()}
    given = {k: v for k, v in given.items() if v is not None}
    if getattr(args, switch.removeprefix("--").replace("-", "_"), False):
        return given
    if given:
        flags = ", ".join(f"--{dests[k].replace('_', '-')}" for k in given)
        raise UsageError(f"{flags} {'shapes' if len(given) == 1 else 'shape'} {what}; add {switch}")
    return None


def llm_config_from_args(args: argparse.Namespace):
    """The LlmConfig of `--llm` (None without it); an --llm-* flag without --llm is a usage error."""
    given = emulation_flags(args, {k: f"llm_{k}" for k in LLM_KEYS}, "--llm", "the LLM emulation")
    if given is None:
        return None
    if "server_counts" in given:
        given["server_counts"] = parse_bool(given["server_counts"], "--llm-server-counts")
    return LlmConfig(**given)


SERVERLESS_FLAGS = {"memory_mb": "serverless_memory_mb", "max_concurrency": "serverless_max_concurrency",
                    "idle_timeout_s": "idle_timeout_s", "compute_share": "serverless_compute_share",
                    "throttle_ms": "serverless_throttle_ms"}


def serverless_config_from_args(args: argparse.Namespace):
    """The ServerlessConfig of the --serverless-* flags (None without any); --idle-timeout-s alone is a usage error."""
    given: dict[str, Any] = {key: getattr(args, dest) for key, dest in SERVERLESS_FLAGS.items()
                             if getattr(args, dest, None) is not None}
    if not given:
        return None
    if set(given) <= {"idle_timeout_s"}:
        raise UsageError("--idle-timeout-s shapes the serverless emulation; add --serverless-memory-mb and/or "
                         "--serverless-max-concurrency")
    return ServerlessConfig(**given)


def multi_model_config_from_args(args: argparse.Namespace):
    """The MultiModelConfig of `--multi-model` (None without it); a model flag without it is a usage error."""
    given = emulation_flags(args, SERVE_OPTIONS, "--multi-model", "the multi-model emulation")
    return MultiModelConfig(**given) if given is not None else None


POLICY_ARGS = ("min_instances", "max_instances", "scaling_metric", "scale_out_cooldown_s", "scale_in_cooldown_s")
FLEET_ARGS = ("instance_start_s", "time_scale", "routing")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def fleet_config_from_args(args: argparse.Namespace):
    """The FleetConfig of --instances / --target-value and their flags (None without either)."""
    names = ("instances", "target_value", *POLICY_ARGS, *FLEET_ARGS)
    given: dict[str, Any] = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
    if not given:
        return None
    if "instances" not in given and "target_value" not in given:
        flags = ", ".join(_flag(k) for k in given)
        raise UsageError(f"{flags} shape{'s' if len(given) == 1 else ''} the fleet emulation; add --instances N "
                         "(and --target-value for autoscaling)")
    policy_given = [k for k in POLICY_ARGS if k in given]
    if "target_value" not in given:
        if policy_given:
            flags = ", ".join(_flag(k) for k in policy_given)
            raise UsageError(f"{flags} shape{'s' if len(policy_given) == 1 else ''} the autoscaling policy; add "
                             "--target-value (the metric's target per instance)")
        policy = None
    else:
        if "max_instances" not in given:
            raise UsageError("--target-value needs --max-instances: the most instances the policy may run")
        settings = {key: given[key] for key in ("scale_out_cooldown_s", "scale_in_cooldown_s") if key in given}
        policy = ScalingPolicy(given.get("min_instances", given.get("instances", 1)), given["max_instances"],
                               given["target_value"], given.get("scaling_metric", INVOCATIONS), **settings)
    fleet_settings = {k: given[k] for k in FLEET_ARGS if k in given}
    instances = given.get("instances", policy.min_instances if policy is not None else 1)
    return FleetConfig(instances=instances, policy=policy, **fleet_settings).validate()


ASYNC_FLAGS = {"output_path": "async_output_path", "failure_path": "async_failure_path",
               "max_concurrent": "async_max_concurrent", "s3_url": "async_s3_url"}


def async_config_from_args(args: argparse.Namespace, config: EndpointConfig) -> AsyncEndpointConfig | None:
    """The AsyncEndpointConfig of `--async` (None without it); its flags without it are a usage error."""
    given = emulation_flags(args, ASYNC_FLAGS, "--async", "the asynchronous inference emulation")
    if given is None:
        return None
    if "output_path" not in given:
        raise UsageError("--async needs --async-output-path s3://bucket/prefix (the S3OutputPath)")
    if config.workers > 1:
        raise UsageError("--async keeps its queue in one worker process; drop --workers (or set it to 1)")
    return AsyncEndpointConfig(**given).validate()


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.llm is not None:
        print(f"sm-locust endpoint: {describe_llm(config)}", flush=True)
    if config.protocol == "triton":
        print(f"sm-locust endpoint: {describe_triton(config)}", flush=True)
    if config.serverless is not None:
        print(f"sm-locust endpoint: {config.serverless.describe(config.service_time_ms, config.cold_start_ms)}",
              flush=True)
    if config.multi_model is not None:
        print(f"sm-locust endpoint: {config.multi_model.describe()}", flush=True)
    if config.inference_components:
        parts = ", ".join(f"{c.name} ({c.copies} cop{'y' if c.copies == 1 else 'ies'})"
                          for c in config.inference_components)
        print(f"sm-locust endpoint: inference components {parts}, routed by InferenceComponentName", flush=True)
    if config.fleet is not None:
        print(f"sm-locust endpoint: {config.fleet.describe(config.service_time_ms, config.max_concurrency)}",
              flush=True)
    return serve_forever(config)


def describe_llm(config) -> str:
    """One line: the LLM's batching model and where its throughput stops growing (docs/llm.md)."""
    llm = config.llm
    return (f"LLM emulation: up to {llm.max_sequences} sequences per worker ({config.workers} worker"
            f"{'s' if config.workers != 1 else ''}), decode step {llm.step_ms:g} ms + {llm.step_ms_per_seq:g} ms per "
            f"sequence + {llm.prefill_ms_per_token:g} ms per prompt token admitted; throughput stops growing at "
            f"{llm.max_sequences * config.workers} concurrent requests")


def describe_triton(config) -> str:
    """One line: the Triton model served, its batcher and its instances (docs/endpoint.md)."""
    model = model_for(config)
    assert model is not None
    batching = (f"dynamic batching up to {config.max_batch_size} rows, queue delay {config.max_batch_delay_ms:g} ms"
                if config.max_batch_size > 1 else "no dynamic batching")
    instances = config.max_concurrency or "unlimited"
    return f"{model.describe()}; {batching}; {instances} instance(s) (--max-concurrency)"
