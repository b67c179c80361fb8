"""Autoscaling an asynchronous endpoint on its backlog, as pure code (docs/async.md, "Scaling on the
backlog"; facts: docs/facts.md, "Autoscaling an asynchronous endpoint").

AWS documents two policies for an async variant, and the local endpoint emulates both:

- **target tracking on `ApproximateBacklogSizePerInstance`** (a CustomizedMetricSpecification,
  Statistic Average): `BacklogPolicy`, run by `policy.TargetTracking` like any target-tracking
  policy (one-minute periods, 3 above the target to scale out, 15 below 90 % of it to scale in).
  Its MinCapacity may be 0: it scales in to zero once the backlog stays empty. With no instance
  the per-instance backlog is the whole backlog (the model: divided by at least one instance), so
  from zero it scales out only once the backlog exceeds the target, as AWS says it does;
- **scale from zero**: `StepFromZero`, a step scaling policy (ChangeInCapacity +1 for any breach,
  Cooldown 300 s) on a CloudWatch alarm on `HasBacklogWithoutCapacity` (Average >= 1 for 2 of 2
  one-minute periods): it adds an instance when requests wait and none is running.

`AsyncAutoscaler` runs the policies given on one desired count (when both act, the larger count
wins) and `InstanceClock` adds up the instance-seconds billed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.scaling.policy import (
    DEFAULT_COOLDOWN_S,
    MAX_INSTANCES,
    OUT,
    MetricSpec,
    ScaleDecision,
    ScalingPolicy,
    TargetTracking,
)

BACKLOG_PER_INSTANCE = "ApproximateBacklogSizePerInstance"
HAS_BACKLOG_WITHOUT_CAPACITY = "HasBacklogWithoutCapacity"
BACKLOG_SPEC = MetricSpec(BACKLOG_PER_INSTANCE, 60.0, 3, 15, "queued requests per instance")
STEP_PERIOD_S = 60.0  # the alarm's Period in AWS's example
STEP_PERIODS = 2  # its EvaluationPeriods and DatapointsToAlarm
STEP_THRESHOLD = 1.0  # GreaterThanOrEqualToThreshold 1
STEP_ADJUSTMENT = 1  # ChangeInCapacity for a breach of any size (MetricIntervalLowerBound 0)


@dataclass(frozen=True)
class BacklogPolicy(ScalingPolicy):
    """Target tracking on ApproximateBacklogSizePerInstance; MinCapacity may be 0."""

    metric: str = BACKLOG_PER_INSTANCE

    def check(self, where: object = "async scaling") -> BacklogPolicy:
        for key in ("min_instances", "max_instances"):
            value = getattr(self, key)
            low = 0 if key == "min_instances" else 1
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_INSTANCES:
                raise UsageError(f"{where}: {key} must be a whole number of instances, {low} to {MAX_INSTANCES:,}, "
                                 f"got {value!r}")
        if self.min_instances > self.max_instances:
            raise UsageError(f"{where}: min_instances ({self.min_instances}) is above max_instances "
                             f"({self.max_instances})")
        if not (isinstance(self.target_value, (int, float)) and math.isfinite(self.target_value)
                and self.target_value > 0):
            raise UsageError(f"{where}: the backlog target per instance must be a number above 0, "
                             f"got {self.target_value!r}")
        for key in ("scale_out_cooldown_s", "scale_in_cooldown_s"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise UsageError(f"{where}: {key} must be 0 or more seconds, got {value!r}")
        return self

    @property
    def spec(self) -> MetricSpec:
        return BACKLOG_SPEC

    def count_for(self, capacity: float, value: float) -> int:
        """ceil(capacity x metric / target), a fleet of none counted as one (its metric is the whole backlog)."""
        return super().count_for(max(1.0, capacity), value)

    def describe(self) -> str:
        return (f"target tracking {BACKLOG_PER_INSTANCE} = {self.target_value:g}, {self.min_instances}-"
                f"{self.max_instances} instances, cooldowns out {self.scale_out_cooldown_s:g} s / in "
                f"{self.scale_in_cooldown_s:g} s")


def backlog_per_instance(backlog: float, in_service: int) -> float:
    """ApproximateBacklogSizePerInstance as the model takes it: the backlog over at least one instance."""
    return backlog / max(1, in_service)


def has_backlog_without_capacity(backlog: float, in_service: int) -> float:
    """HasBacklogWithoutCapacity: 1 when requests wait and no instance serves, else 0."""
    return 1.0 if backlog > 0 and in_service <= 0 else 0.0


@dataclass
class StepFromZero:
    """The step scaling policy AWS documents to scale an async endpoint up from zero (module doc):
    fed one HasBacklogWithoutCapacity average per period; +1 instance when the last `periods` all
    reached the threshold and no cooldown runs."""

    max_instances: int
    cooldown_s: float = DEFAULT_COOLDOWN_S
    period_s: float = STEP_PERIOD_S
    periods: int = STEP_PERIODS
    _values: list[float] = field(default_factory=list)
    _cooldown_until: float = -math.inf

    def observe(self, t_s: float, value: float | None, desired: int) -> int | None:
        """The datapoint of [t_s, t_s + period) (None: missing data, which the alarm treats as
        missing: it breaks nothing and counts nothing); the new desired count, or None."""
        if value is None:
            return None
        self._values = [*self._values[-(self.periods - 1):], value] if self.periods > 1 else [value]
        now = t_s + self.period_s
        alarm = len(self._values) >= self.periods and all(v >= STEP_THRESHOLD for v in self._values)
        if not alarm or now < self._cooldown_until - 1e-9 or desired >= self.max_instances:
            return None
        self._cooldown_until = now + self.cooldown_s
        return min(self.max_instances, desired + STEP_ADJUSTMENT)


@dataclass
class AsyncAutoscaler:
    """The policies of one async variant on one desired count (module doc). `activity_s`: how long a
    scale-out takes to serve (the emulation's instance start)."""

    initial: int
    tracking: BacklogPolicy | None = None
    from_zero: StepFromZero | None = None
    activity_s: float = 0.0
    decisions: list[ScaleDecision] = field(default_factory=list)
    cause: str = ""  # the metric of the last decision's policy

    def __post_init__(self) -> None:
        if self.tracking is None and self.from_zero is None:
            raise ValueError("an async autoscaler needs a target-tracking policy, a scale-from-zero policy, or both")
        self.loop = TargetTracking(self.tracking, self.initial, self.activity_s) if self.tracking else None
        self.desired = self.loop.desired if self.loop else self.initial
        if self.loop is not None:
            self.decisions.extend(self.loop.decisions)

    @property
    def period_s(self) -> float:
        return BACKLOG_SPEC.period_s if self.loop is not None else self.from_zero.period_s  # type: ignore[union-attr]

    def observe(self, t_s: float, backlog: float, in_service: int) -> ScaleDecision | None:
        """The period [t_s, t_s + period)'s average backlog with `in_service` instances; the decision
        taken at its end, if any (the scale-from-zero policy's first: it adds capacity)."""
        stepped = None
        if self.from_zero is not None:
            stepped = self.from_zero.observe(t_s, has_backlog_without_capacity(backlog, in_service), self.desired)
        decision = None
        if stepped is not None and stepped > self.desired:
            now = t_s + self.period_s
            decision = ScaleDecision(now, OUT, self.desired, stepped, t_s - (STEP_PERIODS - 1) * self.period_s,
                                     has_backlog_without_capacity(backlog, in_service), now + self.activity_s)
            self.desired = stepped
            self.cause = HAS_BACKLOG_WITHOUT_CAPACITY
            if self.loop is not None:
                self.loop.desired = stepped
        if self.loop is not None:
            tracked = self.loop.observe(t_s, backlog_per_instance(backlog, in_service), in_service)
            if tracked is not None and (decision is None or tracked.to_count > decision.to_count):
                decision = tracked
                self.desired = tracked.to_count
                self.cause = BACKLOG_PER_INSTANCE
        if decision is not None:
            self.decisions.append(decision)
        return decision


@dataclass
class InstanceClock:
    """Instance-seconds billed: the instances in service integrated over (emulated) time."""

    t_s: float = 0.0
    in_service: int = 0
    seconds: float = 0.0

    def at(self, t_s: float, in_service: int) -> None:
        """From `t_s` on, `in_service` instances serve."""
        self.seconds += self.in_service * max(0.0, t_s - self.t_s)
        self.t_s, self.in_service = max(self.t_s, t_s), in_service

    def total(self, t_s: float) -> float:
        return self.seconds + self.in_service * max(0.0, t_s - self.t_s)
