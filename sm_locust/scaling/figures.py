"""The figures of an autoscaling test, from its timelines: what summary.json `autoscaling` and each row
of an autoscaling sweep hold (docs/summary.md, docs/autoscaling.md).

One pure function for the local emulation and SageMaker, so a configuration is judged by the same
arithmetic wherever it ran; all times are run seconds (`timeline.RunClock`). It gives the
`scale_events` (reaction and ready times from the first breaching period; None without a policy),
the instances and `instance_hours` (the larger of desired and in service: a starting instance is
billed), cost, `slo_breach_s`, failed and throttled requests, `flaps` (within `FLAP_WINDOW_S`), and
their 95 % intervals (`intervals.py`). `metric_periods` rebuilds the metric's datapoints from the
client's sends when CloudWatch's are not at hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE, histogram_percentile
from sm_locust.measure.timeline import Second
from sm_locust.record.model import Autoscaling, JsonObject, ScaleEvent
from sm_locust.record.model import InstanceSample as RecordedSample
from sm_locust.scaling.intervals import breach_client_bound_s, breach_interval, with_event_intervals
from sm_locust.scaling.policy import CONCURRENCY, IN, OUT, ScalingPolicy
from sm_locust.scaling.timeline import InstanceSample, MetricPeriod, RunClock, compact, counts_at

FLAP_WINDOW_S = 600.0  # a scale-in followed by a scale-out within 10 minutes is a flap
THROTTLE = "ThrottlingException"


def _in_service_at(instances: Sequence[InstanceSample], t_s: float) -> int:
    sample = counts_at(instances, t_s)
    return max(1, (sample or instances[0]).in_service) if instances else 1


def _mean_latency_s(second: Second) -> float:
    total = sum(second.hist.values())
    return sum(bucket * count for bucket, count in second.hist.items()) / total / 1000.0 if total else 0.0


def period_origin(clock: RunClock, period_s: float, grid_epoch: float | None = None) -> float:
    """The run second in [0, period) where the metric's periods start: CloudWatch's one-minute periods
    start on the wall clock's minutes (`grid_epoch` 0, the default when the clock is not compressed),
    the local emulation's at its own start (`grid_epoch` = its emulated second 0); with a compressed
    clock and no grid given, at the run's start."""
    if grid_epoch is None:
        if clock.time_scale != 1.0:
            return 0.0
        grid_epoch = 0.0
    return clock.run_s(grid_epoch) % period_s


def metric_periods(seconds: Sequence[Second], instances: Sequence[InstanceSample], policy: ScalingPolicy,
                   clock: RunClock, end_s: float | None = None, grid_epoch: float | None = None) -> list[MetricPeriod]:
    """The policy's metric per period from the client's per-second samples: requests sent (open loop;
    completed ones in closed loop) / instances in service, per minute; or, for the concurrency metric,
    requests in flight (Little's law: completions x mean latency) per instance. Periods lie on the
    metric's own grid (`period_origin`); the first one may start before run second 0. A period the
    client sent nothing in has no data."""
    spec = policy.spec
    period = spec.period_s
    origin = period_origin(clock, period, grid_epoch)
    sums: dict[int, float] = {}
    real_period = clock.real_s(period)
    for second in seconds:
        start, end = clock.run_s(second.t - second.interval), clock.run_s(second.t)
        if start < -1e-9 or (end_s is not None and start >= end_s) or end <= start:
            continue
        serving = _in_service_at(instances, start)
        if spec.name == CONCURRENCY:
            amount = second.requests * _mean_latency_s(second) / serving
        else:
            amount = (second.sent if second.sent is not None else second.requests) / serving
        # a second that straddles a period boundary (a compressed clock makes a second a whole period)
        # gives each period its share, as if its requests were spread evenly over it
        index = int(math.floor((start - origin) / period + 1e-9))
        while origin + index * period < end - 1e-9:
            lo, hi = max(start, origin + index * period), min(end, origin + (index + 1) * period)
            if hi > lo:
                sums[index] = sums.get(index, 0.0) + amount * (hi - lo) / (end - start)
            index += 1
    out = []
    for index in range(min(sums), max(sums) + 1) if sums else ():
        total = sums.get(index)
        t_s = origin + index * period
        if not total:
            out.append(MetricPeriod(t_s, None))
        elif spec.name == CONCURRENCY:
            out.append(MetricPeriod(t_s, total / real_period))
        else:
            out.append(MetricPeriod(t_s, total * 60.0 / real_period))
    return out


def alarm_start(periods: Sequence[MetricPeriod], t_s: float, breaching: Callable[[float], bool], period_s: float,
                after_s: float = -math.inf) -> float | None:
    """Start of the run of breaching periods that led to a change at run second `t_s`: the latest run
    ending at or before `t_s` (a real alarm fires after its last period ends, sometimes minutes after),
    counting no period before `after_s` (the previous change). None when no period breached."""
    ordered = sorted((p for p in periods if p.t_s + period_s <= t_s + 1e-6 and p.t_s >= after_s - 1e-6),
                     key=lambda p: p.t_s, reverse=True)
    first = None
    for p in ordered:
        hit = p.value is not None and breaching(p.value)
        if first is None:
            if hit:
                first = p.t_s
            continue
        if not hit or abs(p.t_s + period_s - first) > 1e-6:
            break
        first = p.t_s
    return first


def scale_events(instances: Sequence[InstanceSample], *, policy: ScalingPolicy | None = None,
                 periods: Sequence[MetricPeriod] = ()) -> list[dict]:
    """One event per change of the desired count (see the module docstring)."""
    steps = compact(instances)
    events = []
    previous_t = -math.inf
    for before, sample in zip(steps, steps[1:], strict=False):
        if sample.desired == before.desired:
            continue
        direction = OUT if sample.desired > before.desired else IN
        ready_at = next((s.t_s for s in steps if s.t_s >= sample.t_s and (
            s.in_service >= sample.desired if direction == OUT else s.in_service <= sample.desired)), None)
        start = None
        if policy is not None:
            spec = policy.spec
            if direction == OUT:
                breaching = lambda v: v > policy.target_value  # noqa: E731
            else:
                breaching = lambda v: v < policy.scale_in_threshold  # noqa: E731
            start = alarm_start(periods, sample.t_s, breaching, spec.period_s, previous_t)
        events.append({
            "t_s": sample.t_s, "direction": direction, "from": before.desired, "to": sample.desired,
            "reaction_s": None if start is None else sample.t_s - start,
            "ready_s": None if start is None or ready_at is None else ready_at - start,
            "ready_at_s": ready_at,
        })
        previous_t = sample.t_s
    return events


def count_flaps(events: Sequence[ScaleEvent | JsonObject], window_s: float = FLAP_WINDOW_S) -> int:
    """Scale-ins followed by a scale-out within `window_s`."""
    read = [ScaleEvent.of(event) for event in events]
    flaps = 0
    for i, event in enumerate(read):
        if event.direction != IN or event.t_s is None:
            continue
        if any(later.direction == OUT and later.t_s is not None and later.t_s - event.t_s <= window_s
               for later in read[i + 1:]):
            flaps += 1
    return flaps


def instance_hours(instances: Sequence[InstanceSample], end_s: float) -> float:
    """Instance-hours provisioned over [0, end_s]: the larger of desired and in service, as a step function."""
    steps = compact(instances)
    if not steps:  # no reading at all (the endpoint stopped answering DescribeEndpoint): nothing provisioned seen
        return 0.0
    total = 0.0
    for sample, following in zip(steps, [*steps[1:], None], strict=True):
        stop = end_s if following is None else min(following.t_s, end_s)
        if stop > sample.t_s:
            total += max(sample.desired, sample.in_service) * (stop - sample.t_s)
    return total / 3600.0


def breach_windows(seconds: Sequence[Second], clock: RunClock, slo_ms: float, percentile: float) -> list[list[float]]:
    """[start, end] run-second windows whose per-second percentile was above the SLO (adjacent seconds merged)."""
    windows: list[list[float]] = []
    for second in seconds:
        value = histogram_percentile(second.hist, percentile)
        if value is None or value <= slo_ms:
            continue
        start, end = clock.run_s(second.t - second.interval), clock.run_s(second.t)
        if windows and start - windows[-1][1] <= 1e-6 * max(1.0, clock.time_scale):
            windows[-1][1] = end
        else:
            windows.append([start, end])
    return windows


def autoscaling_figures(instances: Sequence[InstanceSample], seconds: Sequence[Second], *, started_at: float,
                        policy: ScalingPolicy | None = None, periods: Sequence[MetricPeriod] | None = None,
                        slo_ms: float | None = None, percentile: float = DEFAULT_SLO_PERCENTILE,
                        price_per_hour: float | None = None,
                        failures: Mapping[str, int] | None = None, time_scale: float = 1.0,
                        end_s: float | None = None, source: str = "DescribeEndpoint",
                        grid_epoch: float | None = None) -> dict:
    """The summary.json `autoscaling` block (docs/summary.md) from the run's timelines; `grid_epoch`
    places the metric's periods (`period_origin`) when they are rebuilt from the client's sends."""
    clock = RunClock(started_at, time_scale)
    if end_s is None:
        end_s = clock.run_s(seconds[-1].t) if seconds else (instances[-1].t_s if instances else 0.0)
    steps = compact(instances)
    if periods is None:
        periods = (metric_periods(seconds, steps, policy, clock, end_s, grid_epoch)
                   if policy is not None and steps else [])
    events = with_event_intervals(scale_events(steps, policy=policy, periods=periods), instances)
    hours = instance_hours(steps, end_s)
    windows = breach_windows(seconds, clock, slo_ms, percentile) if slo_ms is not None else []
    breach_s = sum(end - start for start, end in windows) if slo_ms is not None else None
    breach_ci95 = breach_interval(seconds, clock, slo_ms, percentile) if slo_ms is not None else None
    if breach_ci95 is not None and breach_s is not None:  # holding the figure itself (a bootstrap can miss it)
        breach_ci95 = [round(min(breach_ci95[0], breach_s), 3), round(max(breach_ci95[1], breach_s), 3)]
    first_out = next((e for e in map(ScaleEvent.of, events) if e.direction == OUT), None)
    first_interval = None if first_out is None else first_out.reaction_s_ci95
    failures = dict(failures or {})
    throttled = int(failures.pop(THROTTLE, 0))
    return {
        "source": source,
        "time_scale": time_scale,
        "duration_s": end_s,
        "policy": policy.as_dict() if policy is not None else None,
        "scale_events": events,
        "instances": [s.as_dict() for s in steps],
        "periods": [p.as_dict() for p in periods],
        "peak_instances": max((max(s.desired, s.in_service) for s in steps), default=None),
        "instance_hours": hours,
        "cost_usd": hours * price_per_hour if price_per_hour is not None else None,
        "slo": None if slo_ms is None else {"slo_ms": slo_ms, "percentile": percentile},
        "slo_breach_s": breach_s,
        "breach_s_ci95": breach_ci95,
        "breach_client_bound_s": (breach_client_bound_s(seconds, clock, slo_ms, percentile)
                                  if slo_ms is not None else None),
        "reaction_s_ci95": None if first_interval is None else list(first_interval),
        "breaches": windows,
        "failed": int(sum(failures.values())),
        "throttled": throttled,
        "flaps": count_flaps(events),
    }


def describe_event(scale_event: ScaleEvent | JsonObject) -> str:
    """One progress line for a scale event."""
    event = ScaleEvent.of(scale_event)
    text = f"scale {event.direction} {event.from_} -> {event.to} at {event.t_s:.0f} s"
    if event.reaction_s is not None:
        text += f", {event.reaction_s:.0f} s after the metric crossed"
        bound = event.reaction_s_ci95
        if bound:
            text += f" ({bound[0]:.0f}..{bound[1]:.0f} s: the poll's resolution)"
    if event.ready_s is not None:
        text += f", serving {event.ready_s:.0f} s after"
    elif event.ready_at_s is not None:
        text += f", serving at {event.ready_at_s:.0f} s"
    return text


def describe_change(desired_before: int | None, in_service_before: int | None, desired: int | None,
                    in_service: int | None) -> str | None:
    """One live progress line for a change between two DescribeEndpoint readings, None when neither
    count moved. Said as it is seen, without times: the reaction and ready times need the whole run
    and come with `describe_event` at its end."""
    if (desired_before, in_service_before) == (desired, in_service) or desired is None or in_service is None:
        return None
    if desired != desired_before and desired_before is not None:
        direction = "out" if desired > desired_before else "in"
        if in_service == desired:  # read after it finished (a slow poll, or a stand-in that scales at once)
            return f"scale {direction} done: {desired_before} -> {desired} instances in service"
        return f"scale {direction} under way: desired {desired_before} -> {desired}, {in_service} in service"
    plural = "s" if in_service != 1 else ""
    if in_service == desired:
        return f"scale done: {in_service} instance{plural} in service"
    return f"scale under way: {in_service} of {desired} instances in service"


def breach_cause(autoscaling: Autoscaling | JsonObject) -> str | None:
    """Why a configuration breached its SLO, in one clause for the sweep's why-not sentence:
    "310 s over the SLO while 2 instances started"; None when it did not breach."""
    figures = Autoscaling.of(autoscaling)
    breach = figures.slo_breach_s
    if not breach:
        return None
    starting = []
    for window in figures.breaches or []:
        for sample in figures.instances:
            if _covers(figures, window, sample):
                gap = (sample.desired or 0) - (sample.in_service or 0)
                if gap > 0:
                    starting.append(gap)
    text = f"{breach:.0f} s over the SLO"
    if starting:
        count = max(starting)
        text += f" while {count} instance{'s' if count != 1 else ''} started"
    return text


def _covers(figures: Autoscaling, window: Sequence[float], sample: RecordedSample) -> bool:
    """The instance step `sample` is in force during part of `window`."""
    at = sample.t_s if sample.t_s is not None else math.inf
    later = [s.t_s for s in figures.instances if s.t_s is not None and s.t_s > at]
    until = min(later) if later else math.inf
    return at < window[1] and until > window[0]

