"""Where a serverless configuration runs: the two deployers with a serverless endpoint.

`local` starts the embedded endpoint with its serverless emulation (`endpoint/serverless.py`:
throttles above MaxConcurrency, cold starts after the idle timeout, compute scaled by the memory
size); `sagemaker` creates an endpoint config whose variant carries a `ServerlessConfig`
(MemorySizeInMB, MaxConcurrency) instead of instances. Both are the real-time deployers
(`sweep/deployers/`) with the `serverless.*` settings added; each `describe` adds the tests a
configuration would run, for `--plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.serverless import ServerlessConfig
from sm_locust.errors import UsageError
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.deployers.local import LocalDeployer
from sm_locust.sweep.deployers.sagemaker import KEYS as SAGEMAKER_KEYS
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer, environment_of
from sm_locust.sweep.serverless.plan import ServerlessLoadPlan, describe_tests
from sm_locust.sweep.serverless.spec import LOCAL_ONLY, PREFIX

DEFAULT_SERVICE_TIME_MS = 20.0  # local emulation: the model's time at 6144 MB unless endpoint.service_time_ms says


def split_settings(settings: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the serverless.* settings without the prefix, the rest)."""
    own = {k[len(PREFIX):]: v for k, v in settings.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in settings.items() if not k.startswith(PREFIX)}
    return own, rest


class LocalServerlessDeployer(LocalDeployer):
    """The embedded endpoint with the serverless emulation, one per configuration."""

    def __init__(self, plan: ServerlessLoadPlan | None = None):
        self.plan = plan

    def known_keys(self) -> list[str]:
        clash = ("max_concurrency", "max_batch_size", "max_batch_delay_ms", "batch_item_cost", "llm", "serverless",
                 "cold_start_ms")
        return [k for k in super().known_keys() if k not in clash] + [
            f"{PREFIX}{k}" for k in ("memory_size_mb", "max_concurrency", *LOCAL_ONLY)]

    @staticmethod
    def config(settings: Mapping[str, object]) -> EndpointConfig:
        own, rest = split_settings(settings)
        rest.setdefault("service_time_ms", DEFAULT_SERVICE_TIME_MS)
        config = LocalDeployer.config(rest)
        kwargs: dict[str, Any] = {"memory_mb": int(own.get("memory_size_mb", 2048)),
                                  "max_concurrency": int(own.get("max_concurrency", 20))}
        for key in ("idle_timeout_s", "compute_share", "throttle_ms"):
            if key in own:
                kwargs[key] = float(own[key])
        return replace(config, cold_start_ms=float(own.get("cold_start_ms", 0.0)),
                       serverless=ServerlessConfig(**kwargs))

    def describe(self, settings: Mapping[str, object]) -> str:
        return super().describe(settings) + describe_tests(self.plan, settings)


class SageMakerServerlessDeployer(SageMakerDeployer):
    """A SageMaker serverless endpoint per configuration: the endpoint config's variant carries a
    ServerlessConfig (MemorySizeInMB, MaxConcurrency); everything else is the sagemaker deployer's."""

    expected_deploy_s = 240.0  # plan estimate: serverless endpoints start faster than instance-backed ones

    def __init__(self, client=None, *, plan: ServerlessLoadPlan | None = None, **kwargs):
        super().__init__(client, **kwargs)
        self.plan = plan

    def known_keys(self) -> list[str]:
        shared = [k for k in SAGEMAKER_KEYS if k not in ("instance_type", "instance_count", "price_per_hour")]
        return shared + [f"{PREFIX}{k}" for k in ("memory_size_mb", "max_concurrency", *LOCAL_ONLY)]

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        for key in ("instance_type", "instance_count"):
            if key in settings:
                raise UsageError(f"{where(key)}: a serverless endpoint has no instances; compare_instance names the "
                                 "real-time instance to compare with")
        for key, value in settings.items():
            self.check_key(key, where, self.known_keys())
            if key.startswith("environment.") and (value is None or isinstance(value, (dict, list))):
                raise UsageError(f"{where(key)}: an environment value is text or a number, got {value!r}")
            if key in ("model_name", "image", "model_data_url", "role", "variant_name") and (
                    not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
        if not settings.get("model_name") and not (settings.get("image") and settings.get("role")):
            raise UsageError(f"{where('model_name')}: missing; give model_name (an existing Model to clone) or "
                             "image + role (+ model_data_url)")

    def describe(self, settings: Mapping[str, object]) -> str:
        own, rest = split_settings(settings)
        source = f"clone of model {rest['model_name']}" if rest.get("model_name") else f"image {rest.get('image')}"
        ignored = [k for k in LOCAL_ONLY if k in own]
        return (f"serverless {own.get('memory_size_mb')} MB, MaxConcurrency {own.get('max_concurrency')}, {source}"
                + (f" ({', '.join(ignored)}: local emulation only, not sent)" if ignored else "")
                + describe_tests(self.plan, settings))

    def production_variant(self, deployment: Deployment) -> dict[str, Any]:
        own, rest = split_settings(deployment.settings)
        return {"VariantName": rest.get("variant_name") or "AllTraffic", "ModelName": deployment.resources["model"],
                "ServerlessConfig": {"MemorySizeInMB": int(own["memory_size_mb"]),
                                     "MaxConcurrency": int(own["max_concurrency"])}}

    def deployed_info(self, deployment: Deployment) -> dict[str, Any]:
        own, _ = split_settings(deployment.settings)
        return {"memory_size_mb": int(own["memory_size_mb"]), "max_concurrency": int(own["max_concurrency"]),
                "environment": environment_of(deployment.settings)}


