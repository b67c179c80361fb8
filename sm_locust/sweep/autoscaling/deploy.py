"""Where an autoscaling configuration runs locally: the embedded endpoint's fleet emulation.

`LocalFleetDeployer` is the `local` deployer (`sweep/deployers/local.py`) whose endpoint is a variant
of instances scaled by the configuration's target-tracking policy (`endpoint/fleet.py`,
`sm-locust serve --instances N --target-value ...`): `endpoint:` describes ONE instance
(`service_time_ms`, `max_concurrency` = its slots, `workers`, ...), the fleet starts with
`min_instances` instances in service, a new one serves `instance_start_s` emulated seconds after the
policy asks for it, and the clock runs `time_scale` times faster. `describe` says all that for
`--plan`. The `sagemaker` path (an existing endpoint, or one deployed as sweeps do, with the policy
applied and restored) is `sagemaker.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.fleet import FleetConfig
from sm_locust.errors import UsageError
from sm_locust.sweep.autoscaling.spec import PREFIX, SECTION_KEYS, policy_of
from sm_locust.sweep.deployers.local import LocalDeployer

NOT_WITH_A_FLEET = ("max_batch_size", "max_batch_delay_ms", "batch_item_cost", "llm", "serverless", "multi_model",
                    "inference_components", "fleet")


def split_settings(settings: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the autoscaling.* settings without the prefix, the rest: one instance's endpoint settings)."""
    own = {k[len(PREFIX):]: v for k, v in settings.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in settings.items() if not k.startswith(PREFIX)}
    return own, rest


class LocalFleetDeployer(LocalDeployer):
    """The embedded endpoint with the fleet emulation and the configuration's policy, one per configuration."""

    def known_keys(self) -> list[str]:
        return [k for k in super().known_keys() if k not in NOT_WITH_A_FLEET] + [f"{PREFIX}{k}" for k in SECTION_KEYS]

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        super().check(settings, where)
        if not settings.get("max_concurrency"):
            raise UsageError(f"{where('max_concurrency')}: missing: give each instance's concurrency slots "
                             "(endpoint: {max_concurrency: 4, service_time_ms: 40}); without a limit an instance "
                             "never saturates and scaling changes nothing")

    @staticmethod
    def config(settings: Mapping[str, Any]) -> EndpointConfig:
        own, rest = split_settings(settings)
        config = LocalDeployer.config(rest)
        policy = policy_of(settings)
        fleet: dict[str, Any] = {"instances": policy.min_instances, "policy": policy}
        if own.get("instance_start_s") is not None:
            fleet["instance_start_s"] = float(own["instance_start_s"])
        if own.get("time_scale") is not None:
            fleet["time_scale"] = float(own["time_scale"])
        return replace(config, fleet=FleetConfig(**fleet))

    def describe(self, settings: Mapping[str, object]) -> str:
        config = self.config(settings)
        fleet = config.fleet.describe(config.service_time_ms, config.max_concurrency)
        return f"{super().describe(settings)} ({fleet})"
