"""The `sagemaker` deployer: one real-time endpoint per configuration, through boto3's control plane.

Per configuration: CreateModel (a clone of `model_name` with the configuration's `environment.*`
merged into each container, or `image` + `model_data_url` + `role`), CreateEndpointConfig (one
variant), CreateEndpoint polled every `poll_s` until InService (`Failed` ends it with its reason);
then always teardown of what a create call may have made (`Deployment.created`), waiting out
Creating; resources already gone count as deleted. `before_creating` runs `precheck.py` first.
Resources are named `<sweep id>-<key>-<stamp>` and tagged `sm-locust:sweep=<sweep id>`, which
`cleanup(sweep_id)` deletes by. The client is injected, by default from `sm_locust.aws.clients`
(docs/sweep.md).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sm_locust.aws.clients import AwsClient, Purpose
from sm_locust.aws.clients import client as aws_client
from sm_locust.aws.region import NO_REGION, region_for
from sm_locust.errors import UsageError, aws_error
from sm_locust.sweep.deployers import TAG_KEY, Cancelled, Deployer, DeployError, Deployment, Progress
from sm_locust.sweep.deployers.precheck import Need, check_before_creating, needs_for

KEYS = ["model_name", "image", "model_data_url", "role", "instance_type", "instance_count", "variant_name",
        "environment.*", "price_per_hour"]
STARTING = ("Creating", "Updating", "SystemUpdating")
GONE_MARKERS = ("could not find", "does not exist", "not found")
STATUS_EVERY_S = 60.0  # a progress line at least this often while waiting


def _error(exc: Exception) -> tuple[str, str]:
    return aws_error(exc) or (type(exc).__name__, str(exc))


def _gone(exc: Exception) -> bool:
    code, message = _error(exc)
    return code in ("ValidationException", "ResourceNotFound") and any(m in message.lower() for m in GONE_MARKERS)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds // 60:.0f} min {seconds % 60:.0f} s"


def _stamp(now: float) -> str:
    n, digits = int(now), "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out[-6:]


def environment_of(settings: Mapping[str, object]) -> dict[str, str]:
    """`environment.X` settings -> {X: text}; booleans as true/false, 4.0 as 4."""
    env = {}
    for key, value in settings.items():
        if key.startswith("environment."):
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
            env[key[len("environment."):]] = str(value)
    return env


class SageMakerDeployer(Deployer):
    name = "sagemaker"
    needs_confirmation = True
    expected_deploy_s = 480.0  # plan estimate: real-time endpoints typically take several minutes to create
    expected_delete_s = 60.0

    def __init__(self, client=None, *, region: str | None = None, profile: str | None = None, poll_s: float = 15.0,
                 timeout_s: float = 3600.0, delete_timeout_s: float = 1800.0,
                 sleep: Callable[[float], None] = time.sleep, quotas_client: AwsClient = None):
        self._client = client
        self.quotas_client = quotas_client  # Service Quotas (precheck.py); None: from the same session
        self.region = region
        self.profile = profile
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.delete_timeout_s = delete_timeout_s
        self.sleep = sleep

    # -- client -----------------------------------------------------------------------------------
    @property
    def client(self) -> AwsClient:
        if self._client is None:
            region = region_for(self.region, self.profile)  # the one rule: --region, AWS_REGION, ..., the profile
            if not region:
                raise UsageError(NO_REGION.format(what=" for SageMaker"))
            self._client = aws_client("sagemaker", Purpose.CONTROL, region=region, profile=self.profile)
        return self._client

    # -- before creating anything -----------------------------------------------------------------
    def creation_needs(self, configurations: list[Mapping[str, object]], max_parallel: int) -> list[Need]:
        """What the sweep holds at once per instance type (an autoscaling deployer: up to max_instances)."""
        return needs_for(configurations, max_parallel)

    def before_creating(self, configurations: list[Mapping[str, Any]], max_parallel: int, progress: Progress) -> None:
        needs = self.creation_needs(configurations, max_parallel)
        if not needs:
            return
        result = check_before_creating(needs, region=self.region, profile=self.profile, sagemaker=self._client,
                                       quotas=self.quotas_client)
        progress("before creating anything:")
        for line in result.table():
            progress(line)
        result.raise_for_failures()

    # -- settings ---------------------------------------------------------------------------------
    def known_keys(self) -> list[str]:
        return list(KEYS)

    def check(self, settings: Mapping[str, Any], where: Callable[[str], str]) -> None:
        for key, value in settings.items():
            self.check_key(key, where, KEYS)
            if key.startswith("environment.") and (value is None or isinstance(value, (dict, list))):
                raise UsageError(f"{where(key)}: an environment value is text or a number, got {value!r}")
            if key in ("model_name", "image", "model_data_url", "role", "instance_type", "variant_name") and (
                    not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
            if key == "instance_count" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UsageError(f"{where(key)}: expected a whole number of instances (1 or more), got {value!r}")
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if key == "price_per_hour" and (not numeric or value < 0):
                raise UsageError(f"{where(key)}: expected a price in USD per hour, got {value!r}")
        if not settings.get("instance_type"):
            raise UsageError(f"{where('instance_type')}: missing; a SageMaker configuration needs an instance type "
                             "(endpoint.instance_type, or a grid of them)")
        if not settings.get("model_name") and not (settings.get("image") and settings.get("role")):
            raise UsageError(f"{where('model_name')}: missing; give model_name (an existing Model to clone) or "
                             "image + role (+ model_data_url)")

    def describe(self, settings: Mapping[str, Any]) -> str:
        count = int(settings.get("instance_count") or 1)
        if settings.get("model_name"):
            source = f"clone of model {settings['model_name']}"
        else:
            source = f"image {settings.get('image')}"
        env = environment_of(settings)
        text = f"{count} x {settings.get('instance_type')}, {source}"
        if env:
            text += ", environment " + " ".join(f"{k}={v}" for k, v in env.items())
        return text

    # -- deploy -----------------------------------------------------------------------------------
    def prepare(self, deployment: Deployment, sweep_id: str) -> None:
        name = f"{sweep_id}-{deployment.key[:6]}-{_stamp(time.time())}"
        deployment.endpoint_name = name
        deployment.resources = {"endpoint": name, "endpoint_config": name, "model": name}
        deployment.info["sweep_id"] = sweep_id

    def _tags(self, deployment: Deployment) -> list[dict[str, str]]:
        return [{"Key": TAG_KEY, "Value": deployment.info["sweep_id"]}]

    def _call(self, operation: str, **kwargs) -> dict:
        method = getattr(self.client, operation)
        try:
            return method(**kwargs)
        except Exception as exc:
            if not hasattr(exc, "response"):
                raise
            code, message = _error(exc)
            api = "".join(part.title() for part in operation.split("_"))
            raise DeployError(f"{api}: {code}: {message}") from None

    def model_request(self, deployment: Deployment) -> dict[str, Any]:
        """CreateModel's arguments for a configuration (a clone of model_name, or image + role)."""
        s = deployment.settings
        env = environment_of(s)
        request: dict[str, object] = {"ModelName": deployment.resources["model"], "Tags": self._tags(deployment)}
        if s.get("model_name"):
            base = self._call("describe_model", ModelName=s["model_name"])
            containers = [copy.deepcopy(c) for c in base.get("Containers") or []]
            primary = copy.deepcopy(base.get("PrimaryContainer")) if base.get("PrimaryContainer") else None
            for container in ([primary] if primary else []) + containers:
                container["Environment"] = {**(container.get("Environment") or {}), **env}
                if s.get("image"):
                    container["Image"] = s["image"]
                if s.get("model_data_url"):
                    container["ModelDataUrl"] = s["model_data_url"]
            if primary:
                request["PrimaryContainer"] = primary
            if containers and not primary:
                request["Containers"] = containers
            request["ExecutionRoleArn"] = s.get("role") or base["ExecutionRoleArn"]
            for key in ("VpcConfig", "EnableNetworkIsolation", "InferenceExecutionConfig"):
                if base.get(key):
                    request[key] = base[key]
        else:
            container = {"Image": s["image"], "Environment": env}
            if s.get("model_data_url"):
                container["ModelDataUrl"] = s["model_data_url"]
            request["PrimaryContainer"] = container
            request["ExecutionRoleArn"] = s["role"]
        return request

    def production_variant(self, deployment: Deployment) -> dict[str, Any]:
        """The endpoint config's one variant (a serverless sweep's deployer gives a ServerlessConfig instead)."""
        s = deployment.settings
        return {"VariantName": s.get("variant_name") or "AllTraffic", "ModelName": deployment.resources["model"],
                "InstanceType": s["instance_type"], "InitialInstanceCount": int(s.get("instance_count") or 1),
                "InitialVariantWeight": 1.0}

    def endpoint_config_extra(self, deployment: Deployment) -> dict[str, Any]:
        """CreateEndpointConfig's arguments beyond the name, tags and variant (an async sweep's deployer adds
        AsyncInferenceConfig); none by default."""
        return {}

    def deployed_info(self, deployment: Deployment) -> dict[str, Any]:
        """What was deployed, for sweep.json."""
        s = deployment.settings
        return {"instance_type": s["instance_type"], "instance_count": int(s.get("instance_count") or 1),
                "environment": environment_of(s)}

    def deploy(self, deployment: Deployment, cancel: threading.Event, progress: Progress) -> None:
        name = deployment.endpoint_name
        deployment.region = self.client.meta.region_name
        deployment.created_at = time.time()
        request = self.model_request(deployment)
        steps = [
            ("create_model", request),
            ("create_endpoint_config",
             {"EndpointConfigName": deployment.resources["endpoint_config"], "Tags": self._tags(deployment),
              "ProductionVariants": [self.production_variant(deployment)], **self.endpoint_config_extra(deployment)}),
            ("create_endpoint", {"EndpointName": name, "EndpointConfigName": deployment.resources["endpoint_config"],
                                 "Tags": self._tags(deployment)}),
        ]
        for operation, kwargs in steps:
            if cancel.is_set():
                raise Cancelled(f"interrupted before {operation}")
            kind = operation.removeprefix("create_")
            try:
                self._call(operation, **kwargs)
            except DeployError:  # SageMaker answered no: nothing was made
                raise
            except BaseException:  # no answer (a timeout, a lost connection): it may exist
                deployment.created.append(kind)
                raise
            deployment.created.append(kind)
        deployment.info.update(self.deployed_info(deployment))
        self._wait_in_service(name, cancel, progress)

    def _wait_in_service(self, name: str, cancel: threading.Event, progress: Progress) -> None:
        start = time.monotonic()
        last_line, last_status = -STATUS_EVERY_S, None
        while True:
            try:
                desc = self.client.describe_endpoint(EndpointName=name)
            except Exception as exc:
                code, message = _error(exc)
                if code not in ("ThrottlingException", "Throttling") or not hasattr(exc, "response"):
                    raise DeployError(f"DescribeEndpoint: {code}: {message}") from None
                desc = {"EndpointStatus": last_status or "Creating"}
            status = desc.get("EndpointStatus", "?")
            elapsed = time.monotonic() - start
            if status == "InService":
                progress(f"{name} InService after {_minutes(elapsed)}")
                return
            if status not in STARTING:
                raise DeployError(f"endpoint {name} {status}: {desc.get('FailureReason') or 'no FailureReason given'}")
            if elapsed > self.timeout_s:
                raise DeployError(f"endpoint {name} still {status} after {_minutes(elapsed)} (deploy_timeout_minutes)")
            if status != last_status or elapsed - last_line >= STATUS_EVERY_S:
                progress(f"{name} {status} ({_minutes(elapsed)})")
                last_line, last_status = elapsed, status
            if cancel.wait(self.poll_s):
                raise Cancelled(f"interrupted while {name} was {status}")

    # -- teardown ---------------------------------------------------------------------------------
    def teardown(self, deployment: Deployment, progress: Progress) -> list[str]:
        left = []
        r = {kind: name for kind, name in deployment.resources.items() if kind in deployment.created}
        if r.get("endpoint"):
            left += self._delete_endpoint(r["endpoint"], progress)
        if r.get("endpoint_config"):
            left += self._delete("delete_endpoint_config", "endpoint config", r["endpoint_config"],
                                 EndpointConfigName=r["endpoint_config"])
        if r.get("model"):
            left += self._delete("delete_model", "model", r["model"], ModelName=r["model"])
        deployment.deleted_at = time.time()
        return left

    def _delete(self, operation: str, kind: str, name: str, **kwargs) -> list[str]:
        for attempt in range(4):
            try:
                getattr(self.client, operation)(**kwargs)
                return []
            except Exception as exc:
                if _gone(exc):
                    return []
                code, message = _error(exc)
                if attempt == 3 or "Throttl" not in code:
                    return [f"{kind} {name} ({code}: {message})"]
                self.sleep(2 ** attempt)
        return [f"{kind} {name}"]

    def _status(self, name: str) -> str | None:
        """The endpoint's status, None when it does not exist (any other error propagates)."""
        try:
            return self.client.describe_endpoint(EndpointName=name).get("EndpointStatus")
        except Exception as exc:
            if _gone(exc):
                return None
            raise

    def _delete_endpoint(self, name: str, progress: Progress) -> list[str]:
        deadline = time.monotonic() + self.delete_timeout_s
        told = False
        retried = False  # an endpoint may leave Creating between the refused delete and the describe
        while True:
            try:
                self.client.delete_endpoint(EndpointName=name)
                break
            except Exception as exc:
                if _gone(exc):
                    return []
                code, message = _error(exc)
                try:
                    status = self._status(name)
                except Exception:
                    status = "?"
                if status is None:
                    return []
                if status not in STARTING and "Throttl" not in code and not retried:
                    retried = True  # it just changed state: ask again once before calling it a failure
                    continue
                if time.monotonic() > deadline or (status not in STARTING and "Throttl" not in code):
                    return [f"endpoint {name} ({code}: {message})"]
                if not told:
                    progress(f"{name} is {status}; SageMaker deletes it once that ends: waiting")
                    told = True
                self.sleep(self.poll_s)
        while time.monotonic() < deadline:  # billed until it is gone
            try:
                if self._status(name) is None:
                    return []
            except Exception:
                pass
            self.sleep(min(self.poll_s, 5.0))
        return [f"endpoint {name} (still Deleting after {_minutes(self.delete_timeout_s)})"]

    # -- cleanup ----------------------------------------------------------------------------------
    def _tagged(self, arn: str, sweep_id: str) -> bool:
        tags = self.client.list_tags(ResourceArn=arn).get("Tags") or []
        return any(t.get("Key") == TAG_KEY and t.get("Value") == sweep_id for t in tags)

    def _listed(self, operation: str, key: str, name_key: str, arn_key: str, sweep_id: str) -> list[tuple[str, str]]:
        found = []
        paginator = self.client.get_paginator(operation)
        for page in paginator.paginate(NameContains=sweep_id):
            for item in page.get(key) or []:
                found.append((item[name_key], item[arn_key]))
        return [(name, arn) for name, arn in found if self._tagged(arn, sweep_id)]

    def cleanup(self, sweep_id: str, progress: Progress) -> tuple[list[str], list[str]]:
        deleted: list[str] = []
        left: list[str] = []
        try:
            endpoints = self._listed("list_endpoints", "Endpoints", "EndpointName", "EndpointArn", sweep_id)
            configs = self._listed("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName",
                                   "EndpointConfigArn", sweep_id)
            models = self._listed("list_models", "Models", "ModelName", "ModelArn", sweep_id)
        except UsageError:  # no region: one line, exit 2
            raise
        except Exception as exc:
            code, message = _error(exc)
            raise DeployError(f"listing SageMaker resources failed: {code}: {message}") from None
        jobs = [(f"endpoint {name}", lambda n=name: self._delete_endpoint(n, progress)) for name, _ in endpoints]
        jobs += [(f"endpoint config {name}",
                  lambda n=name: self._delete("delete_endpoint_config", "endpoint config", n, EndpointConfigName=n))
                 for name, _ in configs]
        jobs += [(f"model {name}", lambda n=name: self._delete("delete_model", "model", n, ModelName=n))
                 for name, _ in models]
        for what, job in jobs:  # endpoints first: a config or model in use is deleted after its endpoint
            progress(f"deleting {what}")
            failed = job()
            if failed:
                left.extend(failed)
            else:
                deleted.append(what)
        return deleted, left
