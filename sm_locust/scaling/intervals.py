"""The 95 % intervals of an autoscaling test's figures, and the seconds over the SLO the client caused (pure).

Reaction and ready times: the change happened between two DescribeEndpoint readings, so the interval
is [time - gap, time], a bound from the poll's resolution, stated as such (not a statistical 95 %).
Seconds over the SLO (`breach_s_ci95`): each second's requests resampled from its histogram
(`RESAMPLES`, seeded), seconds that cannot flip skipped. `breach_client_bound_s`: seconds over the
SLO while the generator was behind by `measure.steady`'s thresholds; such a breach cannot be told
from the endpoint's own (sweep/trust.py). docs/autoscaling.md, "How sure".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sm_locust.measure.steady import (
    CLIENT_BUSY_LIMIT_PCT,
    CLIENT_CPU_LIMIT_PCT,
    MIN_ACHIEVED_RATIO,
    histogram_percentile,
)
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import row_percentiles
from sm_locust.scaling.timeline import InstanceSample, RunClock

RESAMPLES = 1000
DRAIN_WINDOW_S = 5.0  # real seconds a late burst's queue may take to drain and still be the burst's
DRAIN_SLACK = 0.1  # drained: sends minus completions since the burst at most this share of a second's sends


def reading_gap(instances: Sequence[InstanceSample], t_s: float) -> float | None:
    """Seconds between the reading at `t_s` and the reading before it (None: the first reading)."""
    before = [s.t_s for s in instances if s.t_s < t_s - 1e-9]
    return t_s - max(before) if before else None


def with_event_intervals(events: Sequence[Mapping], instances: Sequence[InstanceSample]) -> list[dict]:
    """Each scale event with `reaction_s_ci95` and `ready_s_ci95`: [value - gap, value] (module docstring),
    None when the value is None or no earlier reading bounds it."""
    out = []
    for event in events:
        gap = reading_gap(instances, float(event["t_s"]))
        ready_at = event.get("ready_at_s")
        ready_gap = reading_gap(instances, float(ready_at)) if ready_at is not None else None
        reaction, ready = event.get("reaction_s"), event.get("ready_s")
        out.append({**event,
                    "reaction_s_ci95": None if reaction is None or gap is None else [max(0.0, reaction - gap),
                                                                                     reaction],
                    "ready_s_ci95": None if ready is None or ready_gap is None else [max(0.0, ready - ready_gap),
                                                                                     ready]})
    return out


def _span(second: Second, clock: RunClock) -> float:
    return clock.run_s(second.t) - clock.run_s(second.t - second.interval)


def breach_interval(seconds: Sequence[Second], clock: RunClock, slo_ms: float, percentile: float, *,
                    seed: int = 0, resamples: int = RESAMPLES) -> list[float] | None:
    """`breach_s_ci95`: the 95 % interval of the run seconds over the SLO (module docstring); None
    without seconds that held requests."""
    certain = 0.0
    flips: list[np.ndarray] = []
    rng = np.random.default_rng(seed)
    held = False
    for second in seconds:
        if not second.hist:
            continue
        held = True
        span = _span(second, clock)
        buckets = np.array(sorted(second.hist), dtype=np.int64)
        if buckets[0] > slo_ms:  # every request slower than the SLO: over it, whatever the draw
            certain += span
            continue
        if buckets[-1] <= slo_ms:  # every request within it
            continue
        counts = np.array([second.hist[int(b)] for b in buckets], dtype=np.int64)
        draws = rng.multinomial(int(counts.sum()), counts / counts.sum(), size=resamples)
        flips.append((row_percentiles(draws, buckets, percentile) > slo_ms) * span)
    if not held:
        return None
    total = certain + (np.sum(flips, axis=0) if flips else np.zeros(resamples))
    low, high = np.quantile(total, [0.025, 0.975])
    return [float(low), float(high)]


def client_behind(second: Second) -> bool:
    """The load generator was behind in this second: too many late sends, its CPU saturated, or always
    running or waiting for a CPU (a busy machine: Linux schedstat, `Second.client_wait_pct`)."""
    cpu, wait = second.client_cpu_pct, second.client_wait_pct
    if cpu is not None and cpu >= CLIENT_CPU_LIMIT_PCT:
        return True
    if cpu is not None and wait is not None and cpu + wait >= CLIENT_BUSY_LIMIT_PCT:
        return True
    return bool(second.sent and second.late is not None and second.late / second.sent > 1.0 - MIN_ACHIEVED_RATIO)


def drained_by(seconds: Sequence[Second], start: int) -> int | None:
    """The index of the second by which the queue a late burst at `start` built has drained (sends
    minus completions since then back to at most DRAIN_SLACK of a second's sends), within
    DRAIN_WINDOW_S; None when it did not (or the seconds do not count sends: closed loop)."""
    if seconds[start].sent is None:
        return None
    excess, elapsed = 0.0, 0.0
    for t in range(start, len(seconds)):
        second = seconds[t]
        if second.sent is None:
            return None
        excess += second.sent - second.requests
        elapsed += second.interval
        if excess <= DRAIN_SLACK * max(1, second.sent):
            return t
        if elapsed >= DRAIN_WINDOW_S:
            return None
    return None


def client_caused(seconds: Sequence[Second]) -> set[int]:
    """Indexes of the seconds the client was behind, and of those its late sends' queue slowed."""
    caused: set[int] = set()
    for index, second in enumerate(seconds):
        if not client_behind(second):
            continue
        caused.add(index)
        drained = drained_by(seconds, index)
        if drained is not None:
            caused.update(range(index, drained + 1))
    return caused


def waited_ms(second: Second | None) -> float:
    """How long the client waited for a CPU in this second, in ms (0 when not measured)."""
    if second is None or second.client_wait_pct is None:
        return 0.0
    return second.client_wait_pct / 100.0 * second.interval * 1000.0


def breach_client_bound_s(seconds: Sequence[Second], clock: RunClock, slo_ms: float, percentile: float) -> float:
    """Run seconds over the SLO the load generator caused, or may have (module docstring)."""
    caused = client_caused(seconds)
    total = 0.0
    for index, second in enumerate(seconds):
        value = histogram_percentile(second.hist, percentile)
        if value is None or value <= slo_ms:
            continue
        starved = value - waited_ms(second) - waited_ms(seconds[index - 1] if index else None) <= slo_ms
        if index in caused or starved:
            total += _span(second, clock)
    return total
