"""`summary.json`: the public, versioned result of a run (documented in docs/summary.md).

Schema 1 keys are a contract: later versions add keys, never rename or remove these.
`build_summary` is pure (fed plain data); `write_json` writes atomically so a reader never sees a
half-written file; `iso` is the run folder's one time format (summary.json, the report's CSVs).

Per-step entries come from the per-second timeline, and there is ONE implementation of per-step
figures: `sm_locust.plateau.steady` (`measure_timeline`: `split_steps` + `measure_step`), the same
code the plateau searches judge steps with, so a step's rps and p95 here are exactly the figures
the verdict was based on. This module only turns each `StepMeasurement` into its summary.json
record (schema 1 keys plus the added ones). A step is a maximal run of seconds with one user count
(or, in open loop, one target rate), not counting ramping seconds; its figures cover its steady
window (the step minus its warm-up) and only its own requests, since Locust's cumulative and
10-second percentiles blur neighbouring steps (docs/facts.md, Locust).

Requests are logical invocations (`sm_locust.invocation.is_invocation`: a stream's TTFT and
InterChunk entries and fan-out parts are not requests), error rates are per invocation, and
beside every attempt rate (`rps`) stands the goodput (`goodput_rps`: successful invocations per
second), totals and per step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sm_locust.plateau.steady import MODE_RATE, StepMeasurement, intervals_dict, measure_timeline, timeline_mode
from sm_locust.plateau.timeline import Second
from sm_locust.util.formatting import with_interval
from sm_locust.util.outputs import atomic_file

SCHEMA_VERSION = 1

# The recorder's seconds are exact per second on a local runner and on a master (see recorder.py),
# so stability sub-windows of 1 s can be judged, as the shapes judge them.
RECORDER_SUBWINDOW_S = 1.0


def iso(epoch: float, timespec: str = "milliseconds") -> str:
    """Epoch seconds -> ISO-8601 UTC with a Z suffix: `2026-11-21T14:34:23.629Z`.

    summary.json keeps milliseconds; the report's CSVs and pages pass `timespec="seconds"`
    (`2026-11-21T14:34:23Z`). Both truncate, never round.
    """
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def step_record(step: StepMeasurement) -> dict:
    """summary.json's entry for one measured step."""
    record = {
        "users": step.users,
        "start": iso(step.t_start),
        "end": iso(step.t_end),
        "duration_s": round(step.t_end - step.t_start, 3),
        "requests": step.requests,
        "failures": step.failures,
        "rps": round(step.rps, 3),
        "successes": step.successes,
        "goodput_rps": round(step.request_goodput_rps, 3),  # requests, whatever the search judged
        "p50_ms": step.p50_ms,
        "p95_ms": step.p95_ms,
        "p99_ms": step.p99_ms,
        "p90_ms": step.percentile(90.0),
        "p99_9_ms": step.percentile(99.9),
        "steady_s": round(step.duration_s, 3),
        "total_requests": step.total_requests,
        "error_rate": round(step.error_rate, 6),
        "stable": step.stable,
        "unstable_reason": step.unstable_reason,
        "client_cpu_pct": _round(step.client_cpu_pct, 1),
        "client_wait_pct": _round(step.client_wait_pct, 1),
        "client_bound": step.client_bound,
        "client_bound_reason": step.client_bound_reason,
        "ci95": intervals_dict(step.ci95),
        "undecided": list(step.undecided),  # what the step budget left undecided (docs/plateau.md)
    }
    if step.mode == MODE_RATE:
        record.update({
            "target_rate": step.intended_rps,
            "sent_rps": _round(step.sent_rps),
            "late_fraction": _round(step.late_fraction, 6),
            "dropped_fraction": _round(step.dropped_fraction, 6),
        })
    return record


def step_load(record: Mapping) -> str:
    """A step record's load: '12 users', '1 user' or '40 req/s offered'."""
    if record.get("target_rate") is not None:
        return f"{record['target_rate']:g} req/s offered"
    users = int(record.get("users") or 0)
    return f"{users} user{'s' if users != 1 else ''}"


def step_line(index: int, record: Mapping) -> str:
    """One step's figures on one line, from its summary.json record: the line printed when the step
    is judged (`sm-locust: step 5: ...`), so what the terminal says IS what summary.json holds.

    `step 5: 12 users: 166.6 req/s (±2.1), p95 97 ms [90, 110], client CPU 40 %`"""
    ci = record.get("ci95") or {}
    text = f"step {index}: {step_load(record)}: {with_interval(record.get('rps'), ci.get('rps'), ' req/s', 1)}"
    goodput, rps = record.get("goodput_rps"), record.get("rps")
    if goodput is not None and rps is not None and abs(goodput - rps) >= 0.05:
        text += f", goodput {with_interval(goodput, ci.get('goodput_rps'), ' req/s', 1)}"
    text += f", p95 {with_interval(record.get('p95_ms'), ci.get('p95_ms'), ' ms')}"
    if record.get("error_rate"):
        text += f", errors {record['error_rate'] * 100:.1f} %"
    if record.get("client_cpu_pct") is not None:
        text += f", client CPU {record['client_cpu_pct']:.0f} %"
    if record.get("client_wait_pct"):
        text += f", waited for a CPU {record['client_wait_pct']:.0f} %"
    if record.get("late_fraction"):
        text += f", late sends {record['late_fraction'] * 100:.1f} %"
    if record.get("dropped_fraction"):
        text += f", dropped {record['dropped_fraction'] * 100:.1f} %"
    if record.get("stable") is False:
        text += " (unstable)"
    if record.get("client_bound"):
        text += f" CLIENT-BOUND: {record.get('client_bound_reason')}"
    if record.get("undecided"):  # what the step budget left undecided (docs/plateau.md, "Deciding on intervals")
        text += f"; undecided at the step budget: {'; '.join(str(r) for r in record['undecided'])}"
    return text


def step_records(seconds: Sequence[Second]) -> list[dict]:
    """Every step of a timeline as summary.json records, in time order."""
    steps = measure_timeline(seconds, timeline_mode(seconds), min_subwindow_s=RECORDER_SUBWINDOW_S)
    return [step_record(step) for step in steps]


def build_summary(
    *,
    endpoint: str,
    started_at: float,
    ended_at: float,
    totals: Mapping,
    errors: Mapping[str, int],
    seconds: Sequence[Second],
    plateau: Mapping | None = None,
    extra: Mapping | None = None,
    open_loop: Mapping | None = None,
    by_name: Mapping[str, Mapping] | None = None,
    latency_series: Mapping[str, Mapping] | None = None,
    backoff: Mapping | None = None,
    steps: Sequence[Mapping] | None = None,
    hours: Sequence[Mapping] | None = None,
    complete: bool | None = None,
) -> dict:
    """Assemble summary.json from totals (invocations: requests, failures, p50_ms, p95_ms, p99_ms),
    the timeline, and the exact per-name figures and latency series when given.

    `steps`: the step records when already measured (the recorder's `record.accumulate.RunTimeline`
    keeps only those, not every second); otherwise they are measured from `seconds`. `hours`: one
    record per hour of the run. `complete`: False in the checkpoints written while the test runs,
    True in the final write (docs/summary.md)."""
    duration = max(1e-9, ended_at - started_at)
    requests = int(totals.get("requests", 0))
    failures = int(totals.get("failures", 0))
    summary: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "endpoint": endpoint,
        "started_at": iso(started_at),
        "ended_at": iso(ended_at),
        "duration_s": round(duration, 3),
        "totals": {
            "requests": requests,
            "failures": failures,
            "rps": round(requests / duration, 3),
            "p50_ms": totals.get("p50_ms"),
            "p95_ms": totals.get("p95_ms"),
            "p99_ms": totals.get("p99_ms"),
            "errors": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
            "successes": requests - failures,
            "goodput_rps": round((requests - failures) / duration, 3),
            "error_rate": round(failures / requests, 6) if requests else 0.0,
            "in_flight_at_stop": int(totals.get("in_flight_at_stop") or 0),
            "ci95": dict(totals["ci95"]) if isinstance(totals.get("ci95"), Mapping) else None,
        },
        "steps": [dict(step) for step in steps] if steps is not None else step_records(seconds),
        "plateau": dict(plateau) if plateau else None,
    }
    summary["verdict"] = run_verdict(summary["plateau"], summary["steps"])
    if complete is not None:
        summary["complete"] = bool(complete)
    if hours is not None:
        summary["hours"] = [dict(hour) for hour in hours]
    if open_loop:
        summary["totals"]["open_loop"] = dict(open_loop)
    if backoff is not None:
        summary["totals"]["backoff"] = dict(backoff)
    if by_name is not None:
        summary["by_name"] = {name: dict(record) for name, record in by_name.items()}
    if latency_series is not None:
        summary["latency_series"] = {kind: dict(record) for kind, record in latency_series.items()}
    if extra:
        for key, value in extra.items():
            summary.setdefault(key, value)
    return summary


VERDICT_OK = "ok"
VERDICT_INCONCLUSIVE = "inconclusive"


def run_verdict(plateau: Mapping | None, steps: Sequence[Mapping]) -> dict:
    """summary.json's `verdict`: {"status": "ok" | "inconclusive", "reason": text | None}.

    Inconclusive when a step that decides the answer was measured while the load generator, not
    the endpoint, was the bottleneck (`client_bound`: client CPU, waiting for a CPU, late sends):
    with a plateau search, the search stopped on such a step or its capacity / knee step was one
    (`plateau.inconclusive`); without one (a constant load, rate phases), any step. It judges the
    measurement, never the endpoint: an inconclusive run is neither a pass nor a fail."""
    if isinstance(plateau, Mapping):
        if plateau.get("inconclusive") or (plateau.get("client_bound") and "inconclusive" not in plateau):
            reason = plateau.get("inconclusive_reason") or plateau.get("client_reason")
            return {"status": VERDICT_INCONCLUSIVE, "reason": reason}
        return {"status": VERDICT_OK, "reason": None}
    bound = [(i, s) for i, s in enumerate(steps) if s.get("client_bound")]
    if not bound:
        return {"status": VERDICT_OK, "reason": None}
    index, step = bound[0]
    load = (f"{step['target_rate']:g} req/s offered" if step.get("target_rate") is not None
            else f"{step.get('users')} users")
    more = f" (and {len(bound) - 1} more step{'s' if len(bound) > 2 else ''})" if len(bound) > 1 else ""
    return {"status": VERDICT_INCONCLUSIVE,
            "reason": f"step {index + 1} ({load}) was client-bound{more}: {step.get('client_bound_reason')}"}


def write_json(path: str | Path, data) -> Path:
    """Write JSON atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as fh:
        json.dump(data, fh, indent=2, default=str)
        fh.write("\n")
    return path
