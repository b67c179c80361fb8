"""A configuration's run folder -> the figures a sweep compares (pure: fed the parsed files).

The source is the run's `summary.json` (docs/summary.md), the public contract of a run folder, so
the sweep reads what every other command reads:

- **one step's figures**: the configuration is quoted at ONE step, never the rate of one step with
  the users or percentile of another (issue 28: a batching sweep's line joined the capacity of one
  step with the users and p95 of the next). With a plateau search that step is the capacity step
  (`plateau.capacity_step`: the best stable goodput, `capacity_rps`, with its interval
  `capacity_ci95`); its users (`capacity_users`), p50/p90/p95/p99/p99.9, error rate and start/end
  (the window for endpoint CPU and memory) are that step's own, and the objective's percentile and
  its interval (`latency_ms`, `latency_ci95`) too. The **knee** (the least load within 5 % of
  capacity) is kept beside it as its own step's `knee_users` and `knee_rps`. In a summary.json from
  before `capacity_step` the step is the one whose goodput is the capacity, else the knee step (with
  its own goodput: a lower figure than the capacity, but one step's);
- with constant users or an open-loop rate (no search) the step is the best one within the error
  budget (its goodput), labelled as measured at that load;
- the **curve** is one point per load held (the last measurement of a load re-run as unstable),
  for the throughput-vs-latency chart.

Endpoint CPU and memory come from the local deployer's samples (`endpoint_usage.csv`) or from the
report's `steps.csv` CloudWatch columns, whichever the run folder has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sm_locust.plateau.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.sweep.objective import PERCENTILE_KEYS


@dataclass
class Measurement:
    capacity_rps: float | None = None  # the step's goodput (successful req/s)
    capacity_ci95: list[float] | None = None  # its 95 % interval
    capacity_users: float | None = None  # the same step's users (open loop: its offered req/s)
    capacity_step: int | None = None  # which step (1-based, as the run's lines number them)
    knee_rps: float | None = None  # the knee step's own throughput (capacity can be a few % higher)
    knee_users: float | None = None  # the knee step's own users
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    latency_ms: float | None = None  # at the objective's percentile, at the same step
    latency_ci95: list[float] | None = None
    error_rate: float | None = None
    basis: str = ""  # 'plateau' (searched), 'best step' (constant load), 'totals'
    text: str = ""  # the run's own verdict line, or what the figure is
    no_capacity_reason: str | None = None
    step_start: float | None = None  # epoch seconds of the step
    step_end: float | None = None
    curve: list[dict[str, Any]] = field(default_factory=list)
    requests: int | None = None
    failures: int | None = None


def epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def _load_of(step: Mapping[str, Any]) -> float:
    rate = step.get("target_rate")
    return float(rate) if rate is not None else float(step.get("users") or 0)


def curve(steps: Sequence[Mapping[str, Any]], percentile: float) -> list[dict[str, Any]]:
    """One point per load held, lowest load first; a load measured twice keeps its last measurement."""
    key = PERCENTILE_KEYS[percentile]
    by_load: dict[float, Mapping[str, Any]] = {}
    for step in steps:
        by_load[_load_of(step)] = step
    points = []
    for load in sorted(by_load):
        s = by_load[load]
        points.append({"users": s.get("users"), "load": load, "rps": s.get("rps"), "latency_ms": s.get(key),
                       "p50_ms": s.get("p50_ms"), "p95_ms": s.get("p95_ms"), "p99_ms": s.get("p99_ms"),
                       "error_rate": s.get("error_rate")})
    return points


def _step_at(steps: Sequence[Mapping[str, Any]], users: Any, rps: float) -> int | None:
    """The index of the step at `users` whose rps is closest to `rps` (older summaries name no step)."""
    same = [i for i, s in enumerate(steps) if s.get("users") == users]
    if not same:
        return None
    return min(same, key=lambda i: abs((steps[i].get("rps") or 0.0) - rps))


def capacity_step(steps: Sequence[Mapping[str, Any]], plateau: Mapping[str, Any]) -> tuple[int | None, bool]:
    """(index of the step the plateau's capacity is, whether it IS the capacity): `capacity_step`,
    else (an older summary) the step whose goodput is the capacity; else (False) the knee step,
    whose own goodput is then quoted, never the capacity beside its users and percentile."""
    named = plateau.get("capacity_step")
    if isinstance(named, int) and not isinstance(named, bool) and 0 <= named < len(steps):
        return named, True
    capacity = plateau.get("capacity_rps")
    if capacity:
        close = [i for i, s in enumerate(steps) if abs(float(s.get("goodput_rps", s.get("rps")) or 0.0) - capacity)
                 <= 1e-3 * max(1.0, capacity)]
        if close:
            return close[0], True
    return _step_at(steps, plateau.get("users"), plateau.get("rps") or 0.0), False


def _interval(value: Any) -> list[float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def _at_step(m: Measurement, steps: Sequence[Mapping[str, Any]], index: int, key: str) -> None:
    """Every figure of `m` from step `index` (its load, percentiles, error rate, window, intervals)."""
    step = steps[index]
    ci95 = step.get("ci95") or {}
    goodput = step.get("goodput_rps", step.get("rps"))
    m.capacity_rps = float(goodput) if goodput is not None else None
    m.capacity_ci95 = _interval(ci95.get("goodput_rps"))
    m.capacity_users = step.get("target_rate") if step.get("target_rate") is not None else step.get("users")
    m.capacity_step = index + 1
    m.p50_ms, m.p95_ms, m.p99_ms = step.get("p50_ms"), step.get("p95_ms"), step.get("p99_ms")
    m.latency_ms = step.get(key)
    m.latency_ci95 = _interval(ci95.get(key))
    m.error_rate = step.get("error_rate")
    m.step_start, m.step_end = epoch(step.get("start")), epoch(step.get("end"))


def measure(summary: Mapping[str, Any], percentile: float = DEFAULT_SLO_PERCENTILE,
            max_error_rate: float = 0.01) -> Measurement:
    """The figures of one run (summary.json's content) at its sustainable point."""
    key = PERCENTILE_KEYS[percentile]
    steps = list(summary.get("steps") or [])
    totals = summary.get("totals") or {}
    m = Measurement(curve=curve(steps, percentile), requests=totals.get("requests"), failures=totals.get("failures"))
    plateau = summary.get("plateau")
    if plateau is not None:
        if not plateau.get("rps"):
            m.basis = "plateau"
            m.text = plateau.get("text") or ""
            m.no_capacity_reason = plateau.get("text") or "the search found no acceptable load"
            return m
        m.basis = "plateau" if plateau.get("reached", True) else "plateau not reached (a lower bound)"
        m.text = plateau.get("text") or ""
        m.knee_rps = float(plateau["rps"])
        m.knee_users = plateau.get("users")
        index, is_capacity = capacity_step(steps, plateau)
        if index is not None:
            _at_step(m, steps, index, key)
            if is_capacity and plateau.get("capacity_rps") is not None:  # the plateau's figure: the step's goodput
                m.capacity_rps = float(plateau["capacity_rps"])
                m.capacity_ci95 = _interval(plateau.get("capacity_ci95")) or m.capacity_ci95
        else:  # no step recorded (a summary without steps): the plateau's own figures, all of the knee
            m.capacity_rps = m.knee_rps
            m.capacity_users = m.knee_users
            m.p50_ms, m.p95_ms, m.p99_ms = plateau.get("p50_ms"), plateau.get("p95_ms"), plateau.get("p99_ms")
            m.latency_ms = plateau.get(key)
            m.error_rate = plateau.get("error_rate")
        return m
    within = [i for i, s in enumerate(steps) if s.get("rps") and (s.get("error_rate") or 0.0) <= max_error_rate]
    if within:
        best = max(within, key=lambda i: steps[i].get("goodput_rps", steps[i]["rps"]) or 0.0)
        m.basis = "best step"
        _at_step(m, steps, best, key)
        m.knee_rps, m.knee_users = m.capacity_rps, steps[best].get("users")
        step = steps[best]
        load = f"{step['target_rate']:g} req/s offered" if step.get("target_rate") is not None else \
            f"{step.get('users')} user{'s' if step.get('users') != 1 else ''}"
        m.text = f"measured at {load} (no plateau search): {m.capacity_rps:.1f} req/s"
        return m
    if steps:
        worst = max(steps, key=lambda s: s.get("error_rate") or 0.0)
        m.basis = "best step"
        m.error_rate = worst.get("error_rate")
        m.no_capacity_reason = (f"no step within the error budget (error rate "
                                f"{100 * (worst.get('error_rate') or 0):.1f} % "
                                f"> {100 * max_error_rate:g} %)")
        return m
    if totals.get("rps"):
        requests = totals.get("requests") or 0
        m.basis = "totals"
        m.capacity_rps = float(totals.get("goodput_rps") or totals["rps"])
        m.p50_ms, m.p95_ms, m.p99_ms = totals.get("p50_ms"), totals.get("p95_ms"), totals.get("p99_ms")
        m.latency_ms = totals.get(key)
        m.error_rate = (totals.get("failures") or 0) / requests if requests else None
        m.text = "whole-run totals (no steps recorded)"
        return m
    m.no_capacity_reason = "the run recorded no requests"
    return m


def usage_in_window(samples: Iterable[Mapping[str, Any]], start: float | None,
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


def usage_from_steps_csv(rows: Iterable[Mapping[str, Any]], users: Any) -> tuple[float | None, float | None]:
    """CPU % and memory % of the step's row (at `users`) in the report's steps.csv (CloudWatch averages)."""

    def number(value: Any) -> float | None:
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
    capacity = (document.get("figures") or {}).get("capacity_rps") or (document.get("figures") or {}).get(
        "goodput_rps") or {}
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
