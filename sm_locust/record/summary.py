"""`summary.json`: the public, versioned result of a run (documented in docs/summary.md).

Schema 1 keys are a contract: later versions add keys, never rename or remove these. The file is
defined by `record.model`'s typed records: `run_summary` builds a `model.Summary` (pure, fed plain
data), `build_summary` its JSON object; `write_json` writes atomically so a reader never sees a
half-written file; `iso` is the run folder's one time format (summary.json, the report's CSVs).

Per-step entries come from the per-second timeline, and there is ONE implementation of per-step
figures: `sm_locust.measure.steady` (`measure_timeline`: `split_steps` + `measure_step`), the same
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

from sm_locust.measure.looplag import LoopLag
from sm_locust.measure.steady import MODE_RATE, StepMeasurement, intervals_dict, measure_timeline, timeline_mode
from sm_locust.measure.timeline import Second
from sm_locust.plateau.search import BOUND_BELOW
from sm_locust.plateau.tokens import TokenStep
from sm_locust.record.model import SCHEMA_VERSION, Plateau, Step, Summary, Totals, Verdict, Workers
from sm_locust.sanitize import clean
from sm_locust.util.formatting import with_interval
from sm_locust.util.outputs import atomic_file

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


def step_summary(step: StepMeasurement) -> Step:
    """summary.json's entry for one measured step, typed."""
    record = Step.make(
        users=step.users,
        start=iso(step.t_start),
        end=iso(step.t_end),
        duration_s=round(step.t_end - step.t_start, 3),
        requests=step.requests,
        failures=step.failures,
        rps=round(step.rps, 3),
        successes=step.successes,
        goodput_rps=round(step.request_goodput_rps, 3),  # requests, whatever the search judged
        p50_ms=step.p50_ms,
        p95_ms=step.p95_ms,
        p99_ms=step.p99_ms,
        p90_ms=step.percentile(90.0),
        p99_9_ms=step.percentile(99.9),
        steady_s=round(step.duration_s, 3),
        total_requests=step.total_requests,
        error_rate=round(step.error_rate, 6),
        stable=step.stable,
        unstable_reason=step.unstable_reason,
        client_cpu_pct=_round(step.client_cpu_pct, 1),
        client_wait_pct=_round(step.client_wait_pct, 1),
        client_bound=step.client_bound,
        client_bound_reason=step.client_bound_reason,
        ci95=intervals_dict(step.ci95),
    )
    if step.client_worker is not None:  # a master: the worker whose own CPU and wait those are
        record = record.adding(client_worker=step.client_worker)
    if step.users_running is not None:  # fewer ran than were asked for: said, never relabelled
        record = record.adding(users_running=step.users_running)
    if step.loop_lag is not None:
        record = record.adding(loop_lag=step.loop_lag.to_json())
    if step.measured_again:  # a load measured once more, and why (a repeated load in steps[])
        record = record.adding(measured_again=step.measured_again)
    if step.undecided:  # what the step budget left undecided (docs/plateau.md)
        record = record.adding(undecided=list(step.undecided))
    if step.mode == MODE_RATE:
        record = record.adding(
            target_rate=step.intended_rps,
            sent_rps=_round(step.sent_rps),
            late_fraction=_round(step.late_fraction, 6),
            dropped_fraction=_round(step.dropped_fraction, 6),
        )
        if step.offered_short:  # the generator offered less than asked for: said with its interval
            record = record.adding(offered_rps=_round(step.offered_rps), offered_ci95=step.offered_ci.as_list())
    if isinstance(step, TokenStep):  # judged on tokens: its token figures are the ones the search judged
        llm = step.llm_figures()
        if llm is not None:
            record = record.adding(llm=llm)
    return record


def step_record(step: StepMeasurement) -> dict[str, object]:
    """summary.json's entry for one measured step, as its JSON object (what the recorder keeps)."""
    return step_summary(step).to_json()


def step_line(index: int, record: Step | Mapping[str, object]) -> str:
    """One step's figures on one line, from its summary.json record: the line printed when the step
    is judged (`sm-locust: step 5: ...`), so what the terminal says IS what summary.json holds.

    `step 5: 12 users: 166.6 req/s (±2.1), p95 97 ms [90, 110], client CPU 40 %`; a load measured again
    says why: `step 6: 12 users again (client-bound): ...`"""
    step = record if isinstance(record, Step) else Step.from_json(record, check=False)
    again = f" again ({step.measured_again})" if step.measured_again else ""
    text = f"step {index}: {step.load}{again}: {with_interval(step.rps, step.interval('rps'), ' req/s', 1)}"
    if step.users_running is not None and step.users is not None:
        text += f" ({step.users_running} of the {step.users:g} users asked for running)"
    goodput, rps = step.goodput_rps, step.rps
    if goodput is not None and rps is not None and abs(goodput - rps) >= 0.05:
        text += f", goodput {with_interval(goodput, step.interval('goodput_rps'), ' req/s', 1)}"
    text += f", p95 {with_interval(step.p95_ms, step.interval('p95_ms'), ' ms')}"
    if step.error_rate:
        text += f", errors {step.error_rate * 100:.1f} %"
    if step.client_cpu_pct is not None:
        text += f", client CPU {step.client_cpu_pct:.0f} %"
    if step.client_wait_pct:
        text += f", waited for a CPU {step.client_wait_pct:.0f} %"
    if step.client_worker and (step.client_cpu_pct is not None or step.client_wait_pct):
        text += f" (worker {clean(step.client_worker, 60)})"
    lag = LoopLag.from_json(step.loop_lag)
    if lag is not None and lag.text():
        text += f", {lag.text()}"
    if step.late_fraction:
        text += f", late sends {step.late_fraction * 100:.1f} %"
    if step.dropped_fraction:
        text += f", dropped {step.dropped_fraction * 100:.1f} %"
    if step.stable is False:
        text += " (unstable)"
    if step.client_bound:
        text += f" CLIENT-BOUND: {step.client_bound_reason}"
    if step.undecided:  # what the step budget left undecided (docs/plateau.md, "Deciding on intervals")
        text += f"; undecided at the step budget: {'; '.join(str(r) for r in step.undecided)}"
    return text


def step_records(seconds: Sequence[Second]) -> list[dict[str, object]]:
    """Every step of a timeline as summary.json records, in time order."""
    steps = measure_timeline(seconds, timeline_mode(seconds), min_subwindow_s=RECORDER_SUBWINDOW_S)
    return [step_record(step) for step in steps]


def run_summary(
    *,
    endpoint: str,
    started_at: float,
    ended_at: float,
    totals: Mapping[str, object],
    errors: Mapping[str, int],
    seconds: Sequence[Second],
    plateau: Mapping[str, object] | None = None,
    extra: Mapping[str, object] | None = None,
    open_loop: Mapping[str, object] | None = None,
    by_name: Mapping[str, Mapping[str, object]] | None = None,
    latency_series: Mapping[str, Mapping[str, object]] | None = None,
    backoff: Mapping[str, object] | None = None,
    steps: Sequence[Mapping[str, object] | Step] | None = None,
    hours: Sequence[Mapping[str, object]] | None = None,
    complete: bool | None = None,
    loop_lag: Mapping[str, Any] | None = None,
) -> Summary:
    """summary.json from totals (invocations: requests, failures, p50_ms, p95_ms, p99_ms), the
    timeline, and the exact per-name figures and latency series when given.

    `steps`: the step records when already measured (the recorder's `record.accumulate.RunTimeline`
    keeps only those, not every second); otherwise they are measured from `seconds`. `hours`: one
    record per hour of the run. `complete`: False in the checkpoints written while the test runs,
    True in the final write (docs/summary.md). `loop_lag`: the load generator's loop lag over the run
(`totals`: every generating process's merged; `processes`: each process's own, a master's workers
with their share of the lag), from `record.looplag`."""
    duration = max(1e-9, ended_at - started_at)
    requests = int(_number(totals.get("requests")))
    failures = int(_number(totals.get("failures")))
    ci95 = totals.get("ci95")
    run_totals = Totals.make(
        requests=requests,
        failures=failures,
        rps=round(requests / duration, 3),
        p50_ms=totals.get("p50_ms"),
        p95_ms=totals.get("p95_ms"),
        p99_ms=totals.get("p99_ms"),
        errors=dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        successes=requests - failures,
        goodput_rps=round((requests - failures) / duration, 3),
        error_rate=round(failures / requests, 6) if requests else 0.0,
        in_flight_at_stop=int(_number(totals.get("in_flight_at_stop"))),
        ci95=dict(ci95) if isinstance(ci95, Mapping) else None,
    )
    if open_loop:
        run_totals = run_totals.adding(open_loop=dict(open_loop))
    if backoff is not None:
        run_totals = run_totals.adding(backoff=dict(backoff))
    if loop_lag is not None:
        run_totals = run_totals.adding(loop_lag=loop_lag.get("totals"))
    step_list = (tuple(s if isinstance(s, Step) else Step.from_json(s, check=False) for s in steps)
                 if steps is not None else tuple(step_summary(s) for s in
                                                 measure_timeline(seconds, timeline_mode(seconds),
                                                                  min_subwindow_s=RECORDER_SUBWINDOW_S)))
    found = Plateau.from_json(plateau, "plateau", check=False) if plateau else None
    verdict = verdict_of(found, step_list)
    workers = (extra or {}).get("workers")
    if isinstance(workers, (Mapping, Workers)):  # a master's: a worker lost before a step ended (lost_worker_verdict)
        verdict = lost_worker_verdict(verdict, step_list, Workers.of(workers), started_at)
    sections: dict[str, object] = {
        "schema": SCHEMA_VERSION,
        "endpoint": endpoint,
        "started_at": iso(started_at),
        "ended_at": iso(ended_at),
        "duration_s": round(duration, 3),
        "totals": run_totals,
        "steps": step_list,
        "plateau": found,
        "verdict": verdict,
    }
    if complete is not None:
        sections["complete"] = bool(complete)
    if hours is not None:
        sections["hours"] = [dict(hour) for hour in hours]
    if loop_lag is not None and loop_lag.get("processes"):
        sections["loop_lag"] = {"processes": dict(loop_lag["processes"])}
    if by_name is not None:
        sections["by_name"] = {name: dict(record) for name, record in by_name.items()}
    if latency_series is not None:
        sections["latency_series"] = {kind: dict(record) for kind, record in latency_series.items()}
    for key, value in (extra or {}).items():
        sections.setdefault(key, value)
    return Summary.make(**sections)


def build_summary(**inputs: Any) -> dict[str, object]:
    """summary.json as its JSON object (`run_summary`'s arguments): what the recorder writes."""
    return run_summary(**inputs).to_json()


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


VERDICT_OK = "ok"
VERDICT_INCONCLUSIVE = "inconclusive"
VERDICT_BELOW = "below-lowest-load"  # no load measured was acceptable: the lowest surely broke a constraint


def verdict_of(plateau: Plateau | None, steps: Sequence[Step]) -> Verdict:
    """summary.json's `verdict`: status "ok", "inconclusive" or "below-lowest-load" (a plateau search
    whose lowest load surely broke a constraint: the capacity is below it), and the reason (None when ok).

    Inconclusive when a step that decides the answer was measured while the load generator, not
    the endpoint, was the bottleneck (`client_bound`: client CPU, waiting for a CPU, late sends):
    with a plateau search, the search stopped on such a step or its capacity / knee step was one
    (`plateau.inconclusive`); without one (a constant load, rate phases), any step. It judges the
    measurement, never the endpoint: an inconclusive run is neither a pass nor a fail."""
    if plateau is not None:
        if plateau.inconclusive or (plateau.client_bound and not plateau.has("inconclusive")):
            return Verdict.make(status=VERDICT_INCONCLUSIVE,
                                reason=plateau.inconclusive_reason or plateau.client_reason)
        if plateau.bound == BOUND_BELOW:
            return Verdict.make(status=VERDICT_BELOW, reason=plateau.reason)
        return Verdict.make(status=VERDICT_OK, reason=None)
    bound = [(i, s) for i, s in enumerate(steps) if s.client_bound]
    if not bound:
        return Verdict.make(status=VERDICT_OK, reason=None)
    index, step = bound[0]
    more = f" (and {len(bound) - 1} more step{'s' if len(bound) > 2 else ''})" if len(bound) > 1 else ""
    return Verdict.make(status=VERDICT_INCONCLUSIVE,
                        reason=f"step {index + 1} ({step.load}) was client-bound{more}: {step.client_bound_reason}")


MISSING_SILENT_S = 4.0  # Locust marks a worker missing ~4 s after its last heartbeat (docs/facts.md, Locust)
LOST_WORKER_FIX = "give the workers more CPU, or add workers"


def steps_after_loss(steps: Sequence[Step], workers: Workers | None, started_at: float) -> list[int]:
    """The judged steps (indexes) that ended after the first Locust worker was lost: they measured less
    load than asked. A worker marked `missing` is taken as lost at its last heartbeat, `MISSING_SILENT_S`
    before Locust marked it; `after_s` counts from the test's start (`started_at`, epoch)."""
    lost_at = [started_at + w.after_s - (MISSING_SILENT_S if w.reason == "missing" else 0.0)
               for w in (workers.lost if workers is not None else ()) if w.after_s is not None]
    if not lost_at:
        return []
    first = min(lost_at)
    return [i for i, step in enumerate(steps) if step.judged is not False and step.end is not None
            and datetime.fromisoformat(step.end).timestamp() > first]


def lost_worker_verdict(verdict: Verdict, steps: Sequence[Step], workers: Workers | None,
                        started_at: float) -> Verdict:
    """`verdict`, or `inconclusive` when a Locust worker was lost before a step the verdict rests on
    ended: its users stopped with it, so that step and the ones after measured less load than asked.

    The verdict rests on every judged step (a search decides on its last steps; a constant load is one
    step), so it stands only when every one ended before the loss; a step cut short by the end of the
    run (`judged: false`) decides nothing. A worker marked `missing` is taken as lost at its last
    heartbeat, `MISSING_SILENT_S` earlier; `after_s` counts from the test's start (`started_at`, epoch).
    A verdict already inconclusive keeps its reason, after the loss's."""
    lost = [w for w in (workers.lost if workers is not None else ()) if w.after_s is not None]
    after = steps_after_loss(steps, workers, started_at)
    if not after:
        return verdict
    assert workers is not None
    index = after[0]
    step = steps[index]
    whole = max(workers.expected or 0, workers.connected or 0, len(lost))
    each = ", ".join(f"{clean(str(w.id or '?'), 80)} {clean(str(w.reason or 'lost'), 20)} {w.after_s:.1f} s"
                     for w in lost)
    reason = (f"{len(lost)} of {whole} Locust worker{'s' if whole != 1 else ''} lost ({each} into the test) "
              f"before step {index + 1} ({step.load}) ended: its users stopped with it, so the steps from there "
              f"measured less load than asked ({LOST_WORKER_FIX})")
    if verdict.status == VERDICT_INCONCLUSIVE and verdict.reason:
        reason += f"; {verdict.reason}"
    return Verdict.make(status=VERDICT_INCONCLUSIVE, reason=reason)


def interrupted_verdict(verdict: Verdict | None, signal_name: str) -> Verdict:
    """The verdict of a run a signal stopped before its end: its answer is not decided (an `ok` search cut
    short has no plateau; a constant load did not hold its duration), so `inconclusive`, saying so; a
    verdict already inconclusive keeps its reason, with the interruption said first."""
    cut = f"interrupted by {signal_name} before the run's end: its answer is not decided"
    if verdict is not None and verdict.status == VERDICT_INCONCLUSIVE and verdict.reason:
        return Verdict.make(status=VERDICT_INCONCLUSIVE, reason=f"{cut}; {verdict.reason}")
    return Verdict.make(status=VERDICT_INCONCLUSIVE, reason=cut)


def mark_interrupted(path: str | Path, signal_name: str) -> None:
    """Rewrite the verdict of the summary.json at `path`, written by a run a signal stopped
    (`interrupted_verdict`); a file that cannot be read as a JSON object is left as it is."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        before = data.get("verdict")
        verdict = Verdict.from_json(before, check=False) if isinstance(before, Mapping) else None
        data["verdict"] = interrupted_verdict(verdict, signal_name).to_json()
        write_json(path, data)


def run_verdict(plateau: Mapping[str, object] | None, steps: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """`verdict_of` on summary.json's objects: {"status": ..., "reason": ...}."""
    return verdict_of(Plateau.from_json(plateau, check=False) if isinstance(plateau, Mapping) else None,
                      [Step.from_json(step, check=False) for step in steps]).to_json()


def write_json(path: str | Path, data) -> Path:
    """Write JSON atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as fh:
        json.dump(data, fh, indent=2, default=str)
        fh.write("\n")
    return path
