"""`deploy: sagemaker` of an autoscaling sweep: each configuration's policy on a real variant, then
everything put back (docs/autoscaling.md, "On SageMaker").

Why a deployer: the shared runner already guarantees that `teardown` runs after the test, after a
failed creation, on Ctrl-C and on SIGTERM, and the pipeline keeps at most `max_parallel_endpoints`
alive; applying a scaling policy is "deploying" a configuration and restoring the variant is tearing
it down, so the guarantees come for free. Two sources of the variant, one of them per file:

- `endpoint: {endpoint_name: ranker, variant_name: AllTraffic}`: an existing endpoint. It is never
  deleted; its scaling configuration is snapshotted, the configuration's policy applied, and the
  snapshot put back exactly (`scaling.aws.ScalingUnderTest`, journal in `<sweep folder>/
  autoscaling-restore/`). Configurations run one after another (the loader sets
  max_parallel_endpoints to 1). `instance_type` / `price_per_hour` only price it; an `instance_type`
  that is not the endpoint's fails the configuration rather than price it wrongly.
- `endpoint: {model_name: my-model, instance_type: ml.c5.xlarge}` (or image + role): an endpoint
  deployed per configuration as the sagemaker deployer does, starting with `min_instances`
  instances, the policy applied, the endpoint deleted after (its instance count is not set back first).

`cleanup` is the kind's `--cleanup` hook: it finishes every restore journal the sweep folder holds,
deletes any policy named after the sweep on any variant, and deletes the endpoints the sweep tagged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sm_locust.aws.clients import AwsClient
from sm_locust.errors import SmLocustError, UsageError
from sm_locust.scaling.aws import (
    JOURNAL_DIR,
    ScalingUnderTest,
    VariantRef,
    clients,
    delete_sweep_policies,
    describe_variant,
    finish_restores,
    journal_path,
    restore_from_journal,
)
from sm_locust.sweep.autoscaling.spec import POLICY_KEYS, PREFIX, policy_of
from sm_locust.sweep.deployers import DeployError, Deployment, Progress, create_deployer
from sm_locust.sweep.deployers.precheck import Need, needs_for
from sm_locust.sweep.deployers.sagemaker import KEYS as SAGEMAKER_KEYS
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer

EXISTING = "endpoint_name"
DEPLOYS_ONLY = ("model_name", "image", "model_data_url", "role", "instance_count")  # refused beside endpoint_name
PRICING_ONLY = ("instance_type", "price_per_hour")  # beside endpoint_name: they price it, nothing more
EXISTING_APPLY_S = 60.0  # plan estimate on an existing endpoint: the calls, and the count brought to the minimum
EXISTING_RESTORE_S = 30.0


def split_settings(settings: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the autoscaling.* settings without the prefix, the rest: the endpoint's)."""
    own = {k[len(PREFIX):]: v for k, v in settings.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in settings.items() if not k.startswith(PREFIX)}
    return own, rest


class SageMakerScalingDeployer(SageMakerDeployer):
    """A configuration's policy on a SageMaker variant (an existing endpoint's, or one deployed for it)."""

    def __init__(self, client=None, *, plan: object = None, aas=None, **kwargs):
        super().__init__(client, **kwargs)
        self.plan = plan
        self._aas = aas
        self.existing_endpoint: str | None = None  # set by check(): the file names an existing endpoint

    def action(self, count: int) -> str:
        if self.existing_endpoint is None:
            return super().action(count)
        policies = "1 policy" if count == 1 else f"{count} policies"
        after = "" if count == 1 else ", one after another"
        return (f"test {policies} on the existing endpoint {self.existing_endpoint}{after} (its own scaling put back "
                "after each; nothing created)")

    @property
    def aas(self):
        if self._aas is None:
            self._aas = clients(self.region, self.profile)[0]
        return self._aas

    # -- settings ---------------------------------------------------------------------------------
    def known_keys(self) -> list[str]:
        return [k for k in SAGEMAKER_KEYS if k != "instance_count"] + [EXISTING] + [f"{PREFIX}{k}" for k in POLICY_KEYS]

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        _own, rest = split_settings(settings)
        if "instance_count" in rest:
            raise UsageError(f"{where('instance_count')}: an autoscaling sweep starts every configuration at "
                             "autoscaling.min_instances; leave instance_count out")
        for key in settings:
            self.check_key(key, where, self.known_keys())
        if rest.get(EXISTING) is None:
            super().check(rest, where)
            return
        name = rest[EXISTING]
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"{where(EXISTING)}: expected the name of an existing endpoint, got {name!r}")
        # nothing is created or deleted: "deploying" is the snapshot, the policy and the settle to the minimum
        self.existing_endpoint = name
        self.expected_deploy_s = EXISTING_APPLY_S
        self.expected_delete_s = EXISTING_RESTORE_S
        clash = [k for k in rest if k in DEPLOYS_ONLY or k.startswith("environment.")]
        if clash:
            raise UsageError(f"{where(clash[0])}: endpoint_name tests the existing endpoint {name}; {clash[0]} "
                             "would deploy a new one: give endpoint_name, or model_name + instance_type, not both")
        # the sagemaker deployer's value rules for the keys given (variant_name, instance_type, price_per_hour);
        # model_name and instance_type stand in for what the existing endpoint already has
        values = {k: v for k, v in rest.items() if k != EXISTING}
        super().check({"model_name": name, "instance_type": "-", **values}, where)

    def describe(self, settings: Mapping[str, object]) -> str:
        _own, rest = split_settings(settings)
        policy = policy_of(settings)
        if rest.get(EXISTING):
            variant = rest.get("variant_name") or "AllTraffic"
            text = (f"existing endpoint {rest[EXISTING]} ({variant}; its own scaling snapshotted and put back, "
                    "never deleted)")
        else:
            text = super().describe({**rest, "instance_count": policy.min_instances})
        return f"{text}, {policy.describe()}"

    # -- deploy -----------------------------------------------------------------------------------
    @staticmethod
    def existing(deployment: Deployment) -> bool:
        return bool(deployment.settings.get(EXISTING))

    @staticmethod
    def variant(deployment: Deployment) -> VariantRef:
        return VariantRef(deployment.endpoint_name, deployment.settings.get("variant_name") or "AllTraffic")

    def prepare(self, deployment: Deployment, sweep_id: str) -> None:
        if not self.existing(deployment):
            super().prepare(deployment, sweep_id)
            return
        deployment.endpoint_name = str(deployment.settings[EXISTING])
        deployment.resources = {}  # an existing endpoint: nothing of it is deleted
        deployment.info["sweep_id"] = sweep_id

    def production_variant(self, deployment: Deployment) -> dict[str, Any]:
        variant = super().production_variant(deployment)
        variant["InitialInstanceCount"] = policy_of(deployment.settings).min_instances
        return variant

    def deployed_info(self, deployment: Deployment) -> dict[str, Any]:
        info = super().deployed_info(deployment)
        info["instance_count"] = policy_of(deployment.settings).min_instances
        return info

    def journal(self, deployment: Deployment) -> Path:
        """Where this configuration's restore journal goes: the sweep folder (the run folder's parent)."""
        return journal_path(Path(deployment.run_dir).parent, self.variant(deployment))

    def deploy(self, deployment: Deployment, cancel: threading.Event, progress: Progress) -> None:
        existing = self.existing(deployment)
        if existing:
            deployment.region = self.client.meta.region_name
            self._check_instance_type(deployment)
        else:
            super().deploy(deployment, cancel, progress)
        under_test = ScalingUnderTest(self.aas, self.client, self.variant(deployment), policy_of(deployment.settings),
                                      sweep_id=deployment.info["sweep_id"], journal=self.journal(deployment),
                                      region=deployment.region, progress=progress, poll_s=self.poll_s,
                                      timeout_s=self.timeout_s, sleep=self.sleep, cancel=cancel,
                                      restore_instances=existing)
        deployment.handle = under_test
        try:
            before = under_test.apply()
        except SmLocustError as exc:
            raise DeployError(exc.message) from None
        deployment.info["scaling_before"] = before.describe()
        if existing:
            deployment.info.update(endpoint_name=deployment.endpoint_name,
                                   variant_name=self.variant(deployment).variant, existing=True)

    def creation_needs(self, configurations: list[Mapping[str, object]], max_parallel: int) -> list[Need]:
        """Before anything is created (`precheck.py`): a deployed endpoint may scale to `max_instances`, so
        that is what its instance type's quota must hold; an existing endpoint creates nothing."""
        deployed = []
        for settings in configurations:
            own, rest = split_settings(settings)
            if rest.get(EXISTING) or not rest.get("instance_type"):
                continue
            deployed.append({**rest, "instance_count": own.get("max_instances") or rest.get("instance_count") or 1})
        return needs_for(deployed, max_parallel)

    def _check_instance_type(self, deployment: Deployment) -> None:
        """An existing endpoint priced by `instance_type` must run that type (else its cost would be wrong)."""
        wanted = deployment.settings.get("instance_type")
        try:
            describe_variant(self.client, self.variant(deployment))  # the endpoint and variant exist (one line if not)
            if not wanted:
                return
            config_name = self.client.describe_endpoint(EndpointName=deployment.endpoint_name)["EndpointConfigName"]
            config = self.client.describe_endpoint_config(EndpointConfigName=config_name)
        except SmLocustError as exc:
            raise DeployError(exc.message) from None
        except Exception as exc:
            if not hasattr(exc, "response"):
                raise
            raise DeployError(f"DescribeEndpointConfig: {exc}") from None
        actual = next((v.get("InstanceType") for v in config.get("ProductionVariants") or []
                       if v.get("VariantName") == self.variant(deployment).variant), None)
        if actual and actual != wanted:
            raise DeployError(f"endpoint {deployment.endpoint_name} runs {actual}, not {wanted} (instance_type prices "
                              "the sweep: give the endpoint's own type, or price_per_hour)")

    # -- teardown ---------------------------------------------------------------------------------
    def teardown(self, deployment: Deployment, progress: Progress) -> list[str]:
        left: list[str] = []
        under_test = deployment.handle
        if isinstance(under_test, ScalingUnderTest):
            under_test.progress = progress
            left += under_test.restore()
        elif self.existing(deployment) and self.journal(deployment).exists():  # stopped before the handle was set
            left += restore_from_journal(self.journal(deployment), self.aas, self.client, progress=progress)
        if self.existing(deployment):  # never deleted, and not billed by the sweep (the figures count its instances)
            deployment.deleted_at = time.time()
            return left
        return left + super().teardown(deployment, progress)


def cleanup(sweep_id: str, *, deploy: str, region: str | None = None, profile: str | None = None,
            client: AwsClient = None, out_dir: Path, progress: Progress,
            aas: AwsClient = None) -> tuple[list[str], list[str]]:
    """`sm-locust sweep --cleanup ID` for an autoscaling sweep: (done, left)."""
    if deploy != "sagemaker":
        return create_deployer(deploy).cleanup(sweep_id, progress)
    deployer = SageMakerScalingDeployer(client, region=region, profile=profile, aas=aas)
    journals = sorted((Path(out_dir) / JOURNAL_DIR).glob("*.json"))
    restored, left = finish_restores(out_dir, aas=deployer.aas, sm=deployer.client, progress=progress)
    deleted, not_deleted = delete_sweep_policies(deployer.aas, sweep_id, progress=progress)
    if deleted and not journals:
        left.append(f"no restore journal in {Path(out_dir) / JOURNAL_DIR}: if the sweep tested an existing endpoint, "
                    "its own scaling policies and range could not be put back (give the sweep folder with --out)")
    endpoints, endpoints_left = deployer.cleanup(sweep_id, progress)
    return restored + deleted + endpoints, left + not_deleted + endpoints_left
