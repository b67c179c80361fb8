"""Open-loop arrival schedules, and how to tell when the generator fell behind them.

Open loop fixes the send times in advance from the target rate (`constant_arrivals`, or seeded
`poisson_arrivals`), so a slow endpoint cannot lower the offered load ("coordinated omission").
Latency is measured from the INTENDED send time (`latency_from_intended_ms`). `count_late` compares
intended and actual send times; its `late_fraction` feeds `measure_step`, which marks the step
client-bound.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sm_locust.errors import UsageError
from sm_locust.util.registry import Registry

LATE_TOLERANCE_S = 0.010  # a send more than 10 ms after its intended time is late


def _check(rate: float, duration_s: float) -> None:
    if not rate > 0 or math.isinf(rate):
        raise UsageError(f"arrival rate {rate!r} req/s must be a finite number > 0")
    if not duration_s > 0:
        raise UsageError(f"arrival schedule duration {duration_s!r} s must be > 0")


def iter_constant_arrivals(rate: float, start: float = 0.0) -> Iterator[float]:
    """Endless evenly spaced send times: start, start + 1/rate, ..."""
    _check(rate, 1.0)
    n = 0
    while True:
        yield start + n / rate  # from n, not by summing, so no drift over long runs
        n += 1


def iter_poisson_arrivals(rate: float, seed: int, start: float = 0.0) -> Iterator[float]:
    """Endless Poisson-process send times (exponential gaps of mean 1/rate), reproducible by seed."""
    _check(rate, 1.0)
    rng = random.Random(seed)
    t = start
    while True:
        t += rng.expovariate(rate)
        yield t


def constant_arrivals(rate: float, duration_s: float, start: float = 0.0) -> list[float]:
    """Send times in [start, start + duration_s) at exactly `rate` per second."""
    _check(rate, duration_s)
    return [start + n / rate for n in range(math.ceil(rate * duration_s - 1e-9))]


def poisson_arrivals(rate: float, duration_s: float, seed: int, start: float = 0.0) -> list[float]:
    """Poisson send times in [start, start + duration_s); about rate * duration_s of them."""
    _check(rate, duration_s)
    out: list[float] = []
    for t in iter_poisson_arrivals(rate, seed, start):
        if t >= start + duration_s:
            return out
        out.append(t)
    return out  # pragma: no cover - the iterator is endless


def latency_from_intended_ms(intended_send: float, completed_at: float) -> float:
    """Response time as the user feels it: from when the request SHOULD have gone out (ms)."""
    return max(0.0, (completed_at - intended_send) * 1000.0)


@dataclass(frozen=True)
class LateSends:
    """How far the actual sends lagged their schedule."""

    scheduled: int
    sent: int
    late: int  # sent more than the tolerance after the intended time, or never sent
    max_lag_s: float
    mean_lag_s: float

    @property
    def late_fraction(self) -> float:
        return self.late / self.scheduled if self.scheduled else 0.0


def count_late(
    intended: Sequence[float],
    actual: Sequence[float | None],
    tolerance_s: float = LATE_TOLERANCE_S,
) -> LateSends:
    """Pair the i-th intended send with the i-th actual one (None or missing = never sent)."""
    if tolerance_s < 0:
        raise UsageError(f"late tolerance {tolerance_s!r} s must be >= 0")
    if len(actual) > len(intended):
        raise UsageError(f"{len(actual)} actual sends for {len(intended)} scheduled ones: pair them one to one")
    late = 0
    sent = 0
    lags = []
    for index, planned in enumerate(intended):
        done = actual[index] if index < len(actual) else None
        if done is None:
            late += 1
            continue
        sent += 1
        lag = max(0.0, done - planned)
        lags.append(lag)
        if lag > tolerance_s:
            late += 1
    return LateSends(
        scheduled=len(intended),
        sent=sent,
        late=late,
        max_lag_s=max(lags) if lags else 0.0,
        mean_lag_s=sum(lags) / len(lags) if lags else 0.0,
    )


def _constant_stream(rate: float, start: float) -> Iterator[float]:
    return iter_constant_arrivals(rate, start)


def _poisson_stream(rate: float, start: float) -> Iterator[float]:
    return iter_poisson_arrivals(rate, random.getrandbits(32), start)


# `--arrival` name -> (rate, start) -> endless intended send times (a fresh random seed per stream)
ARRIVALS: Registry = Registry("arrival process")
ARRIVALS.add("constant", _constant_stream, "uniform", "fixed")
ARRIVALS.add("poisson", _poisson_stream, "exponential")
