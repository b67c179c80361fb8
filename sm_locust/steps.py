"""Per-step figures from the per-second timeline: pure code, no Locust.

A step is a maximal run of seconds with the same user count (or open-loop target rate), not
counting seconds spent ramping. Its figures come from its own requests only: throughput over the
step's duration, percentiles from the merged per-second histograms of that step. Locust's
cumulative and 10-second percentiles would blur neighbouring steps (REFERENCE.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sm_locust.timeline import Second


def iso(epoch: float) -> str:
    """Epoch seconds -> ISO-8601 UTC with a Z suffix (millisecond precision)."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def merge_histograms(hists: Iterable[dict[int, int]]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for hist in hists:
        for bucket, count in hist.items():
            merged[bucket] = merged.get(bucket, 0) + count
    return merged


def percentile(hist: dict[int, int], fraction: float) -> float | None:
    """The smallest bucket at or below which `fraction` of the samples lie (nearest rank)."""
    total = sum(hist.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return float(bucket)
    return float(max(hist))


@dataclass
class Step:
    """The seconds of one held load level."""

    users: int
    seconds: list[Second] = field(default_factory=list)
    target_rate: float | None = None

    @property
    def start(self) -> float:
        return self.seconds[0].t - self.seconds[0].interval

    @property
    def end(self) -> float:
        return self.seconds[-1].t


def split_steps(seconds: Sequence[Second]) -> list[Step]:
    """Group the held (non-ramping, users > 0) seconds into steps of constant users / target rate."""
    steps: list[Step] = []
    previous_held = False
    for second in seconds:
        if second.spawning or second.users <= 0:
            previous_held = False
            continue
        current = steps[-1] if steps else None
        if previous_held and current.users == second.users and current.target_rate == second.target_rate:
            current.seconds.append(second)
        else:
            steps.append(Step(second.users, [second], second.target_rate))
        previous_held = True
    return steps


def step_record(step: Step) -> dict:
    """summary.json's per-step entry."""
    requests = sum(s.requests for s in step.seconds)
    failures = sum(s.failures for s in step.seconds)
    duration = max(1e-9, step.end - step.start)
    hist = merge_histograms(s.hist for s in step.seconds)
    record = {
        "users": step.users,
        "start": iso(step.start),
        "end": iso(step.end),
        "duration_s": round(duration, 3),
        "requests": requests,
        "failures": failures,
        "rps": round(requests / duration, 3),
        "p50_ms": percentile(hist, 0.50),
        "p95_ms": percentile(hist, 0.95),
        "p99_ms": percentile(hist, 0.99),
    }
    if step.target_rate is not None:
        record["target_rate"] = step.target_rate
    cpu = [s.client_cpu_pct for s in step.seconds if s.client_cpu_pct is not None]
    if cpu:
        record["client_cpu_pct"] = round(sum(cpu) / len(cpu), 1)
    return record
