"""Where an autoscaling configuration runs locally: the embedded endpoint's fleet emulation.

`LocalFleetDeployer` is the `local` deployer (`sweep/deployers/local.py`) whose endpoint is a variant
of instances scaled by the configuration's target-tracking policy (`endpoint/fleet.py`,
`sm-locust serve --instances N --target-value ...`): `endpoint:` describes ONE instance
(`service_time_ms`, `max_concurrency` = its slots, `workers`, ...), the fleet starts with
`min_instances` instances in service, a new one serves `instance_start_s` emulated seconds after the
policy asks for it, and the clock runs `time_scale` times faster. `describe` says all that for
`--plan`. The `sagemaker` path (an existing endpoint, or one deployed as sweeps do, with the policy
applied and restored) is `sagemaker.py`.

An async configuration (`autoscaling.async_target_backlog`) runs `serve --async --async-max-instances`
instead: `endpoint:` then names the S3 paths (`async_output_path`, optionally `async_failure_path`,
`async_s3_url`) and each instance's workers (`async_max_concurrent`, MaxConcurrentInvocationsPerInstance).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.asyncscaling import AsyncScalingConfig
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.fleet import FleetConfig
from sm_locust.errors import UsageError
from sm_locust.sweep.autoscaling.spec import PREFIX, SECTION_KEYS, is_async, policy_of
from sm_locust.sweep.deployers.local import LocalDeployer

ASYNC_ENDPOINT_KEYS = {"async_output_path": "output_path", "async_failure_path": "failure_path",
                       "async_s3_url": "s3_url", "async_max_concurrent": "max_concurrent"}
NOT_WITH_A_FLEET = ("max_batch_size", "max_batch_delay_ms", "batch_item_cost", "llm", "serverless", "multi_model",
                    "inference_components", "fleet")


def split_settings(settings: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the autoscaling.* settings without the prefix, the rest: one instance's endpoint settings)."""
    own = {k[len(PREFIX):]: v for k, v in settings.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in settings.items() if not k.startswith(PREFIX) and k not in ASYNC_ENDPOINT_KEYS}
    return own, rest


class LocalFleetDeployer(LocalDeployer):
    """The embedded endpoint with the fleet emulation and the configuration's policy, one per configuration."""

    def known_keys(self) -> list[str]:
        return ([k for k in super().known_keys() if k not in NOT_WITH_A_FLEET] + [f"{PREFIX}{k}" for k in SECTION_KEYS]
                + list(ASYNC_ENDPOINT_KEYS))

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        if is_async(settings):
            if not settings.get("async_output_path"):
                raise UsageError(f"{where('async_output_path')}: missing: an async variant writes its results to "
                                 "S3 (endpoint: {async_output_path: s3://bucket/prefix, async_s3_url: ...})")
        else:
            for key in ASYNC_ENDPOINT_KEYS:
                if key in settings:
                    raise UsageError(f"{where(key)}: an async variant's; set autoscaling.async_target_backlog")
        super().check(settings, where)
        if not is_async(settings) and not settings.get("max_concurrency"):
            raise UsageError(f"{where('max_concurrency')}: missing: give each instance's concurrency slots "
                             "(endpoint: {max_concurrency: 4, service_time_ms: 40}); without a limit an instance "
                             "never saturates and scaling changes nothing")

    @staticmethod
    def config(settings: Mapping[str, Any]) -> EndpointConfig:
        own, rest = split_settings(settings)
        config = LocalDeployer.config(rest)
        policy = policy_of(settings)
        if is_async(settings):
            scaling = AsyncScalingConfig(
                max_instances=policy.max_instances, instances=policy.min_instances, min_instances=policy.min_instances,
                target_backlog=policy.target_value, scale_from_zero=bool(own.get("scale_from_zero")),
                instance_start_s=float(own.get("instance_start_s") or 0.0),
                time_scale=float(own.get("time_scale") or 1.0),
                scale_out_cooldown_s=policy.scale_out_cooldown_s, scale_in_cooldown_s=policy.scale_in_cooldown_s)
            given = {field: settings[key] for key, field in ASYNC_ENDPOINT_KEYS.items()
                     if settings.get(key) is not None}
            return replace(config, async_inference=AsyncEndpointConfig(**given, scaling=scaling))
        fleet: dict[str, Any] = {"instances": policy.min_instances, "policy": policy}
        if own.get("instance_start_s") is not None:
            fleet["instance_start_s"] = float(own["instance_start_s"])
        if own.get("time_scale") is not None:
            fleet["time_scale"] = float(own["time_scale"])
        return replace(config, fleet=FleetConfig(**fleet))

    def describe(self, settings: Mapping[str, object]) -> str:
        config = self.config(settings)
        if config.async_inference is not None and config.async_inference.scaling is not None:
            return (f"{super().describe(settings)} "
                    f"({config.async_inference.scaling.describe(config.async_inference.max_concurrent)})")
        assert config.fleet is not None  # config() gives an endpoint one or the other
        fleet = config.fleet.describe(config.service_time_ms, config.max_concurrency)
        return f"{super().describe(settings)} ({fleet})"
