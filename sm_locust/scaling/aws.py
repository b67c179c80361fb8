"""Application Auto Scaling on a SageMaker variant: snapshot, apply, watch, restore.

Whatever ends the test (even a kill, then `sm-locust sweep --cleanup ID`), the user's scaling
configuration comes back as it was. `snapshot` only reads; `apply_plan` and `restore_plan` are pure
(snapshot in, calls out); `ScalingUnderTest` writes the journal before the first change, and
`restore` is idempotent, changing only what differs. A variant with a step scaling policy is refused
before anything changes (it could not be put back exactly). `InstancePoller` samples
DescribeEndpoint every 10 s; `read_only(client)` refuses every call but Describe* / List*. AWS facts
and sources: docs/facts.md, "Application Auto Scaling on a SageMaker variant".
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from sm_locust.aws.clients import Purpose
from sm_locust.aws.clients import clients as aws_clients
from sm_locust.errors import RunError, SmLocustError, UsageError, aws_error
from sm_locust.record.summary import write_json
from sm_locust.scaling.policy import DEFAULT_COOLDOWN_S, METRICS, ScalingPolicy
from sm_locust.scaling.timeline import InstanceSample, RunClock

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
POLICY_PREFIX = "sm-locust-"
POLL_EVERY_S = 10.0  # DescribeEndpoint while traffic runs
JOURNAL_SCHEMA = 1
JOURNAL_DIR = "autoscaling-restore"  # inside a sweep folder: one journal per variant
SUSPENDED_KEYS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")
CONFIG_KEYS = {"TargetTrackingScaling": "TargetTrackingScalingPolicyConfiguration",
               "StepScaling": "StepScalingPolicyConfiguration",
               "PredictiveScaling": "PredictiveScalingPolicyConfiguration"}
RESTORABLE_TYPES = ("TargetTrackingScaling",)
GONE_CODES = ("ObjectNotFoundException",)
GONE_MESSAGES = ("no scaling policy found", "no scalable target found")  # moto answers ValidationException
RETRY_CODES = ("ConcurrentUpdateException", "ThrottlingException", "Throttling", "TooManyRequestsException")
READ_ONLY_PREFIXES = ("Describe", "List")

Progress = Callable[[str], None]


class ScalingError(RunError):
    """A call on the variant's scaling configuration failed (one line: the API, its code, its message)."""


class ReadOnlyViolation(SmLocustError):
    """A read-only client was asked to change something (a bug: `--watch-scaling` changes nothing)."""


api_error = aws_error  # the name this module's callers use; one reading of botocore's error shape


def _is_gone(exc: BaseException) -> bool:
    parts = api_error(exc)
    if parts is None:
        return False
    code, message = parts
    return code in GONE_CODES or (code == "ValidationException" and any(m in message.lower() for m in GONE_MESSAGES))


def _api_name(operation: str) -> str:
    return "".join(part.title() for part in operation.split("_"))


# ------------------------------------------------------------------------------------ the variant


@dataclass(frozen=True)
class VariantRef:
    """One production variant of one endpoint, as Application Auto Scaling names it."""

    endpoint: str
    variant: str = "AllTraffic"

    @property
    def resource_id(self) -> str:
        return f"endpoint/{self.endpoint}/variant/{self.variant}"

    @property
    def identity(self) -> dict[str, str]:
        """The three arguments that name the scalable target in every Application Auto Scaling call."""
        return {"ServiceNamespace": NAMESPACE, "ResourceId": self.resource_id, "ScalableDimension": DIMENSION}

    @property
    def slug(self) -> str:
        return f"{self.endpoint}.{self.variant}"


def policy_name_for(sweep_id: str) -> str:
    """The name of the policy a sweep puts on a variant (what `--cleanup` looks for)."""
    return f"{POLICY_PREFIX}{sweep_id}"


def suspended_state(value: Mapping[str, object] | None) -> dict[str, bool]:
    """A SuspendedState with its three flags explicit (a missing flag is false, as AWS documents)."""
    value = value or {}
    return {key: bool(value.get(key, False)) for key in SUSPENDED_KEYS}


def policy_arguments(described: Mapping[str, object]) -> dict[str, Any]:
    """PutScalingPolicy's arguments (without the target's identity) that re-create a described policy:
    its name, type and configuration; PolicyARN, Alarms and CreationTime are AWS's, not the policy's."""
    policy_type = str(described.get("PolicyType") or "")
    out: dict[str, object] = {"PolicyName": described["PolicyName"], "PolicyType": policy_type}
    key = CONFIG_KEYS.get(policy_type)
    if key and described.get(key) is not None:
        out[key] = copy.deepcopy(described[key])
    return out


@dataclass
class ScalingSnapshot:
    """What exists for a variant at one moment (read-only; JSON round-trip through as_dict/from_dict)."""

    ref: VariantRef
    target: dict[str, Any] | None  # {"MinCapacity", "MaxCapacity", "SuspendedState"}; None: not registered
    policies: list[dict[str, Any]] = field(default_factory=list)  # policy_arguments() of each
    desired_instances: int | None = None
    in_service_instances: int | None = None
    endpoint_status: str | None = None
    taken_at: float = 0.0

    def policy(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.policies if p["PolicyName"] == name), None)

    def others(self, policy_name: str) -> list[dict[str, Any]]:
        """The variant's policies but `policy_name` (the one under test): removed for the test, put back after."""
        return [p for p in self.policies if p["PolicyName"] != policy_name]

    def target_tracking(self) -> dict[str, Any] | None:
        """The configuration of the variant's one target-tracking policy; None when it has none or several."""
        tracking = [p for p in self.policies if p["PolicyType"] == "TargetTrackingScaling"]
        return tracking[0].get(CONFIG_KEYS["TargetTrackingScaling"]) if len(tracking) == 1 else None

    def scaling_policy(self) -> ScalingPolicy | None:
        """The variant's scaling as a ScalingPolicy (its range and its one target-tracking policy on a
        predefined metric sm-locust models); None when that does not describe it."""
        config = self.target_tracking()
        if self.target is None or config is None:
            return None
        metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        if metric not in METRICS or not isinstance(config.get("TargetValue"), (int, float)):
            return None
        return ScalingPolicy(int(self.target["MinCapacity"]), int(self.target["MaxCapacity"]),
                             float(config["TargetValue"]), str(metric),
                             float(config.get("ScaleOutCooldown", DEFAULT_COOLDOWN_S)),
                             float(config.get("ScaleInCooldown", DEFAULT_COOLDOWN_S)))

    def describe(self) -> str:
        """One line: the target's range and each policy (name, type, metric, target, cooldowns)."""
        if self.target is None:
            head = f"{self.ref.resource_id}: no scalable target"
        else:
            head = f"{self.ref.resource_id}: scalable target {self.target['MinCapacity']}..{self.target['MaxCapacity']}"
            flags = suspended_state(self.target.get("SuspendedState"))
            suspended = [k.replace("Suspended", "") for k, v in flags.items() if v]
            if suspended:
                head += f" (suspended: {', '.join(suspended)})"
        parts = [head]
        for p in self.policies:
            parts.append(f"policy {p['PolicyName']!r} {describe_policy(p)}")
        if self.desired_instances is not None:
            parts.append(f"{self.desired_instances} instance{'s' if self.desired_instances != 1 else ''}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {"endpoint": self.ref.endpoint, "variant": self.ref.variant, "target": self.target,
                "policies": self.policies, "desired_instances": self.desired_instances,
                "in_service_instances": self.in_service_instances, "endpoint_status": self.endpoint_status,
                "taken_at": self.taken_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScalingSnapshot:
        return cls(ref=VariantRef(str(data["endpoint"]), str(data["variant"])), target=data.get("target"),
                   policies=list(data.get("policies") or []), desired_instances=data.get("desired_instances"),
                   in_service_instances=data.get("in_service_instances"), endpoint_status=data.get("endpoint_status"),
                   taken_at=float(data.get("taken_at") or 0.0))


def describe_policy(policy: Mapping[str, Any]) -> str:
    """`TargetTracking SageMakerVariantInvocationsPerInstance 4200, cooldowns out 60 s / in 300 s`."""
    policy_type = str(policy.get("PolicyType") or "?")
    if policy_type != "TargetTrackingScaling":
        return policy_type
    config = policy.get(CONFIG_KEYS[policy_type]) or {}
    metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType") or "custom metric"
    value = config.get("TargetValue")
    text = f"TargetTracking {metric} {value:g}" if isinstance(value, (int, float)) else f"TargetTracking {metric}"
    cooldowns = [f"{label} {config[key]} s" for label, key in (("out", "ScaleOutCooldown"), ("in", "ScaleInCooldown"))
                 if config.get(key) is not None]
    if cooldowns:
        text += ", cooldowns " + " / ".join(cooldowns)
    if config.get("DisableScaleIn"):
        text += ", scale-in disabled"
    return text


def check_restorable(snapshot: ScalingSnapshot, policy_name: str) -> None:
    """UsageError, before anything changes, when the variant has a policy that could not be put back exactly."""
    for p in snapshot.others(policy_name):
        if p["PolicyType"] not in RESTORABLE_TYPES:
            raise UsageError(
                f"{snapshot.ref.resource_id} has the {p['PolicyType']} policy {p['PolicyName']!r}: sm-locust would "
                "have to delete it for the test, and a re-created one gets a new ARN that its CloudWatch alarm does "
                "not point at; remove it yourself, or test a copy of the endpoint (model_name + instance_type)")


# ------------------------------------------------------------------------------------------ reading


def _variant(description: Mapping[str, Any], ref: VariantRef) -> Mapping[str, Any]:
    variants = description.get("ProductionVariants") or []
    for v in variants:
        if v.get("VariantName") == ref.variant:
            return v
    names = ", ".join(str(v.get("VariantName")) for v in variants) or "none"
    raise UsageError(f"endpoint {ref.endpoint} has no variant {ref.variant!r} (its variants: {names}); "
                     "set variant_name")


def describe_variant(sm, ref: VariantRef) -> tuple[str, int | None, int | None]:
    """(EndpointStatus, DesiredInstanceCount, CurrentInstanceCount) of the variant."""
    try:
        description = sm.describe_endpoint(EndpointName=ref.endpoint)
    except Exception as exc:
        parts = api_error(exc)
        if parts is None:
            raise
        code, message = parts
        if code == "ValidationException" and "could not find" in message.lower():
            raise UsageError(f"endpoint {ref.endpoint} does not exist in this region ({message})") from None
        raise ScalingError(f"DescribeEndpoint: {code}: {message}") from None
    variant = _variant(description, ref)
    desired, current = variant.get("DesiredInstanceCount"), variant.get("CurrentInstanceCount")
    return (str(description.get("EndpointStatus") or "?"), None if desired is None else int(desired),
            None if current is None else int(current))


def _aas_call(aas, operation: str, **kwargs) -> dict[str, Any]:
    try:
        return getattr(aas, operation)(**kwargs)
    except Exception as exc:
        parts = api_error(exc)
        if parts is None:
            raise
        raise ScalingError(f"{_api_name(operation)}: {parts[0]}: {parts[1]}") from None


def snapshot(aas, sm, ref: VariantRef, clock: Callable[[], float] = time.time) -> ScalingSnapshot:
    """What exists for the variant now; changes nothing."""
    status, desired, current = describe_variant(sm, ref)
    targets = _aas_call(aas, "describe_scalable_targets", ServiceNamespace=NAMESPACE, ResourceIds=[ref.resource_id],
                        ScalableDimension=DIMENSION).get("ScalableTargets") or []
    target = None
    for t in targets:
        if t.get("ResourceId") == ref.resource_id and t.get("ScalableDimension") == DIMENSION:
            target = {"MinCapacity": int(t["MinCapacity"]), "MaxCapacity": int(t["MaxCapacity"]),
                      "SuspendedState": suspended_state(t.get("SuspendedState"))}
    policies: list[dict[str, object]] = []
    token = None
    while True:
        page = _aas_call(aas, "describe_scaling_policies", **ref.identity, **({"NextToken": token} if token else {}))
        policies += [policy_arguments(p) for p in page.get("ScalingPolicies") or []
                     if p.get("ResourceId") == ref.resource_id and p.get("ScalableDimension") == DIMENSION]
        token = page.get("NextToken")
        if not token:
            break
    return ScalingSnapshot(ref=ref, target=target, policies=policies, desired_instances=desired,
                           in_service_instances=current, endpoint_status=status, taken_at=clock())


# ------------------------------------------------------------------------------------ the plans (pure)


@dataclass(frozen=True)
class Call:
    """One step of a plan: a client call (service `aas` or `sm`), or `settle` (bring the variant to a count)."""

    service: str
    operation: str
    kwargs: dict[str, Any]
    why: str
    gone_ok: bool = False  # a delete of something already gone counts as done


def target_tracking_configuration(policy: ScalingPolicy) -> dict[str, object]:
    """TargetTrackingScalingPolicyConfiguration of the policy under test."""
    return {"TargetValue": float(policy.target_value),
            "PredefinedMetricSpecification": {"PredefinedMetricType": str(policy.metric)},
            "ScaleOutCooldown": round(float(policy.scale_out_cooldown_s)),
            "ScaleInCooldown": round(float(policy.scale_in_cooldown_s))}


def apply_plan(snap: ScalingSnapshot, policy: ScalingPolicy, policy_name: str) -> list[Call]:
    """The calls that put the policy under test on the variant, from `snap` (what was there).

    The variant's own policies go first (two policies at once would confound the test: Application
    Auto Scaling follows whichever asks for more capacity); then the target's range, with scheduled
    scaling suspended for the test; then the variant is brought to the minimum, so every
    configuration starts from it; then our policy."""
    ref = snap.ref
    calls = [Call("aas", "delete_scaling_policy", {"PolicyName": p["PolicyName"], **ref.identity},
                  f"remove policy {p['PolicyName']!r} while the test runs", gone_ok=True)
             for p in snap.others(policy_name)]
    low, high = policy.min_instances, policy.max_instances
    calls.append(Call("aas", "register_scalable_target",
                      {**ref.identity, "MinCapacity": low, "MaxCapacity": high,
                       "SuspendedState": {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False,
                                          "ScheduledScalingSuspended": True}},
                      f"scalable target {low}..{high} (scheduled scaling suspended)"))
    calls.append(Call("sm", "settle", {"instances": low, "wait": True},
                      f"start from {low} instance{'s' if low != 1 else ''}"))
    ours = {"PolicyName": policy_name, "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": target_tracking_configuration(policy)}
    calls.append(Call("aas", "put_scaling_policy", {**ours, **ref.identity},
                      f"policy {policy_name!r} {describe_policy(ours)}"))
    return calls


def _same_target(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return (int(a["MinCapacity"]) == int(b["MinCapacity"]) and int(a["MaxCapacity"]) == int(b["MaxCapacity"])
            and suspended_state(a.get("SuspendedState")) == suspended_state(b.get("SuspendedState")))


def restore_plan(before: ScalingSnapshot, now: ScalingSnapshot, policy_name: str, *,
                 instances: bool = True) -> list[Call]:
    """The calls that make the variant's scaling configuration what `before` recorded, given what is
    there `now`; only what differs (so a second restore is empty). `instances=False` leaves the
    instance count (an endpoint about to be deleted)."""
    ref = before.ref
    calls: list[Call] = []
    if now.policy(policy_name) is not None:
        calls.append(Call("aas", "delete_scaling_policy", {"PolicyName": policy_name, **ref.identity},
                          f"delete the test's policy {policy_name!r}", gone_ok=True))
    if before.target is None:
        if now.target is not None:
            calls.append(Call("aas", "deregister_scalable_target", dict(ref.identity),
                              "deregister the scalable target (there was none before)", gone_ok=True))
    elif not _same_target(before.target, now.target):
        t = before.target
        calls.append(Call("aas", "register_scalable_target",
                          {**ref.identity, "MinCapacity": int(t["MinCapacity"]), "MaxCapacity": int(t["MaxCapacity"]),
                           "SuspendedState": suspended_state(t.get("SuspendedState"))},
                          f"scalable target back to {t['MinCapacity']}..{t['MaxCapacity']}"))
    for p in before.others(policy_name):
        if now.policy(p["PolicyName"]) != p:
            calls.append(Call("aas", "put_scaling_policy", {**p, **ref.identity},
                              f"policy {p['PolicyName']!r} back ({describe_policy(p)})"))
    if instances and before.desired_instances is not None and now.desired_instances != before.desired_instances:
        calls.append(Call("sm", "settle", {"instances": int(before.desired_instances), "wait": False},
                          f"instance count back to {before.desired_instances}"))
    return calls


# -------------------------------------------------------------------------------------- running them


def read_only(client):
    """`client`, made to refuse (ReadOnlyViolation) every operation that is not Describe* or List*."""

    def guard(model, **_kwargs):
        if not model.name.startswith(READ_ONLY_PREFIXES):
            service = client.meta.service_model.service_name
            raise ReadOnlyViolation(f"{model.name} refused: this client only reads ({service})")

    client.meta.events.register("before-call", guard)
    return client


def clients(region: str | None = None, profile: str | None = None):
    """(application-autoscaling, sagemaker) clients from boto3's usual chain; AWS_ENDPOINT_URL_SAGEMAKER and
    AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING redirect them."""
    autoscaling, sagemaker = aws_clients(("application-autoscaling", "sagemaker"), Purpose.CONTROL,
                                         region=region, profile=profile)
    return autoscaling, sagemaker


def invoke(client, call: Call, *, sleep: Callable[[float], None] = time.sleep, attempts: int = 5) -> None:
    """One client call: throttles and concurrent updates retried with back-off; with `gone_ok` a delete of
    something already gone is done; any other failure a ScalingError naming the API."""
    for attempt in range(attempts):
        try:
            getattr(client, call.operation)(**call.kwargs)
            return
        except Exception as exc:
            parts = api_error(exc)
            if parts is None:
                raise
            if call.gone_ok and _is_gone(exc):
                return
            code, message = parts
            if code not in RETRY_CODES or attempt == attempts - 1:
                raise ScalingError(f"{_api_name(call.operation)}: {code}: {message}") from None
            sleep(min(2.0 ** attempt, 30.0))


class PlanRunner:
    """Runs plans against the two clients: retries throttles and concurrent updates, waits for the
    endpoint before changing its instance count, names the API in every failure."""

    def __init__(self, aas, sm, ref: VariantRef, *, progress: Progress = lambda _t: None, poll_s: float = 15.0,
                 timeout_s: float = 1800.0, sleep: Callable[[float], None] = time.sleep,
                 cancel: threading.Event | None = None, attempts: int = 5):
        self.aas, self.sm, self.ref = aas, sm, ref
        self.progress, self.poll_s, self.timeout_s, self.sleep = progress, poll_s, timeout_s, sleep
        self.cancel = cancel
        self.attempts = attempts

    def run(self, calls: Iterable[Call], *, keep_going: bool = False) -> list[str]:
        """Each call in order. Stops at the first failure (ScalingError) unless `keep_going`, which
        tries every call and returns what failed."""
        failed: list[str] = []
        for call in calls:
            self.progress(call.why)
            try:
                self.one(call)
            except SmLocustError as exc:
                if not keep_going:
                    raise
                failed.append(f"{call.why}: {exc.message}")
        return failed

    def one(self, call: Call) -> None:
        if call.operation == "settle":
            self.settle(int(call.kwargs["instances"]), wait=bool(call.kwargs.get("wait")))
            return
        invoke(self.aas if call.service == "aas" else self.sm, call, sleep=self.sleep, attempts=self.attempts)

    def wait_in_service(self, instances: int | None = None) -> tuple[int | None, int | None]:
        """Until the endpoint is InService (and, given `instances`, serves that many); returns (desired, current)."""
        deadline = time.monotonic() + self.timeout_s
        told = None
        while True:
            status, desired, current = describe_variant(self.sm, self.ref)
            if status == "InService" and (instances is None or (desired == instances and current == instances)):
                return desired, current
            if status not in ("InService", "Updating", "SystemUpdating", "Creating"):
                raise ScalingError(f"endpoint {self.ref.endpoint} is {status}: its instance count cannot be changed")
            if time.monotonic() > deadline:
                raise ScalingError(f"endpoint {self.ref.endpoint} still {status} with {current} of {desired} instances "
                                   f"after {self.timeout_s:.0f} s")
            if (status, current) != told:
                of = f" of {desired}" if desired is not None and desired != current else ""
                plural = "s" if current != 1 else ""
                self.progress(f"{self.ref.endpoint} {status}, {current} instance{plural} in service{of}: waiting")
                told = (status, current)
            if self.cancel is not None and self.cancel.is_set():
                raise ScalingError(f"interrupted while {self.ref.endpoint} was {status}")
            self.sleep(self.poll_s)

    def settle(self, instances: int, *, wait: bool) -> None:
        """The variant's DesiredInstanceCount set to `instances` (UpdateEndpointWeightsAndCapacities when it
        differs, once the endpoint is InService); with `wait`, until that many are in service."""
        desired, _current = self.wait_in_service()
        if desired != instances:
            capacity = {"VariantName": self.ref.variant, "DesiredInstanceCount": instances}
            self.one(Call("sm", "update_endpoint_weights_and_capacities",
                          {"EndpointName": self.ref.endpoint, "DesiredWeightsAndCapacities": [capacity]},
                          f"instance count {desired} -> {instances}"))
        if wait:
            self.wait_in_service(instances)


# ------------------------------------------------------------------------------------------- journal


def journal_path(folder: str | Path, ref: VariantRef) -> Path:
    """Where a sweep folder keeps the restore journal of one variant."""
    return Path(folder) / JOURNAL_DIR / f"{ref.slug}.json"


def read_journal(path: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a readable sm-locust restore journal ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != JOURNAL_SCHEMA or "snapshot" not in data:
        raise RunError(f"{path}: not an sm-locust restore journal (schema {JOURNAL_SCHEMA})")
    return data


class ScalingUnderTest:
    """The policy under test on one variant, from `apply()` until `restore()`; a context manager.

    `policy` is the configuration under test (checked: ScalingPolicy.check). The journal at `journal`
    holds the snapshot and the state (applying -> applied -> restored) so that another process can
    finish a restore (`restore_from_journal`, `finish_restores`)."""

    def __init__(self, aas, sm, ref: VariantRef, policy: ScalingPolicy, *, sweep_id: str, journal: str | Path,
                 region: str | None = None, progress: Progress = lambda _t: None, poll_s: float = 15.0,
                 timeout_s: float = 1800.0, sleep: Callable[[float], None] = time.sleep,
                 cancel: threading.Event | None = None, clock: Callable[[], float] = time.time,
                 restore_instances: bool = True):
        self.aas, self.sm, self.ref, self.policy = aas, sm, ref, policy
        self.restore_instances = restore_instances
        self.sweep_id = sweep_id
        self.policy_name = policy_name_for(sweep_id)
        self.journal = Path(journal)
        self.region = region
        self.progress = progress
        self.clock = clock
        self.runner = PlanRunner(aas, sm, ref, progress=progress, poll_s=poll_s, timeout_s=timeout_s, sleep=sleep,
                                 cancel=cancel)
        self.before: ScalingSnapshot | None = None
        self.left: list[str] = []

    def _write(self, state: str, **extra: object) -> None:
        assert self.before is not None
        write_json(self.journal, {"schema": JOURNAL_SCHEMA, "sweep_id": self.sweep_id, "policy_name": self.policy_name,
                                  "region": self.region, "state": state, "updated_at": self.clock(),
                                  "restore_instances": self.restore_instances,
                                  "snapshot": self.before.as_dict(), **extra})

    def apply(self) -> ScalingSnapshot:
        """Snapshot, journal, then the calls of `apply_plan`; on a failure everything is put back and
        the ScalingError raised. Returns the snapshot (what will be restored)."""
        earlier = read_journal(self.journal)
        if earlier and earlier.get("state") != "restored":  # a previous run did not finish its restore
            self.progress(f"{self.ref.resource_id}: finishing the restore an earlier run left ({self.journal})")
            left = restore_from_journal(self.journal, self.aas, self.sm, progress=self.progress, runner=self.runner)
            if left:
                raise ScalingError(f"{self.ref.resource_id}: an earlier run's restore could not be finished: "
                                   f"{'; '.join(left)}")
        self.before = snapshot(self.aas, self.sm, self.ref, clock=self.clock)
        check_restorable(self.before, self.policy_name)
        self.progress(f"before the test: {self.before.describe()}")
        self._write("applying")
        try:
            self.runner.run(apply_plan(self.before, self.policy, self.policy_name))
        except BaseException:
            self.restore()
            raise
        self._write("applied")
        return self.before

    def restore(self) -> list[str]:
        """Put back what `apply` found; returns what could not be (empty: the journal is marked restored)."""
        if self.before is None:
            return []
        # never cancelled: a Ctrl-C that stopped the test must not stop the restore (an endpoint still Updating
        # from a scale-out is waited for, then its count set back)
        runner = PlanRunner(self.aas, self.sm, self.ref, progress=self.progress, poll_s=self.runner.poll_s,
                            timeout_s=self.runner.timeout_s, sleep=self.runner.sleep)
        self.left = restore_from_journal(self.journal, self.aas, self.sm, progress=self.progress, runner=runner)
        return self.left

    def __enter__(self) -> Self:
        self.apply()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()


def restore_from_journal(path: str | Path, aas, sm, *, progress: Progress = lambda _t: None,
                         runner: PlanRunner | None = None) -> list[str]:
    """Finish (or redo: it only changes what differs) the restore a journal describes; marks it
    restored when nothing is left. Returns what could not be restored."""
    record = read_journal(path)
    if record is None or record.get("state") == "restored":
        return []
    before = ScalingSnapshot.from_dict(record["snapshot"])
    runner = runner or PlanRunner(aas, sm, before.ref, progress=progress)
    try:
        now = snapshot(aas, sm, before.ref)
    except UsageError as exc:  # the endpoint (or its variant) is gone: nothing is left to restore on it
        progress(f"{before.ref.resource_id}: {exc.message}; nothing to restore")
        write_json(path, {**record, "state": "restored", "note": exc.message})
        return []
    except ScalingError as exc:
        return [f"{before.ref.resource_id}: {exc.message}"]
    plan = restore_plan(before, now, str(record["policy_name"]), instances=bool(record.get("restore_instances", True)))
    left = runner.run(plan, keep_going=True)
    if left:
        write_json(path, {**record, "left": left})
        return left
    write_json(path, {**record, "state": "restored", "left": []})
    progress(f"{before.ref.resource_id}: restored ({before.describe()})")
    return []


def finish_restores(folder: str | Path, *, aas=None, sm=None, region: str | None = None, profile: str | None = None,
                    progress: Progress = lambda _t: None) -> tuple[list[str], list[str]]:
    """Every unfinished journal under `folder` (a sweep folder): (restored, left)."""
    restored: list[str] = []
    left: list[str] = []
    for path in sorted((Path(folder) / JOURNAL_DIR).glob("*.json")):
        record = read_journal(path)
        if record is None or record.get("state") == "restored":
            continue
        if aas is None or sm is None:
            aas, sm = clients(region or record.get("region"), profile)
        what = f"scaling of {ScalingSnapshot.from_dict(record['snapshot']).ref.resource_id}"
        failed = restore_from_journal(path, aas, sm, progress=progress)
        if failed:
            left.extend(failed)
        else:
            restored.append(what)
    return restored, left


def delete_sweep_policies(aas, sweep_id: str, *, progress: Progress = lambda _t: None) -> tuple[list[str], list[str]]:
    """Delete every SageMaker scaling policy named after this sweep, on any variant (what a sweep
    killed before its journal was written can leave): (deleted, left)."""
    name = policy_name_for(sweep_id)
    found: list[dict[str, object]] = []
    token = None
    while True:
        page = _aas_call(aas, "describe_scaling_policies", ServiceNamespace=NAMESPACE,
                         **({"NextToken": token} if token else {}))
        found += [p for p in page.get("ScalingPolicies") or [] if p.get("PolicyName") == name]
        token = page.get("NextToken")
        if not token:
            break
    deleted, left = [], []
    for p in found:
        what = f"scaling policy {name} on {p['ResourceId']}"
        progress(f"deleting {what}")
        try:
            target = {"ServiceNamespace": NAMESPACE, "ResourceId": p["ResourceId"],
                      "ScalableDimension": p["ScalableDimension"]}
            invoke(aas, Call("aas", "delete_scaling_policy", {"PolicyName": name, **target}, what, gone_ok=True))
            deleted.append(what)
        except ScalingError as exc:
            left.append(f"{what} ({exc.message})")
    return deleted, left


# ------------------------------------------------------------------------------------------ watching


@dataclass(frozen=True)
class InstanceReading:
    """One DescribeEndpoint answer: when (epoch seconds), the variant's desired and in-service counts."""

    at: float
    desired: int | None
    in_service: int | None
    status: str


class InstancePoller:
    """Polls DescribeEndpoint every `every_s` run seconds (`every_s / time_scale` real ones: 10 emulated
    seconds against the local fleet) in a thread, once at start and once at stop; read-only.
    `readings` in time order; `timeline(clock)` is the instance timeline in run seconds."""

    def __init__(self, sm, ref: VariantRef, *, every_s: float = POLL_EVERY_S, time_scale: float = 1.0,
                 clock: Callable[[], float] = time.time,
                 on_change: Callable[[InstanceReading, InstanceReading], None] | None = None):
        self.sm, self.ref, self.clock = sm, ref, clock
        self.on_change = on_change  # called (previous, reading) when the desired or in-service count moved
        self.wait_s = every_s / time_scale
        self.readings: list[InstanceReading] = []
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poll_once(self) -> InstanceReading | None:
        try:
            status, desired, current = describe_variant(self.sm, self.ref)
        except SmLocustError as exc:  # a throttle or a passing failure costs one reading, not the run
            with self._lock:
                self.errors += 1
                self.last_error = exc.message
            return None
        reading = InstanceReading(self.clock(), desired, current, status)
        with self._lock:
            previous = self.readings[-1] if self.readings else None
            self.readings.append(reading)
        if self.on_change is not None and previous is not None and \
                (previous.desired, previous.in_service) != (reading.desired, reading.in_service):
            self.on_change(previous, reading)
        return reading

    def _loop(self) -> None:
        while not self._stop.wait(self.wait_s):
            self.poll_once()

    def start(self) -> Self:
        self.poll_once()
        self._thread = threading.Thread(target=self._loop, name="sm-locust-instance-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
            self.poll_once()

    def timeline(self, clock: RunClock) -> list[InstanceSample]:
        """The readings as InstanceSamples in run seconds; the last reading taken before run second 0
        stands at 0 (the counts the run started with), earlier ones are dropped."""
        with self._lock:
            readings = [r for r in self.readings if r.desired is not None and r.in_service is not None]
        samples: list[InstanceSample] = []
        for r in readings:
            t_s = clock.run_s(r.at)
            sample = InstanceSample(max(0.0, round(t_s, 3)), int(r.desired or 0), int(r.in_service or 0))
            if t_s <= 0 and samples and samples[-1].t_s == 0.0:
                samples[-1] = sample
            else:
                samples.append(sample)
        return samples
