"""The autoscaling kind's keys of a sweep file, checked (docs/autoscaling.md has an example).

An `autoscaling:` section makes the sweep an autoscaling one: a key holding a list is a grid axis
(`autoscaling.<key>`), a single value a shared setting. Every combination must be a policy
Application Auto Scaling accepts (`scaling.policy.ScalingPolicy.check`); the local emulation's own
keys (`instance_start_s`, `time_scale`) are refused with `deploy: sagemaker`. `traffic:` is required
(`plateau/rates.py`). One `UsageError` naming the key, before anything is deployed.

With `async_target_backlog` the variant is an asynchronous one (local only: `serve --async
--async-max-instances`): target tracking on ApproximateBacklogSizePerInstance
(`scaling.asyncpolicy.BacklogPolicy`, `min_instances` 0 allowed, the default), and `scale_from_zero`
(true / false, or both as a grid axis) adds the step policy on HasBacklogWithoutCapacity; `metric`
and `target_value` are the real-time policy's and are refused then (docs/async.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.plateau.rates import Traffic, parse_traffic
from sm_locust.scaling.asyncpolicy import BacklogPolicy
from sm_locust.scaling.policy import INVOCATIONS, MAX_INSTANCES, ScalingPolicy, metric_spec
from sm_locust.scaling.timeline import MAX_TIME_SCALE
from sm_locust.sweep.kinds import KINDS
from sm_locust.sweep.validate import Checker

SECTION = "autoscaling"  # the kind's name (sweep/kinds.py registers its section and keys)
KEYS = KINDS.get(SECTION).keys  # besides the section
POLICY_KEYS = ("min_instances", "max_instances", "metric", "target_value", "scale_out_cooldown_s",
               "scale_in_cooldown_s")
LOCAL_ONLY = ("instance_start_s", "time_scale")  # the emulation's; on SageMaker the instances and the clock are real
ASYNC_KEYS = ("async_target_backlog", "scale_from_zero")  # an async variant's backlog policies (local only)
SECTION_KEYS = POLICY_KEYS + LOCAL_ONLY + ASYNC_KEYS
PREFIX = "autoscaling."
DEFAULT_MIN_INSTANCES = 1
DEFAULT_INSTANCE_START_S = 240.0  # the example; AWS publishes no figure (docs/facts.md)
REFUSED = {  # shared keys that mean nothing to an autoscaling sweep, and why
    "configurations": "an autoscaling sweep's configurations are the lists under autoscaling: (its grid axes); vary "
                      "other settings with grid:",
}


@dataclass
class AutoscalingSpec:
    """The parsed section: its grid axes, its shared settings (both `autoscaling.<key>`) and the traffic."""

    axes: dict[str, list[Any]]
    shared: dict[str, Any]
    traffic: Traffic
    deploy: str = "local"
    policies: list[ScalingPolicy] = field(default_factory=list)  # every combination, checked

    def grid(self) -> dict[str, list[Any]]:
        return {f"{PREFIX}{k}": list(v) for k, v in self.axes.items()}

    def as_dict(self) -> dict[str, object]:
        section = {k[len(PREFIX):]: v for k, v in self.shared.items()}
        section.update(self.axes)
        return {k: section[k] for k in SECTION_KEYS if k in section}


def own_settings(settings: Mapping[str, object]) -> dict[str, Any]:
    """The `autoscaling.*` settings of a configuration, without the prefix."""
    return {k[len(PREFIX):]: v for k, v in settings.items() if k.startswith(PREFIX)}


def is_async(settings: Mapping[str, object]) -> bool:
    """Whether a configuration's variant is an async one (its `autoscaling.async_target_backlog`)."""
    return own_settings(settings).get("async_target_backlog") is not None


def policy_of(settings: Mapping[str, object]) -> ScalingPolicy:
    """The target-tracking policy a configuration tests (its `autoscaling.*` settings); an async
    variant's is a `BacklogPolicy` (ApproximateBacklogSizePerInstance, MinCapacity 0 by default)."""
    own = own_settings(settings)
    if own.get("async_target_backlog") is not None:
        cooldowns = {k: own[k] for k in ("scale_out_cooldown_s", "scale_in_cooldown_s") if k in own}
        return BacklogPolicy(int(own.get("min_instances", 0)), int(own["max_instances"]),
                             float(own["async_target_backlog"]), **cooldowns).check(SECTION)
    policy = {k: own[k] for k in POLICY_KEYS if k in own}
    policy.setdefault("min_instances", DEFAULT_MIN_INSTANCES)
    policy.setdefault("metric", INVOCATIONS)
    return ScalingPolicy(**policy).check()


def parse_section(data: Mapping[str, object], check: Checker, deploy: str = "local",
                  base_dir: Path | None = None) -> AutoscalingSpec:
    """The autoscaling keys of a sweep file that has an `autoscaling:` section, checked (`schema.py` calls
    it; the shared keys it refuses, `REFUSED`, are checked before)."""
    if deploy not in ("local", "sagemaker"):
        raise check.error("deploy", f"an autoscaling sweep deploys local or sagemaker, not {deploy!r}")
    section = check.mapping(SECTION, data[SECTION])
    check.unknown(SECTION, section, SECTION_KEYS)
    asynchronous = any(k in section for k in ASYNC_KEYS)
    if asynchronous:
        if "async_target_backlog" not in section:
            raise check.error(f"{SECTION}.async_target_backlog", "missing: an async variant's target tracking on "
                              "ApproximateBacklogSizePerInstance needs its target, e.g. async_target_backlog: 5")
        if deploy != "local":
            raise check.error(f"{SECTION}.async_target_backlog", "local emulation only (serve --async); leave it "
                              "out with deploy: sagemaker")
        for key in ("metric", "target_value"):
            if key in section:
                raise check.error(f"{SECTION}.{key}", "the real-time policy's; an async variant tracks "
                                  "ApproximateBacklogSizePerInstance (async_target_backlog): leave it out")
    for key in (("max_instances",) if asynchronous else ("max_instances", "target_value")):
        if key not in section:
            example = "max_instances: 3" if key == "max_instances" else "target_value: 4200"
            raise check.error(f"{SECTION}.{key}", f"missing: give one value or a list (a grid axis), e.g. {example}")
    if deploy == "sagemaker":
        for key in LOCAL_ONLY:
            if key in section:
                raise check.error(f"{SECTION}.{key}", "local emulation only: on SageMaker the instances start as "
                                  "they do and the clock is real; leave it out with deploy: sagemaker")
    values: dict[str, list[Any]] = {}
    for key in SECTION_KEYS:
        if key not in section:
            continue
        path = f"{SECTION}.{key}"
        checked: list[object] = []
        for value in check.values(path, section[key]):
            if key in ("min_instances", "max_instances"):
                low = 0 if asynchronous and key == "min_instances" else 1
                checked.append(check.integer(path, value, minimum=low, maximum=MAX_INSTANCES))
            elif key == "scale_from_zero":
                checked.append(check.flag(path, value))
            elif key in ("target_value", "async_target_backlog"):
                checked.append(check.number(path, value, above=0))
            elif key == "metric":
                try:
                    checked.append(metric_spec(check.text(path, value)).name)
                except UsageError as exc:
                    raise check.prefixed(path, exc) from None
            elif key == "time_scale":
                checked.append(check.number(path, value, above=0, maximum=MAX_TIME_SCALE))
            else:  # cooldowns, instance_start_s
                checked.append(check.number(path, value, minimum=0))
        if len(set(map(str, checked))) != len(checked):
            raise check.error(path, f"{checked!r} repeats a value; give each value once")
        values[key] = checked
    policies: list[ScalingPolicy] = []
    keys = (("min_instances", "max_instances", "async_target_backlog", "scale_out_cooldown_s", "scale_in_cooldown_s")
            if asynchronous else POLICY_KEYS)
    for combination in itertools.product(*(values.get(k, [None]) for k in keys)):
        given = {k: v for k, v in zip(keys, combination, strict=True) if v is not None}
        try:
            if asynchronous:
                policies.append(policy_of({f"{PREFIX}{k}": v for k, v in given.items()}))
            else:
                given.setdefault("min_instances", DEFAULT_MIN_INSTANCES)
                policies.append(ScalingPolicy(**given).check(SECTION))
        except UsageError as exc:
            raise UsageError(f"{check.source}: {exc.message}") from None
    if "traffic" not in data or data.get("traffic") is None:
        raise check.error("traffic", "missing: an autoscaling sweep needs the traffic to scale on, a list of open-loop "
                          "rate phases like [{duration_s: 300, rps: 20}, {duration_s: 600, rps: 150}]")
    try:
        traffic = parse_traffic(data["traffic"], "traffic")
    except UsageError as exc:
        raise UsageError(f"{check.source}: {exc.message}") from None
    axes = {k: v for k, v in values.items() if isinstance(section[k], list)}
    if not axes and not data.get("grid") and not data.get("configurations"):
        # one policy, tested on its own: its policy settings label the single configuration
        axes = {k: v for k, v in values.items() if k in POLICY_KEYS + ASYNC_KEYS}
    shared = {f"{PREFIX}{k}": v[0] for k, v in values.items() if k not in axes}
    if deploy == "local":
        shared.setdefault(f"{PREFIX}instance_start_s", DEFAULT_INSTANCE_START_S)
    return AutoscalingSpec(axes=axes, shared=shared, traffic=traffic, deploy=deploy, policies=policies)
