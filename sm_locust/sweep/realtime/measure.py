"""A configuration's run folder -> the figures a sweep compares (pure: fed the parsed summary.json).

**capacity** is the plateau's `capacity_rps` with its interval and its own step's users and latency
(without a search: the best step within the error budget); the **knee** is the plateau's users and
rps, its latency the knee step's own percentiles with `latency_ci95`: the search's `knee_step`
as summary.json records it (the search, not this reader, chooses the knee: a stable step when one
reached the plateau; `knee_note` says when none did). Never the rate of one step with the users or
latency of another. A knee the search could place only within its interval in loads (`knee_undecided`:
a gain left open at the step budget beside it, at most one granule) keeps the knee step's figures, but
their intervals span every step measured in that interval (`_knee_hull`): a sweep then compares what
the knee may be, not a point inside it. **inconclusive** follows the run's verdict. The **curve** is one point per
load held. Endpoint CPU and memory come from `endpoint_usage.csv` or `steps.csv`'s CloudWatch
columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.record.model import JsonObject, Step, Summary, Totals
from sm_locust.sweep.objective import PERCENTILE_KEYS

CurvePoint = dict[str, float | None]  # one load held: users, load, rps, latency_ms, p50/p95/p99_ms, error_rate


@dataclass
class Measurement:
    capacity_rps: float | None = None
    knee_rps: float | None = None  # the knee step's own throughput (capacity can be a few % higher)
    knee_users: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    latency_ms: float | None = None  # at the objective's percentile
    error_rate: float | None = None
    basis: str = ""  # 'plateau' (searched), 'best step' (constant load), 'totals'
    text: str = ""  # the run's own verdict line, or what the figure is
    no_capacity_reason: str | None = None
    knee_start: float | None = None  # epoch seconds of the knee step
    knee_end: float | None = None
    knee_step: int | None = None  # summary.json steps[] index of the knee step (None: no such record)
    latency_ci95: list[float] | None = None  # the knee step's interval of latency_ms
    knee_rps_ci95: list[float] | None = None  # the knee step's interval of its rate
    capacity_ci95: list[float] | None = None  # the capacity step's interval of its goodput (capacity_rps)
    capacity_step: int | None = None  # summary.json steps[] index of the capacity step
    capacity_users: float | None = None  # the capacity step's own load and latency (objective percentile)
    capacity_latency_ms: float | None = None
    knee_note: str | None = None  # why the knee is quoted at another step than the search's
    inconclusive: bool = False  # summary.json verdict: the load generator, not the endpoint, decided the answer
    inconclusive_reason: str | None = None
    curve: list[CurvePoint] = field(default_factory=list)
    requests: int | None = None
    failures: int | None = None


def epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def _load_of(step: Step) -> float:
    rate = step.target_rate
    return float(rate) if rate is not None else float(step.users or 0)


def curve(steps: Sequence[Step], percentile: float) -> list[CurvePoint]:
    """One point per load held, lowest load first; a load measured twice keeps its last measurement."""
    by_load: dict[float, Step] = {}
    for step in steps:
        by_load[_load_of(step)] = step
    points: list[CurvePoint] = []
    for load in sorted(by_load):
        s = by_load[load]
        points.append({"users": s.users, "load": load, "rps": s.rps, "latency_ms": s.percentile(percentile),
                       "p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "p99_ms": s.p99_ms, "error_rate": s.error_rate})
    return points


def _knee_step(steps: Sequence[Step], users: float | None, rps: float) -> Step | None:
    same = [s for s in steps if s.users == users]
    if not same:
        return None
    return min(same, key=lambda s: abs((s.rps or 0.0) - rps))


def _listed(steps: Sequence[Step], index: int | None) -> Step | None:
    """summary.json's step at `index` (the plateau's `knee_step` / `capacity_step`), or None."""
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(steps):
        return steps[index]
    return None


def _unstable(step: Step | None) -> bool:
    """summary.json marks the step unstable (`stable: false`: its sub-windows disagree)."""
    return step is not None and step.stable is False


def _interval(figures: Step | Totals | None, key: str) -> list[float] | None:
    value = None if figures is None else figures.interval(key)
    return list(value) if value is not None else None


def _own(step: Step | None, key: str, value: float | None, plateau: float | None) -> float | None:
    """The knee step's own figure `key` when its record holds the key (a null included), else the plateau's."""
    return value if step is not None and step.has(key) else plateau


def _knee_steps(steps: Sequence[Step], loads: Sequence[float] | None) -> list[Step]:
    """The steps measured at a load within the knee's interval in loads (`plateau.knee_loads`)."""
    if not loads or len(loads) != 2:
        return []
    return [s for s in steps if loads[0] <= _load_of(s) <= loads[1]]


def _knee_hull(steps: Sequence[Step], key: str) -> list[float] | None:
    """The smallest interval holding every step's 95 % interval of `key` (None when one has none: the
    figure then ties with any other, as a figure without an interval does)."""
    intervals = [_interval(s, key) for s in steps]
    if any(i is None for i in intervals):
        return None
    return [min(i[0] for i in intervals if i), max(i[1] for i in intervals if i)]


def measure(summary: Summary | JsonObject, percentile: float = DEFAULT_SLO_PERCENTILE,
            max_error_rate: float = 0.01) -> Measurement:
    """The figures of one run (summary.json's content) at its sustainable point."""
    record = Summary.of(summary)
    key = PERCENTILE_KEYS[percentile]
    steps = list(record.steps)
    totals = record.totals
    m = Measurement(curve=curve(steps, percentile), requests=totals.requests if totals.has("requests") else None,
                    failures=totals.failures if totals.has("failures") else None)
    verdict = record.verdict
    if verdict is not None and verdict.status == "inconclusive":
        m.inconclusive, m.inconclusive_reason = True, verdict.reason
    plateau = record.plateau
    if plateau is not None:
        if not plateau.rps:
            m.basis = "plateau"
            m.text = plateau.text or ""
            m.no_capacity_reason = plateau.text or "the search found no acceptable load"
            return m
        knee_rps = plateau.rps
        step = _listed(steps, plateau.knee_step) or _knee_step(steps, plateau.users, knee_rps)
        m.knee_step = plateau.knee_step if _listed(steps, plateau.knee_step) is not None else None
        capacity = _listed(steps, plateau.capacity_step)
        if _unstable(step):
            m.knee_note = "the knee step was unstable: no stable step reached the plateau"
        m.basis = "plateau" if (plateau.reached if plateau.has("reached") else True) else \
            "plateau not reached (a lower bound)"
        m.text = plateau.text or ""
        m.capacity_rps = float(plateau.capacity_rps or knee_rps)
        m.capacity_ci95 = None if plateau.capacity_ci95 is None else list(plateau.capacity_ci95)
        if capacity is not None:
            m.capacity_step = plateau.capacity_step
            m.capacity_users = capacity.users
            m.capacity_latency_ms = capacity.percentile(percentile)
        # the knee step's own figures (the plateau's are the same)
        m.knee_rps = float((step.rps if step is not None else plateau.rps) or knee_rps)
        if step is not None:
            m.knee_users = _own(step, "users", step.users, plateau.users)
            m.p50_ms, m.p95_ms, m.p99_ms = step.p50_ms, step.p95_ms, step.p99_ms
            m.error_rate = _own(step, "error_rate", step.error_rate, plateau.error_rate)
            m.latency_ms = _own(step, key, step.percentile(percentile), plateau.percentile(percentile))
        else:
            m.knee_users, m.error_rate = plateau.users, plateau.error_rate
            m.p50_ms, m.p95_ms, m.p99_ms = plateau.p50_ms, plateau.p95_ms, plateau.p99_ms
            m.latency_ms = plateau.percentile(percentile)
        m.latency_ci95 = _interval(step, key)
        m.knee_rps_ci95 = m.capacity_ci95 if m.knee_rps == m.capacity_rps else _interval(step, "rps")
        placed = _knee_steps(steps, plateau.knee_loads) if plateau.knee_undecided else []
        if len(placed) > 1:
            m.latency_ci95 = _knee_hull(placed, key)
            m.knee_rps_ci95 = _knee_hull(placed, "rps")
            low, high = (plateau.knee_loads or [0.0, 0.0])[:2]
            unit = "req/s offered" if plateau.mode == "rate" else "users"
            span = (f"the knee lies between {low:g} and {high:g} {unit} (a throughput gain left open at the "
                    "step budget): its intervals span those steps")
            m.knee_note = f"{m.knee_note}; {span}" if m.knee_note else span
        if step is not None:
            m.knee_start, m.knee_end = epoch(step.start), epoch(step.end)
        return m
    within = [s for s in steps if s.rps and (s.error_rate or 0.0) <= max_error_rate]
    if within:
        best = max(within, key=lambda s: s.rps or 0.0)
        best_rps = best.rps or 0.0
        m.basis = "best step"
        m.capacity_rps = m.knee_rps = float(best_rps)
        m.capacity_ci95 = m.knee_rps_ci95 = _interval(best, "rps")
        m.knee_step = m.capacity_step = next(i for i, s in enumerate(steps) if s is best)
        m.knee_users = m.capacity_users = best.users
        m.p50_ms, m.p95_ms, m.p99_ms = best.p50_ms, best.p95_ms, best.p99_ms
        m.latency_ms = m.capacity_latency_ms = best.percentile(percentile)
        m.latency_ci95 = _interval(best, key)
        m.error_rate = best.error_rate
        m.knee_start, m.knee_end = epoch(best.start), epoch(best.end)
        load = f"{best.target_rate:g} req/s offered" if best.target_rate is not None else \
            f"{best.users} user{'s' if best.users != 1 else ''}"
        m.text = f"measured at {load} (no plateau search): {best_rps:.1f} req/s"
        return m
    if steps:
        worst = max(steps, key=lambda s: s.error_rate or 0.0)
        m.basis = "best step"
        m.error_rate = worst.error_rate
        m.no_capacity_reason = (f"no step within the error budget (error rate "
                                f"{100 * (worst.error_rate or 0):.1f} % "
                                f"> {100 * max_error_rate:g} %)")
        return m
    if totals.rps:
        requests = totals.requests or 0
        m.basis = "totals"
        m.capacity_rps = float(totals.rps)
        m.capacity_ci95 = _interval(totals, "rps")
        m.p50_ms, m.p95_ms, m.p99_ms = totals.p50_ms, totals.p95_ms, totals.p99_ms
        m.latency_ms = totals.percentile(percentile)
        m.error_rate = (totals.failures or 0) / requests if requests else None
        m.text = "whole-run totals (no steps recorded)"
        return m
    m.no_capacity_reason = "the run recorded no requests"
    return m


def usage_in_window(samples: Iterable[Mapping[str, str]], start: float | None,
                    end: float | None) -> tuple[float | None, float | None]:
    """Mean CPU % and memory % of the samples (t, cpu_pct, memory_pct) taken in [start, end]."""
    if start is None or end is None:
        return None, None
    cpu: list[float] = []
    memory: list[float] = []
    for s in samples:
        t = float(s["t"])
        if start <= t <= end:
            if s.get("cpu_pct") not in (None, ""):
                cpu.append(float(s["cpu_pct"]))
            if s.get("memory_pct") not in (None, ""):
                memory.append(float(s["memory_pct"]))
    return (sum(cpu) / len(cpu) if cpu else None), (sum(memory) / len(memory) if memory else None)


def usage_from_steps_csv(rows: Iterable[Mapping[str, str]], users: float | None) -> tuple[float | None, float | None]:
    """CPU % and memory % of the knee's row in the report's steps.csv (CloudWatch averages)."""

    def number(value: str | None) -> float | None:
        try:
            return float(value) if value not in (None, "") else None
        except ValueError:
            return None

    found: tuple[float | None, float | None] = (None, None)
    for row in rows:
        if users is not None and number(row.get("users")) == float(users):
            found = (number(row.get("cw_CPUUtilization_avg_pct")), number(row.get("cw_MemoryUtilization_avg_pct")))
    return found


def repeat_figures(document: Mapping[str, Any] | None, quoted: str) -> dict[str, Any] | None:
    """With `load: {repeat: N}`: how many runs, which one is quoted (the median capacity), and the
    capacity's run-to-run spread (record/repeat.py); None for a configuration run once."""
    if not document:
        return None
    figures = document.get("figures") or {}
    capacity = figures.get("capacity_rps") or figures.get("goodput_rps") or {}
    return {"runs": document.get("runs"), "quoted_run": quoted, "capacity_values": capacity.get("values"),
            "capacity_sd": capacity.get("sd"), "capacity_ci95": capacity.get("ci95"),
            "spread_ratio": capacity.get("spread_ratio"),
            "inconclusive_runs": document.get("inconclusive_runs") or []}


def widened(own: list[float] | None, between: list[float] | None) -> list[float] | None:
    """The quoted run's interval widened to cover the run-to-run one (the mean's 95 % interval over the
    runs): two configurations tie unless they differ by more than runs of one of them do."""
    if own is None or between is None:
        return own or between
    return [min(own[0], between[0]), max(own[1], between[1])]
