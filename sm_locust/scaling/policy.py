"""Application Auto Scaling target tracking on a SageMaker variant, as pure code.

The control loop AWS runs, fed a metric series, so a policy can be tested offline: the local fleet
emulation (`endpoint/fleet.py`) and `simulate.py` run it. Every behaviour is AWS's documented one,
sources in docs/facts.md ("Autoscaling (Application Auto Scaling target tracking)"); where AWS
publishes no number the model says so. One datapoint per metric period (a period without data
breaks every streak); desired = ceil(capacity x metric / target) clamped to min..max; a scale-out
lasts `activity_s` and blocks other scaling; cooldowns count from the activity's end.
`TargetTracking.observe(t_s, value, in_service)` takes one datapoint and returns the
`ScaleDecision` taken at its period's end, or None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from sm_locust.errors import UsageError
from sm_locust.scaling.timeline import MetricPeriod
from sm_locust.util.registry import Registry

INVOCATIONS = "SageMakerVariantInvocationsPerInstance"
CONCURRENCY = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
SCALE_IN_RATIO = 0.9  # the scale-in alarm's threshold: 90 % of the target ("usually more than 10 % lower")
MAX_INSTANCES = 1000  # a variant's instances, emulated or real: the local fleet keeps a table row per instance
DEFAULT_COOLDOWN_S = 300.0  # Application Auto Scaling's default for SageMaker endpoint variants
OUT, IN = "out", "in"


@dataclass(frozen=True)
class MetricSpec:
    """A predefined metric a target-tracking policy can follow on a variant."""

    name: str  # AWS's PredefinedMetricType
    period_s: float  # one datapoint per period
    scale_out_periods: int  # consecutive datapoints above the target before a scale-out
    scale_in_periods: int  # consecutive datapoints below 90 % of the target before a scale-in
    unit: str  # what the target value counts

    @property
    def short(self) -> str:
        """The CloudWatch metric behind it, for progress lines."""
        return "InvocationsPerInstance" if self.name == INVOCATIONS else "ConcurrentRequestsPerModel"


METRICS: Registry[MetricSpec] = Registry("scaling metric")
METRICS.add(INVOCATIONS, MetricSpec(INVOCATIONS, 60.0, 3, 15, "invocations per instance per minute"),
            "InvocationsPerInstance")
METRICS.add(CONCURRENCY, MetricSpec(CONCURRENCY, 10.0, 3, 90, "concurrent requests per instance"),
            "ConcurrentRequestsPerModel", "SageMakerVariantConcurrentRequestsPerModel")


def metric_spec(name: str) -> MetricSpec:
    """The metric named (AWS's name or the CloudWatch one); a UsageError listing the valid names otherwise."""
    return METRICS.get(name)


@dataclass(frozen=True)
class ScalingPolicy:
    """A target-tracking policy on one variant, with its scalable target's min and max."""

    min_instances: int = 1
    max_instances: int = 1
    target_value: float = 0.0
    metric: str = INVOCATIONS
    scale_out_cooldown_s: float = DEFAULT_COOLDOWN_S
    scale_in_cooldown_s: float = DEFAULT_COOLDOWN_S

    def check(self, where: str | Mapping[str, str] = "autoscaling") -> ScalingPolicy:
        """One-line UsageError for what AWS would refuse or what cannot scale; the policy with the
        metric spelled as AWS does. `where` prefixes the keys (`autoscaling.min_instances`), or maps
        each key to the name the user typed (`--min-instances`)."""

        def name(key: str) -> str:
            return where.get(key, key) if isinstance(where, Mapping) else f"{where}.{key}"

        for key in ("min_instances", "max_instances"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name(key)} must be a whole number of instances, at least 1, got {value!r}")
            if value > MAX_INSTANCES:
                raise UsageError(f"{name(key)} must be at most {MAX_INSTANCES:,} instances, got {value:,}")
        if self.min_instances > self.max_instances:
            raise UsageError(f"{name('min_instances')} ({self.min_instances}) is above {name('max_instances')} "
                             f"({self.max_instances}); the minimum must not exceed the maximum")
        if (isinstance(self.target_value, bool) or not isinstance(self.target_value, (int, float))
                or not math.isfinite(self.target_value) or self.target_value <= 0):
            raise UsageError(f"{name('target_value')} must be a number above 0 (the metric's value per instance), "
                             f"got {self.target_value!r}")
        for key in ("scale_out_cooldown_s", "scale_in_cooldown_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise UsageError(f"{name(key)} must be a number of seconds, 0 or more, got {value!r}")
        try:
            spec = metric_spec(str(self.metric))
        except UsageError as exc:
            raise UsageError(f"{name('metric')}: {exc}") from None
        return ScalingPolicy(self.min_instances, self.max_instances, float(self.target_value), spec.name,
                             float(self.scale_out_cooldown_s), float(self.scale_in_cooldown_s))

    @property
    def spec(self) -> MetricSpec:
        return metric_spec(self.metric)

    @property
    def scale_in_threshold(self) -> float:
        return SCALE_IN_RATIO * self.target_value

    def clamp(self, count: int) -> int:
        return max(self.min_instances, min(self.max_instances, count))

    def count_for(self, capacity: float, value: float) -> int:
        """ceil(capacity x metric / target) within min..max (a hair of float noise forgiven)."""
        return self.clamp(math.ceil(capacity * value / self.target_value - 1e-9))

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        spec = self.spec
        return (f"target tracking {spec.short} = {self.target_value:g} ({spec.unit}), {self.min_instances}-"
                f"{self.max_instances} instances, cooldowns out {self.scale_out_cooldown_s:g} s / in "
                f"{self.scale_in_cooldown_s:g} s")


@dataclass(frozen=True)
class ScaleDecision:
    """A change of the desired count the loop made at run second `t_s`."""

    t_s: float  # the end of the period whose datapoint completed the alarm
    direction: str  # OUT or IN
    from_count: int
    to_count: int
    alarm_start_s: float  # start of the first breaching period (since the previous decision)
    metric: float  # the datapoint the count came from
    ready_s: float  # when the new count serves (t_s + the instance start for a scale-out)

    @property
    def reaction_s(self) -> float:
        return self.t_s - self.alarm_start_s

    def describe(self, spec: MetricSpec | None = None) -> str:
        what = f" ({spec.short} {self.metric:.4g})" if spec else ""
        return (f"scale {self.direction} {self.from_count} -> {self.to_count} at {self.t_s:.0f} s{what}, "
                f"{self.reaction_s:.0f} s after the metric crossed, serving at {self.ready_s:.0f} s")


def breach_start(periods: Sequence[MetricPeriod], end_s: float, breaching: Callable[[float], bool],
                 period_s: float, after_s: float = -math.inf) -> float | None:
    """The start of the first period of the unbroken run of breaching datapoints that ends at `end_s`
    (the last such period ends there), counting no period that starts before `after_s`; None when the
    period ending at `end_s` does not breach. One rule for the loop and for measured timelines."""
    by_start = {round(p.t_s, 6): p.value for p in periods}
    start = end_s - period_s
    first = None
    while start >= after_s - 1e-9:
        value = by_start.get(round(start, 6))
        if value is None or not breaching(value):
            break
        first = start
        start -= period_s
    return first


@dataclass
class TargetTracking:
    """The control loop of one target-tracking policy, fed one datapoint per period."""

    policy: ScalingPolicy
    initial: int  # instances serving at run second 0
    activity_s: float = 0.0  # how long a scale-out lasts: until the new instances serve
    desired: int = field(init=False)
    decisions: list[ScaleDecision] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.spec = self.policy.spec
        self.desired = self.policy.clamp(self.initial)
        self._periods: list[MetricPeriod] = []
        self._busy_until = -math.inf  # a scaling activity runs (the endpoint is Updating)
        self._out_cooldown_until = -math.inf
        self._in_cooldown_until = -math.inf
        self._last_decision_s = -math.inf
        if self.desired != self.initial:  # registering a min above (or a max below) the count moves it at once
            self._decide(0.0, OUT if self.desired > self.initial else IN, self.initial, self.desired, 0.0, math.nan)

    def observe(self, t_s: float, value: float | None, in_service: float | None = None) -> ScaleDecision | None:
        """The datapoint of the period [t_s, t_s + period) (None: no data), measured with `in_service`
        instances (default: the desired count); the decision taken at the period's end, if any."""
        self._periods.append(MetricPeriod(t_s, value))
        keep = max(self.spec.scale_out_periods, self.spec.scale_in_periods) + 2
        if len(self._periods) > 4 * keep:
            del self._periods[: len(self._periods) - keep]
        now = t_s + self.spec.period_s
        if now < self._busy_until - 1e-9 or value is None:
            return None
        policy = self.policy
        high = self._streak(now, lambda v: v > policy.target_value, self.spec.scale_out_periods)
        if high is not None:
            cooling = now < self._out_cooldown_until - 1e-9
            capacity = (in_service if in_service is not None else self.desired) if cooling else self.desired
            count = policy.count_for(capacity, value)
            if count > self.desired:
                return self._decide(now, OUT, self.desired, count, high, value)
            return None
        low = self._streak(now, lambda v: v < policy.scale_in_threshold, self.spec.scale_in_periods)
        if low is not None and now >= self._in_cooldown_until - 1e-9:
            count = policy.count_for(self.desired, value)
            if count < self.desired:
                return self._decide(now, IN, self.desired, count, low, value)
        return None

    def _streak(self, now: float, breaching: Callable[[float], bool], needed: int) -> float | None:
        """Start of the breaching run ending at `now` when it holds `needed` datapoints, else None."""
        period = self.spec.period_s
        start = breach_start(self._periods, now, breaching, period)
        if start is None or now - start < needed * period - 1e-6:
            return None
        return max(start, self._last_decision_s) if self._last_decision_s > start else start

    def _decide(self, now: float, direction: str, before: int, after: int, alarm_start: float,
                value: float) -> ScaleDecision:
        if direction == OUT:
            ready = now + self.activity_s
            self._busy_until = ready
            self._out_cooldown_until = ready + self.policy.scale_out_cooldown_s
            self._in_cooldown_until = -math.inf  # a scale-out ends a running scale-in cooldown
        else:
            ready = now
            self._in_cooldown_until = now + self.policy.scale_in_cooldown_s
        decision = ScaleDecision(now, direction, before, after, alarm_start, value, ready)
        self.desired = after
        self._last_decision_s = now
        self.decisions.append(decision)
        return decision
