"""What a traffic run's report may say per instance, and the verdict a watched policy leads with.

A run driven by rate phases (`--traffic`, an autoscaling sweep's configurations) asks "did the
policy hold the SLO, and at what cost?", not "how much does one instance sustain?". Its steps are
phases: the surge's step may be a fleet of three draining a backlog at p95 7 s, and dividing its
throughput by one instance gives a sizing advice that is wrong (188.7 req/s per instance, an
autoscaling target of 5,660 per minute, for a policy that missed its SLO for 781 s).

So `per_instance_point` takes a per-instance figure only from a step that held the SLO (its
percentile's upper 95 % bound within it, errors within `MAX_ERROR_RATE`, not client-bound), divided
by the most instances in service during that step (the watched instance timeline; the report's
`--instance-count` when the run watched none). The step with the most goodput per instance is the
point: a lower bound of what one instance sustains (the load the traffic offered then, served within
the SLO). With no SLO, or no step that held it, there is none, and `reason` says why: the report
then shows no sustainable throughput, autoscaling target or instances needed.

`policy_lines` is the verdict a watched run's report leads with: seconds over the SLO, the first
scale-out's reaction, peak instances, instance-hours and their cost. Pure: data in, data out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sm_locust.record.model import (
    DEFAULT_SLO_PERCENTILE,
    Autoscaling,
    InstanceSample,
    JsonObject,
    Step,
    Summary,
    SustainablePoint,
    percentile_key,
)
from sm_locust.report.merge import MAX_ERROR_RATE
from sm_locust.report.slos import RunSlos
from sm_locust.util.formatting import is_missing, money, number


def is_rate_run(summary: Summary | JsonObject) -> bool:
    """The run's load was rate phases (`traffic`) or it watched a policy (`autoscaling`)."""
    record = Summary.of(summary)
    return record.traffic is not None or record.autoscaling is not None


def _float(value: object) -> float:
    """A figure already checked not missing, as a float."""
    assert isinstance(value, (int, float, str)), value
    return float(value)


def _seconds(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class RateSlo:
    """The SLO a rate run is judged by: from its `autoscaling` block, else its options."""

    slo_ms: float | None
    percentile: float = DEFAULT_SLO_PERCENTILE

    @property
    def text(self) -> str:
        return f"p{self.percentile:g} <= {number(self.slo_ms, 0)} ms"


def rate_slo(summary: Summary | JsonObject, slos: RunSlos) -> RateSlo:
    block = Summary.of(summary).autoscaling
    slo = block.slo if block is not None else None
    slo_ms = slo.slo_ms if slo is not None and slo.has("slo_ms") else slos.latency_slo_ms
    percentile = (slo.percentile if slo is not None else None) or slos.percentile
    return RateSlo(None if is_missing(slo_ms) else _float(slo_ms), _float(percentile))


def instances_during(timeline: Sequence[InstanceSample | JsonObject], start_s: float, end_s: float) -> int | None:
    """The most instances in service in [start_s, end_s] (run seconds), from the instance steps
    ([{t_s, in_service}], each holding until the next); None without a timeline."""
    samples = [s if isinstance(s, InstanceSample) else InstanceSample.from_json(s, check=False) for s in timeline]
    counts = []
    for i, sample in enumerate(samples):
        until = samples[i + 1].t_s if i + 1 < len(samples) else float("inf")
        if sample.t_s is not None and until is not None and sample.t_s <= end_s and until > start_s \
                and sample.in_service is not None:
            counts.append(int(sample.in_service))
    return max(counts) if counts else None


def held_slo(step: Step, slo: RateSlo) -> bool:
    """The step held the SLO: its percentile's upper 95 % bound (the figure without one) within it,
    errors within MAX_ERROR_RATE, and the load generator not the bottleneck."""
    if slo.slo_ms is None or step.client_bound or (step.error_rate or 0.0) > MAX_ERROR_RATE:
        return False
    interval = step.interval(percentile_key(slo.percentile))
    figure = interval[1] if interval is not None else step.percentile(slo.percentile)
    return not is_missing(figure) and _float(figure) <= slo.slo_ms


def per_instance_point(summary: Summary | JsonObject, slo: RateSlo,
                       default_instances: int = 1) -> tuple[SustainablePoint | None, str | None]:
    """(the report's point, None) from the SLO-holding step with the most goodput per instance, or
    (None, why there is none). The point's figures are that step's own; `instances` is the count its
    rates are divided by (cost.cost_summary's instance count)."""
    what = "no per-instance figure (sustainable throughput, autoscaling target, instances needed)"
    if slo.slo_ms is None:
        return None, (f"{what}: a traffic run gives one only from a step that held an SLO, and none was given "
                      "(--latency-slo-ms)")
    record = Summary.of(summary)
    block = record.autoscaling or Autoscaling()
    traffic_scale = record.traffic.time_scale if record.traffic is not None else None
    timeline = [i for i in block.instances if i.has("t_s")]
    started = _seconds(record.started_at)
    scale = _float(block.time_scale or traffic_scale or 1.0)
    best: tuple[float, int, Step, int] | None = None
    for number_, step in enumerate(record.steps, start=1):
        if not held_slo(step, slo) or is_missing(step.goodput_rps):
            continue
        instances = default_instances
        if timeline:
            begin, end = _seconds(step.start), _seconds(step.end)
            if begin is None or end is None or started is None:
                continue
            instances = instances_during(timeline, (begin - started) * scale, (end - started) * scale) or 0
        if instances < 1:
            continue
        per = _float(step.goodput_rps) / instances
        if best is None or per > best[0]:
            best = (per, number_, step, instances)
    if best is None:
        return None, f"{what}: no step held the {slo.text} SLO"
    per, index, step, instances = best
    point = SustainablePoint.make(users=step.users, rps=step.rps, goodput_rps=step.goodput_rps, p50_ms=step.p50_ms,
                                  p95_ms=step.p95_ms, p99_ms=step.p99_ms, step=index, stable=step.stable,
                                  instances=instances, per_instance=True,
                                  source=(f"step {index}: the most goodput per instance among the steps that held "
                                          f"the {slo.text} SLO ({number(step.goodput_rps)} req/s over {instances} "
                                          f"instance{'s' if instances != 1 else ''} in service; the load the traffic "
                                          "offered then: a lower bound of what one instance sustains)"))
    return point, None


def policy_lines(figures: Autoscaling | JsonObject, slo: RateSlo, price_per_hour: float | None = None
                 ) -> list[tuple[str, str]]:
    """The watched policy's verdict, first in the report: (label, text) rows."""
    block = figures if isinstance(figures, Autoscaling) else Autoscaling.from_json(figures, check=False)
    rows: list[tuple[str, str]] = []
    breach = block.slo_breach_s
    if slo.slo_ms is not None and not is_missing(breach):
        behind = block.breach_client_bound_s
        verdict = "PASS" if _float(breach) <= 0 else "FAIL"
        text = f"{verdict}: {number(breach, 0)} s over the SLO"
        if not is_missing(behind) and _float(behind) > 0:
            text += f" ({number(behind, 0)} s of it while the load generator was behind)"
        rows.append((f"Policy verdict ({slo.text})", text))
    else:
        rows.append(("Policy verdict", "no SLO given (--latency-slo-ms): seconds over it cannot be counted"))
    out = [e for e in block.scale_events if e.direction == "out"]
    if out:
        first = out[0]
        reaction = ("n/a (no policy read)" if is_missing(first.reaction_s)
                    else f"{number(first.reaction_s, 0)} s after the metric crossed")
        ready = "" if is_missing(first.ready_s) else f", serving {number(first.ready_s, 0)} s after"
        rows.append(("Scale-out reaction", f"{first.from_} -> {first.to}: {reaction}{ready}"))
    else:
        rows.append(("Scale-out reaction", "no scale-out during the run"))
    rows.append(("Peak instances", number(block.peak_instances, 0)))
    hours = block.instance_hours
    cost = block.cost_usd
    if is_missing(cost) and price_per_hour is not None and not is_missing(hours):
        cost = _float(hours) * price_per_hour
    priced = f" ({money(cost)})" if not is_missing(cost) else " (no price: pass --price-per-hour)"
    rows.append(("Instance-hours and cost", f"{number(hours, 3)}{priced}"))
    return rows
