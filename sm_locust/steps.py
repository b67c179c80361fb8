"""summary.json's per-step entries, from the per-second timeline: pure code, no Locust.

There is ONE implementation of per-step figures: `sm_locust.plateau.steady` (`split_steps` +
`measure_step`), the same code the plateau searches judge steps with, so a step's rps and p95 in
summary.json are exactly the figures the verdict was based on. This module only turns a
`StepMeasurement` into the summary.json record (schema 1 keys plus the added ones, docs/summary.md).

A step is a maximal run of seconds with one user count (or, in open loop, one target rate), not
counting seconds spent ramping. Its figures come from its steady window (the step minus its
warm-up, 20 % by default) and only from its own requests: percentiles from the merged per-second
histograms with Locust's percentile rule; Locust's cumulative and 10-second percentiles would blur
neighbouring steps (REFERENCE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from sm_locust.plateau.steady import (
    MODE_RATE,
    MODE_USERS,
    StepMeasurement,
    histogram_percentile,
    measure_step,
    merge_histograms,
    split_steps,
)
from sm_locust.timeline import Second

# The recorder's seconds are exact per second on a local runner and on a master (see recorder.py),
# so stability sub-windows of 1 s can be judged, as the shapes judge them.
RECORDER_SUBWINDOW_S = 1.0

__all__ = ["iso", "merge_histograms", "percentile", "step_records", "step_record", "timeline_mode"]


def iso(epoch: float) -> str:
    """Epoch seconds -> ISO-8601 UTC with a Z suffix (millisecond precision)."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def percentile(hist: dict[int, int], fraction: float) -> float | None:
    """A percentile (as a fraction, 0.95) of a Locust-bucketed histogram, by Locust's rule."""
    return histogram_percentile(hist, fraction * 100.0)


def timeline_mode(seconds: Sequence[Second]) -> str:
    """Open-loop timelines (a target rate recorded) are cut by target rate, others by user count."""
    return MODE_RATE if any(s.target_rate is not None for s in seconds) else MODE_USERS


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
        "client_bound": step.client_bound,
        "client_bound_reason": step.client_bound_reason,
    }
    if step.mode == MODE_RATE:
        record.update({
            "target_rate": step.intended_rps,
            "sent_rps": _round(step.sent_rps),
            "late_fraction": _round(step.late_fraction, 6),
            "dropped_fraction": _round(step.dropped_fraction, 6),
        })
    return record


def step_records(seconds: Sequence[Second]) -> list[dict]:
    """Every step of a timeline as summary.json records, in time order."""
    mode = timeline_mode(seconds)
    return [step_record(measure_step(step, mode=mode, min_subwindow_s=RECORDER_SUBWINDOW_S))
            for step in split_steps(seconds, mode)]
