"""What one publishing period holds, computed from two cumulative readings of the run's figures.

Pure. The master (or local runner) reads its merged Locust stats (the same `counted_entry` the
recorder samples into the per-second timeline: logical invocations only) into `Totals`: cumulative
requests, failures, latency histogram (Locust's ~2-significant-digit buckets, ms -> count), the exact
sum, maximum and minimum of the latencies, failures by error code, and the LLM figures
(`plateau.tokens.Bucket`, merged over the run). `difference` turns two readings into the `Interval`
between them: what CloudWatch receives for one period. Because every period is a difference of two
readings of the same cumulative figures, the periods add up to the last reading exactly: nothing is
counted twice, whatever arrives late from a worker is in the next period.

`latency_values` turns an interval's histogram into PutMetricData `Values`/`Counts` so CloudWatch's
Minimum / Maximum agree with Locust's exact ones: every value is clamped to the run's exact minimum
and maximum so far, and when the run's maximum (minimum) rose in the interval, one count of the
top (bottom) bucket is sent as that exact value. CloudWatch's Maximum over the run is then the run's
maximum; Sum / SampleCount is the mean of the bucketed values (within Locust's bucket rounding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sm_locust.plateau.tokens import Bucket

THROTTLE_CODES = frozenset({"ThrottlingException"})  # what SageMaker's runtime answers when it throttles


@dataclass(frozen=True)
class Totals:
    """Cumulative figures of the run at one moment `t` (epoch s)."""

    t: float
    requests: int = 0
    failures: int = 0
    hist: Mapping[int, int] = field(default_factory=dict)
    sum_ms: float = 0.0
    max_ms: float | None = None
    min_ms: float | None = None
    errors: Mapping[str, int] = field(default_factory=dict)
    llm: Bucket | None = None


@dataclass(frozen=True)
class Interval:
    """What happened between two readings: one period's data for CloudWatch."""

    start: float  # the period's start on the period grid (epoch s): the data points' timestamp
    elapsed_s: float  # the time between the two readings
    requests: int
    failures: int
    hist: Mapping[int, int]
    sum_ms: float
    run_max_ms: float | None  # the run's exact maximum at the end of the interval
    run_min_ms: float | None
    new_max_ms: float | None  # the run's maximum when it rose in this interval, else None
    new_min_ms: float | None
    errors: Mapping[str, int]
    llm: Bucket | None = None

    @property
    def throttles(self) -> int:
        return sum(n for code, n in self.errors.items() if code in THROTTLE_CODES)

    @property
    def in_flight(self) -> float:
        """Mean requests in flight over the interval, by Little's law: seconds of latency completed per second."""
        return self.sum_ms / 1000.0 / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def empty(self) -> bool:
        return not self.requests and not self.failures and not (self.llm and self.llm.requests)


def _positive_difference(after: Mapping, before: Mapping) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def bucket_difference(after: Bucket | None, before: Bucket | None) -> Bucket | None:
    """`after - before` of two cumulative LLM buckets (None when nothing was counted in between)."""
    if after is None:
        return None
    if before is None:
        before = Bucket()
    out = Bucket()
    for name in ("requests", "output_tokens", "input_tokens", "input_known", "server", "counted", "unrecognised",
                 "arrived"):
        setattr(out, name, getattr(after, name) - getattr(before, name))
    out.hists = {name: _positive_difference(hist, before.hists.get(name, {})) for name, hist in after.hists.items()}
    return out if out.requests or out.output_tokens else None


def difference(before: Totals, after: Totals, start: float) -> Interval:
    """The interval between two readings of the same run, stamped with its period's `start`."""
    rose = after.max_ms is not None and (before.max_ms is None or after.max_ms > before.max_ms)
    fell = after.min_ms is not None and (before.min_ms is None or after.min_ms < before.min_ms)
    return Interval(
        start=start, elapsed_s=max(0.0, after.t - before.t),
        requests=after.requests - before.requests, failures=after.failures - before.failures,
        hist=_positive_difference(after.hist, before.hist), sum_ms=max(0.0, after.sum_ms - before.sum_ms),
        run_max_ms=after.max_ms, run_min_ms=after.min_ms,
        new_max_ms=after.max_ms if rose else None, new_min_ms=after.min_ms if fell else None,
        errors=_positive_difference(after.errors, before.errors), llm=bucket_difference(after.llm, before.llm),
    )


def latency_values(hist: Mapping[int, int], *, run_max: float | None = None, run_min: float | None = None,
                   new_max: float | None = None, new_min: float | None = None) -> list[tuple[float, int]]:
    """A latency histogram as (value, count) pairs, ascending, with the exact extremes (module docstring)."""
    values: dict[float, int] = {}
    for key, count in hist.items():
        if count <= 0:
            continue
        value = float(key)
        if run_max is not None:
            value = min(value, run_max)
        if run_min is not None:
            value = max(value, run_min)
        values[value] = values.get(value, 0) + count
    if not values:
        return []
    for exact, pick in ((new_max, max), (new_min, min)):
        if exact is None:
            continue
        end = pick(values)
        if end == exact:
            continue
        values[end] -= 1
        if not values[end]:
            del values[end]
        values[exact] = values.get(exact, 0) + 1
    return sorted(values.items())


def chunks(pairs: list[tuple[float, int]], size: int) -> list[list[tuple[float, int]]]:
    return [pairs[i:i + size] for i in range(0, len(pairs), size)]
