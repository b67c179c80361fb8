"""What a target-tracking policy does to a traffic pattern, on paper: the model's answer.

Why: the issue's acceptance is "measured reaction and ready times within one period of the model's",
and a user sweeping policies wants to read, before any endpoint runs, when each configuration should
scale. `simulate` feeds the pure control loop (`policy.TargetTracking`) the datapoints the traffic
would produce, period after period, and returns its decisions, the instance timeline they give and the
datapoints themselves. Nothing here runs requests.

The datapoints follow AWS's definitions (docs/facts.md):
- InvocationsPerInstance counts each request *sent* as 1 / (instances in service when it arrived), so
  a period's value is the integral of rate / in-service over the period (per minute); a saturated fleet
  still shows the offered load.
- ConcurrentRequestsPerModel (high resolution) counts requests in the container, queued ones
  included. With `service_s` and `slots` per instance the fleet is a fluid queue: under capacity the
  concurrency is rate x service time (Little's law), above it every slot is busy and the backlog grows
  by the excess; the value is the period's mean per instance.

`instance_timeline` turns decisions into the `InstanceSample` steps (desired at the decision, in
service when the new instances are ready, at once for a scale-in); the emulation uses it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sm_locust.plateau.rates import Traffic
from sm_locust.scaling.policy import CONCURRENCY, IN, ScaleDecision, ScalingPolicy, TargetTracking
from sm_locust.scaling.timeline import InstanceSample, MetricPeriod

STEP_S = 1.0  # integration step (run seconds)


def instance_timeline(initial: int, decisions: Sequence[ScaleDecision]) -> list[InstanceSample]:
    """The desired / in-service steps the decisions make, from run second 0."""
    changes: list[tuple[float, int, str, int]] = []  # (t, order, which, count)
    for order, d in enumerate(decisions):
        changes.append((d.t_s, 2 * order, "desired", d.to_count))
        changes.append((d.t_s if d.direction == IN else d.ready_s, 2 * order + 1, "in_service", d.to_count))
    desired = in_service = initial
    samples = [InstanceSample(0.0, desired, in_service)]
    for t, _, which, count in sorted(changes):
        if which == "desired":
            desired = count
        else:
            in_service = count
        if samples[-1].t_s == t:
            samples[-1] = InstanceSample(t, desired, in_service)
        else:
            samples.append(InstanceSample(t, desired, in_service))
    return samples


@dataclass(frozen=True)
class Simulation:
    policy: ScalingPolicy
    decisions: list[ScaleDecision]
    instances: list[InstanceSample]
    periods: list[MetricPeriod]


def simulate(policy: ScalingPolicy, traffic: Traffic, *, initial: int | None = None, instance_start_s: float = 0.0,
             service_s: float | None = None, slots: int | None = None) -> Simulation:
    """Run the policy's control loop over the traffic (run seconds); `service_s` and `slots` (per
    instance) are needed for the concurrency metric only."""
    spec = policy.spec
    concurrency = spec.name == CONCURRENCY
    if concurrency and (not service_s or not slots):
        raise ValueError("the concurrency metric needs the service time and the slots per instance")
    service, per_instance = float(service_s or 0.0), int(slots or 0)
    loop = TargetTracking(policy, policy.min_instances if initial is None else initial, instance_start_s)
    end = traffic.duration_s
    periods: list[MetricPeriod] = []
    backlog = 0.0  # requests queued beyond the busy slots (fluid model, concurrency metric)
    t = 0.0
    while t < end - 1e-9:
        period_end = t + spec.period_s
        total = 0.0  # integral of the metric's per-instance value over the period's steps
        instance_seconds = 0.0
        sent = False
        step_t = t
        while step_t < period_end - 1e-9:
            step = min(STEP_S, period_end - step_t)
            rate = traffic.rate_at(step_t) or 0.0
            serving = _in_service(loop, step_t)
            instance_seconds += serving * step
            sent = sent or rate > 0 or backlog > 0
            if concurrency:
                capacity = serving * per_instance / service
                backlog = max(0.0, backlog + (rate - capacity) * step)
                busy = min(rate * service, serving * per_instance) if backlog == 0 else serving * per_instance
                total += (busy + backlog) / max(1, serving) * step
            else:
                total += rate * step / max(1, serving)
            step_t += step
        if not sent:
            value = None
        elif concurrency:
            value = total / spec.period_s
        else:
            value = total * 60.0 / spec.period_s
        periods.append(MetricPeriod(t, value))
        loop.observe(t, value, instance_seconds / spec.period_s)
        t = period_end
    return Simulation(policy, list(loop.decisions), instance_timeline(loop.initial, loop.decisions), periods)


def _in_service(loop: TargetTracking, t_s: float) -> int:
    """Instances serving at run second t_s, from the decisions taken so far."""
    count = loop.initial
    for d in loop.decisions:
        if (d.t_s if d.direction == IN else d.ready_s) <= t_s + 1e-9:
            count = d.to_count
    return count
