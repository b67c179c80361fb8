"""`sm-locust serve`: run the local SageMaker-compatible endpoint in the foreground."""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import Any

from sm_locust.aws.runtime_api import check_endpoint_name, check_header
from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import Options, add_spec_arguments, parse_specs
from sm_locust.endpoint import options as specs
from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.asyncscaling import AsyncScalingConfig
from sm_locust.endpoint.components import parse_components
from sm_locust.endpoint.faults import EMULATIONS, EndpointConfig
from sm_locust.endpoint.fleet import FleetConfig
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.multimodel import SERVE_OPTIONS, MultiModelConfig
from sm_locust.endpoint.serverless import ServerlessConfig
from sm_locust.endpoint.serving import serve_forever
from sm_locust.endpoint.triton import model_for
from sm_locust.errors import UsageError
from sm_locust.scaling.policy import INVOCATIONS, ScalingPolicy


def add_parser(subparsers) -> None:
    p = add_command_parser(
        subparsers, "serve",
        description="Serve a real ranking model behind the SageMaker Runtime API (POST /endpoints/NAME/invocations) "
        "and the container contract (GET /ping, POST /invocations), with capacity knobs and fault injection. "
        "Every option can also be set by its SM_LOCUST_SERVE_* variable.",
    )
    for key, title in specs.GROUPS.items():
        add_spec_arguments(p.add_argument_group(title) if key else p, [s for s in specs.OPTIONS if s.group == key])


def serve_options(args: argparse.Namespace) -> Options:
    """The serve options of the command line, each parsed once by its OptionSpec."""
    return parse_specs(specs.OPTIONS, vars(args))


def check_names(options: Options) -> None:
    """The names the endpoint answers to and reports follow SageMaker's rules (sm_locust.aws.runtime_api)."""
    for flag in ("endpoint_name", "metrics_endpoint_name"):
        if options[flag]:
            check_endpoint_name(options[flag], "--" + flag.replace("_", "-"))
    if options.variant_name:
        check_header("target_variant", options.variant_name, "--variant-name")


# EndpointConfig's own fields (the emulations' settings objects are built below)
CONFIG_KEYS = tuple(f.name for f in fields(EndpointConfig) if f.name not in EMULATIONS)


def config_from_args(args: argparse.Namespace) -> EndpointConfig:
    return endpoint_config(serve_options(args))


def endpoint_config(options: Options) -> EndpointConfig:
    """The frozen EndpointConfig of parsed serve options (the SageMaker container's variables fill the port and
    workers not given)."""
    check_names(options)
    given = {k: options[k] for k in CONFIG_KEYS if k in options.given}
    try:
        inference_components = (parse_components(options.inference_components)
                                if options.inference_components else None)
        config = EndpointConfig.from_environment(
            **given, llm=llm_config(options), serverless=serverless_config(options),
            multi_model=multi_model_config(options), inference_components=inference_components,
            fleet=fleet_config(options))
        config = replace(config, async_inference=async_config(options, config))
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return config


LLM_KEYS = ("max_sequences", "step_ms", "step_ms_per_seq", "prefill_ms_per_token", "output_tokens", "format",
            "server_counts", "error_ratio", "request_log", "tokenizer", "block_tokens", "prefix_cache_blocks",
            "adapters", "adapter_cache", "adapter_load_ms", "base_component")


def emulation_flags(options: Options, dests: dict[str, str], switch: str, what: str) -> dict[str, Any] | None:
    """The flags given for an emulation ({setting: value}, from `dests`: setting -> option dest) when its
    `switch` is on, None when it is off; one of its flags without the switch is a usage error."""
    given = {key: options[dest] for key, dest in dests.items() if dest in options.given}
    if options[switch.removeprefix("--").replace("-", "_")]:
        return given
    if given:
        flags = ", ".join(f"--{dests[k].replace('_', '-')}" for k in given)
        raise UsageError(f"{flags} {'shapes' if len(given) == 1 else 'shape'} {what}; add {switch}")
    return None


def llm_config(options: Options) -> LlmConfig | None:
    """The LlmConfig of `--llm` (None without it); an --llm-* flag without --llm is a usage error."""
    given = emulation_flags(options, {k: f"llm_{k}" for k in LLM_KEYS}, "--llm", "the LLM emulation")
    return None if given is None else LlmConfig(**given)


SERVERLESS_FLAGS = {"memory_mb": "serverless_memory_mb", "max_concurrency": "serverless_max_concurrency",
                    "idle_timeout_s": "idle_timeout_s", "compute_share": "serverless_compute_share",
                    "throttle_ms": "serverless_throttle_ms"}


def serverless_config(options: Options) -> ServerlessConfig | None:
    """The ServerlessConfig of the --serverless-* flags (None without any); --idle-timeout-s alone is a usage error."""
    given: dict[str, Any] = {key: options[dest] for key, dest in SERVERLESS_FLAGS.items() if dest in options.given}
    if not given:
        return None
    if set(given) <= {"idle_timeout_s"}:
        raise UsageError("--idle-timeout-s shapes the serverless emulation; add --serverless-memory-mb and/or "
                         "--serverless-max-concurrency")
    return ServerlessConfig(**given)


def multi_model_config(options: Options) -> MultiModelConfig | None:
    """The MultiModelConfig of `--multi-model` (None without it); a model flag without it is a usage error."""
    given = emulation_flags(options, SERVE_OPTIONS, "--multi-model", "the multi-model emulation")
    return MultiModelConfig(**given) if given is not None else None


POLICY_ARGS = ("min_instances", "max_instances", "scaling_metric", "scale_out_cooldown_s", "scale_in_cooldown_s")
FLEET_ARGS = ("instance_start_s", "time_scale", "routing")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def fleet_config(options: Options) -> FleetConfig | None:
    """The FleetConfig of --instances / --target-value and their flags (None without either)."""
    names = ("instances", "target_value", *POLICY_ARGS, *FLEET_ARGS)
    given: dict[str, Any] = {k: options[k] for k in names if k in options.given}
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
               "max_concurrent": "async_max_concurrent", "s3_url": "async_s3_url",
               "success_topic": "async_success_topic", "error_topic": "async_error_topic",
               "sns_url": "async_sns_url"}


SCALING_FLAGS = {"max_instances": "async_max_instances", "instances": "async_instances",
                 "min_instances": "async_min_instances", "target_backlog": "async_target_backlog",
                 "scale_from_zero": "async_scale_from_zero", "instance_start_s": "async_instance_start_s",
                 "time_scale": "async_time_scale", "scale_out_cooldown_s": "async_scale_out_cooldown_s",
                 "scale_in_cooldown_s": "async_scale_in_cooldown_s"}


def async_scaling(options: Options) -> AsyncScalingConfig | None:
    """The AsyncScalingConfig of --async-max-instances and its flags (None without them)."""
    given = {key: options[dest] for key, dest in SCALING_FLAGS.items()
             if dest in options.given and not (key == "scale_from_zero" and not options[dest])}
    if not given:
        return None
    if "max_instances" not in given:
        flags = ", ".join(_flag(SCALING_FLAGS[k]) for k in given)
        raise UsageError(f"{flags} shape{'s' if len(given) == 1 else ''} the async instances; add "
                         "--async-max-instances N (the most instances the variant may run)")
    given.setdefault("instances", given.get("min_instances", 0))
    try:
        return AsyncScalingConfig(**given).validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def async_config(options: Options, config: EndpointConfig) -> AsyncEndpointConfig | None:
    """The AsyncEndpointConfig of `--async` (None without it); its flags without it are a usage error."""
    given = emulation_flags(options, {**ASYNC_FLAGS, **SCALING_FLAGS}, "--async",
                            "the asynchronous inference emulation")
    if given is None:
        return None
    given = {key: value for key, value in given.items() if key in ASYNC_FLAGS}
    if "output_path" not in given:
        raise UsageError("--async needs --async-output-path s3://bucket/prefix (the S3OutputPath)")
    if config.workers > 1:
        raise UsageError("--async keeps its queue in one worker process; drop --workers (or set it to 1)")
    return AsyncEndpointConfig(**given, scaling=async_scaling(options)).validate()


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.llm is not None:
        print(f"sm-locust endpoint: {describe_llm(config)}", flush=True)
        adapters = config.llm.adapter_spec()
        if adapters is not None:
            print(f"sm-locust endpoint: {adapters.describe()}", flush=True)
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
    if config.async_inference is not None and config.async_inference.scaling is not None:
        print(f"sm-locust endpoint: {config.async_inference.scaling.describe(config.async_inference.max_concurrent)}",
              flush=True)
    return serve_forever(config)


def describe_llm(config) -> str:
    """One line: the LLM's batching model and where its throughput stops growing (docs/llm.md)."""
    llm = config.llm
    return (f"LLM emulation: up to {llm.max_sequences} sequences per worker ({config.workers} worker"
            f"{'s' if config.workers != 1 else ''}), decode step {llm.step_ms:g} ms + {llm.step_ms_per_seq:g} ms per "
            f"sequence + {llm.prefill_ms_per_token:g} ms per prompt token admitted; throughput stops growing at "
            f"{llm.max_sequences * config.workers} concurrent requests{_prefix_cache(llm)}")


def _prefix_cache(llm) -> str:
    if not llm.prefix_cache_blocks:
        return ""
    return (f"; prefix cache of {llm.prefix_cache_blocks:,} blocks of {llm.block_tokens} tokens per worker (leading "
            "blocks found there are not prefilled)")


def describe_triton(config) -> str:
    """One line: the Triton model served, its batcher and its instances (docs/endpoint.md)."""
    model = model_for(config)
    assert model is not None
    batching = (f"dynamic batching up to {config.max_batch_size} rows, queue delay {config.max_batch_delay_ms:g} ms"
                if config.max_batch_size > 1 else "no dynamic batching")
    instances = config.max_concurrency or "unlimited"
    return f"{model.describe()}; {batching}; {instances} instance(s) (--max-concurrency)"
