"""Where a sweep's configurations run: deployers behind a registry (`local`, `sagemaker`).

A deployer checks settings (`check`), describes (`describe`, for `--plan`), creates (`deploy`) and
deletes (`teardown`: always, also after a failed creation or Ctrl-C); `cleanup(sweep_id)` deletes
what a crashed sweep left. The `Deployment` handle names every resource before any is created, so
teardown deletes by name whatever exists. The registry maps names to "module:Class", so the local
deployer never imports boto3's SageMaker model.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.util.registry import Registry

Progress = Callable[[str], None]

DEPLOYERS: Registry[str] = Registry("deployer")
DEPLOYERS.add("local", "sm_locust.sweep.deployers.local:LocalDeployer")
DEPLOYERS.add("sagemaker", "sm_locust.sweep.deployers.sagemaker:SageMakerDeployer")

TAG_KEY = "sm-locust:sweep"  # on every resource a sweep creates; value: the sweep id


class DeployError(Exception):
    """A configuration could not be deployed (its reason goes into sweep.json, the sweep goes on)."""


class Cancelled(DeployError):
    """Creation was stopped by the sweep (Ctrl-C, SIGTERM)."""


@dataclass
class Deployment:
    """One configuration's endpoint, from before its creation until after its deletion."""

    index: int
    key: str
    settings: dict[str, Any]
    run_dir: Path  # logs and samples of the deployment go there
    endpoint_name: str = ""
    endpoint_url: str = ""  # empty: the usual boto3 runtime endpoint (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME works)
    region: str | None = None
    resources: dict[str, str] = field(default_factory=dict)  # kind -> name, for teardown and sweep.json
    info: dict[str, Any] = field(default_factory=dict)  # what was deployed, for sweep.json
    handle: Any = None  # the deployer's own object (a LocalEndpoint, ...)
    created: list[str] = field(default_factory=list)  # the `resources` kinds a create call may have made
    created_at: float | None = None  # when creation started (billing starts no later)
    deleted_at: float | None = None


class Deployer:
    """Base class; subclasses set `name` and implement the methods below."""

    name = ""
    needs_confirmation = False  # True: creating costs money; ask --yes before deploying
    expected_deploy_s = 0.0  # plan estimate of one creation
    expected_delete_s = 0.0

    def known_keys(self) -> list[str]:
        """Settings this deployer understands ("environment.*" style prefixes end with '*')."""
        raise NotImplementedError

    def action(self, count: int) -> str:
        """What running `count` configurations does, for the confirmation question (`--yes`)."""
        return f"create {count} {self.name} endpoint{'s' if count != 1 else ''}"

    def check(self, settings: Mapping[str, object], where: Callable[[str], str]) -> None:
        """UsageError for an unknown or impossible setting; `where(key)` gives the key's path."""
        raise NotImplementedError

    def describe(self, settings: Mapping[str, object]) -> str:
        raise NotImplementedError

    def prepare(self, deployment: Deployment, sweep_id: str) -> None:
        """Name the resources (nothing is created)."""

    def before_creating(self, configurations: list[Mapping[str, Any]], max_parallel: int, progress: Progress) -> None:
        """Checks before the sweep creates anything (credentials, quotas, ...): a UsageError when one
        surely fails. `configurations`: the settings of those about to run. Nothing to check by default."""

    def deploy(self, deployment: Deployment, cancel: threading.Event, progress: Progress) -> None:
        raise NotImplementedError

    def teardown(self, deployment: Deployment, progress: Progress) -> list[str]:
        """Delete everything the deployment may have created; returns what could not be deleted."""
        raise NotImplementedError

    def cleanup(self, sweep_id: str, progress: Progress) -> tuple[list[str], list[str]]:
        """Delete what a sweep left behind: (deleted, left)."""
        return [], []

    def check_key(self, key: str, where: Callable[[str], str], valid: list[str]) -> None:
        for name in valid:
            if key == name or (name.endswith("*") and key.startswith(name[:-1]) and len(key) > len(name) - 1):
                return
        raise UsageError(f"{where(key)}: the {self.name} deployer has no setting {key!r}; valid: {', '.join(valid)}")


def create_deployer(name: str, **kwargs) -> Deployer:
    """The deployer registered as `name` (UnknownNameError lists the valid ones)."""
    module, _, cls = DEPLOYERS.get(name).partition(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
