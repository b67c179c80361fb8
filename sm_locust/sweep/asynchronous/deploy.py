"""Where an async configuration runs: the two deployers with an asynchronous endpoint.

`local` starts the embedded endpoint with its async queue (`sm-locust serve --async`,
endpoint/asyncqueue.py): `async.instance_count` instances in service from the start (no scaling
policy: `--async-max-instances N --async-instances N --async-min-instances N`), each with
`async.max_concurrent_invocations_per_instance` workers, results written to S3 (`endpoint:` names
`async_output_path`, optionally `async_failure_path` and `async_s3_url`, a moto server offline).
`sagemaker` creates the endpoint config with one variant of `async.instance_count` instances and an
`AsyncInferenceConfig` (OutputConfig's S3OutputPath / S3FailurePath / NotificationConfig, ClientConfig's
MaxConcurrentInvocationsPerInstance; docs/facts.md). Both are the real-time deployers
(`sweep/deployers/`) with these settings added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.asyncscaling import AsyncScalingConfig
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.errors import UsageError
from sm_locust.sweep.asynchronous.spec import INSTANCES_SETTING, PREFIX, WORKERS_SETTING
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.deployers.local import LocalDeployer
from sm_locust.sweep.deployers.precheck import Need, needs_for
from sm_locust.sweep.deployers.sagemaker import KEYS as SAGEMAKER_KEYS
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer

# endpoint: keys of an async endpoint -> AsyncEndpointConfig's fields (local) ...
LOCAL_ASYNC_KEYS = {"async_output_path": "output_path", "async_failure_path": "failure_path",
                    "async_s3_url": "s3_url", "async_success_topic": "success_topic",
                    "async_error_topic": "error_topic", "async_sns_url": "sns_url"}
# ... and AsyncInferenceConfig.OutputConfig's (SageMaker)
OUTPUT_CONFIG = {"async_output_path": "S3OutputPath", "async_failure_path": "S3FailurePath",
                 "async_kms_key_id": "KmsKeyId"}
NOTIFICATION_CONFIG = {"async_success_topic": "SuccessTopic", "async_error_topic": "ErrorTopic"}
NOT_WITH_ASYNC = ("workers", "environment.SAGEMAKER_MODEL_SERVER_WORKERS", "environment.SAGEMAKER_GUNICORN_WORKERS",
                  "max_batch_size", "max_batch_delay_ms", "batch_item_cost", "llm", "serverless", "multi_model",
                  "inference_components", "fleet", "async_inference", "stream_tokens")
SECTION_SETTINGS = [INSTANCES_SETTING, WORKERS_SETTING]


def split_settings(settings: Mapping[str, object]) -> tuple[int, int, dict[str, object]]:
    """(instance count, MaxConcurrentInvocationsPerInstance, the rest of the settings)."""
    rest = {k: v for k, v in settings.items() if not k.startswith(PREFIX)}
    return int(settings[INSTANCES_SETTING]), int(settings[WORKERS_SETTING]), rest  # type: ignore[call-overload]


def _missing_output(settings: Mapping[str, object], where: Callable[[str], str]) -> None:
    if not settings.get("async_output_path"):
        raise UsageError(f"{where('async_output_path')}: missing: an async endpoint writes its results to S3 "
                         "(endpoint: {async_output_path: s3://bucket/prefix})")


class LocalAsyncDeployer(LocalDeployer):
    """The embedded endpoint with the async queue and a fixed number of instances, one per configuration."""

    def known_keys(self) -> list[str]:
        return ([k for k in super().known_keys() if k not in NOT_WITH_ASYNC] + list(LOCAL_ASYNC_KEYS)
                + SECTION_SETTINGS)

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        _missing_output(settings, where)
        super().check(settings, where)

    @staticmethod
    def config(settings: Mapping[str, object]) -> EndpointConfig:
        if INSTANCES_SETTING not in settings:  # the base class's check of the settings alone
            return LocalDeployer.config(settings)
        instances, workers, rest = split_settings(settings)
        config = LocalDeployer.config({k: v for k, v in rest.items() if k not in LOCAL_ASYNC_KEYS})
        given = {field: str(rest[key]) for key, field in LOCAL_ASYNC_KEYS.items() if rest.get(key) is not None}
        fleet = AsyncScalingConfig(max_instances=instances, instances=instances, min_instances=instances,
                                   instance_start_s=0.0)  # no policy: the fleet stays as it starts
        return replace(config, async_inference=AsyncEndpointConfig(**given, max_concurrent=workers, scaling=fleet))

    def describe(self, settings: Mapping[str, object]) -> str:
        instances, workers, _ = split_settings(settings)
        return (f"{super().describe(settings)} ({instances} instance{'s' if instances != 1 else ''} x {workers} "
                f"worker{'s' if workers != 1 else ''}: MaxConcurrentInvocationsPerInstance {workers})")


class SageMakerAsyncDeployer(SageMakerDeployer):
    """A SageMaker asynchronous endpoint per configuration: `async.instance_count` instances and an
    AsyncInferenceConfig on the endpoint config; everything else is the sagemaker deployer's."""

    def __init__(self, client=None, **kwargs):
        super().__init__(client, **kwargs)

    def known_keys(self) -> list[str]:
        return ([k for k in SAGEMAKER_KEYS if k != "instance_count"] + list(OUTPUT_CONFIG) + list(NOTIFICATION_CONFIG)
                + SECTION_SETTINGS)

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        _missing_output(settings, where)
        for key in (*OUTPUT_CONFIG, *NOTIFICATION_CONFIG):
            value = settings.get(key)
            if key in settings and (not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
        for key in ("async_output_path", "async_failure_path"):
            if key in settings and not str(settings[key]).startswith(("s3://", "https://")):
                raise UsageError(f"{where(key)}: expected an S3 URI (s3://bucket/prefix), got {settings[key]!r}")
        for key in settings:
            self.check_key(key, where, self.known_keys())
        ours = (*OUTPUT_CONFIG, *NOTIFICATION_CONFIG, *SECTION_SETTINGS)
        super().check({k: v for k, v in settings.items() if k not in ours}, where)

    def creation_needs(self, configurations: list[Mapping[str, object]], max_parallel: int) -> list[Need]:
        """The quota check counts each configuration's `async.instance_count` instances."""
        counted = [{**c, "instance_count": c.get(INSTANCES_SETTING, 1)} for c in configurations]
        return needs_for(counted, max_parallel)

    def describe(self, settings: Mapping[str, object]) -> str:
        instances, workers, rest = split_settings(settings)
        base = super().describe({**rest, "instance_count": instances})
        return f"{base}, async: MaxConcurrentInvocationsPerInstance {workers}, output {settings['async_output_path']}"

    def production_variant(self, deployment: Deployment) -> dict[str, object]:
        instances, _, _ = split_settings(deployment.settings)
        return {**super().production_variant(deployment), "InitialInstanceCount": instances}

    def endpoint_config_extra(self, deployment: Deployment) -> dict[str, object]:
        return {"AsyncInferenceConfig": async_inference_config(deployment.settings)}

    def deployed_info(self, deployment: Deployment) -> dict[str, object]:
        instances, workers, _ = split_settings(deployment.settings)
        return {**super().deployed_info(deployment), "instance_count": instances,
                "async_inference_config": async_inference_config(deployment.settings)}


def async_inference_config(settings: Mapping[str, object]) -> dict[str, object]:
    """CreateEndpointConfig's AsyncInferenceConfig for a configuration's settings (docs/facts.md)."""
    _, workers, _ = split_settings(settings)
    output: dict[str, object] = {field: str(settings[key]) for key, field in OUTPUT_CONFIG.items() if settings.get(key)}
    topics = {field: str(settings[key]) for key, field in NOTIFICATION_CONFIG.items() if settings.get(key)}
    if topics:
        output["NotificationConfig"] = topics
    return {"OutputConfig": output, "ClientConfig": {"MaxConcurrentInvocationsPerInstance": workers}}
