"""summary.json's `async`: what a run's InvokeEndpointAsync calls came to when they waited for their
results (`--async-result s3`; docs/async.md, docs/summary.md).

Built from the calls the processes recorded (`transport.asyncwait.AsyncLedger`, merged on the
master) by the pure model (`plateau.asyncresults`): accepted calls, results, failures by name, the
time to result (call start -> result seen) p50 / p95 / p99 with 95 % intervals
(`measure.uncertainty`, per-second histograms), the acceptance latency, results still awaited at
the stop, HeadObject polls, the poll resolution, and the client-side backlog: its maximum and its
series (the end of each second, at most 3,600 values: a longer run keeps each span's maximum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sm_locust.measure.steady import histogram_percentile
from sm_locust.measure.uncertainty import Interval, percentile_cis
from sm_locust.plateau.asyncresults import RESULT, AsyncCall, awaited_at, backlog_series, result_histograms
from sm_locust.plateau.synthetic import locust_bucket
from sm_locust.util.formatting import latency, number

PERCENTILES = (50.0, 95.0, 99.0)
MAX_NAMES = 20
"""Failure names kept (the most frequent); the rest add up under `other`."""
MAX_BACKLOG_POINTS = 3600
"""The backlog series' length at most: a longer run keeps each span's maximum (`backlog_every_s`)."""


def thin(series: Sequence[int], points: int = MAX_BACKLOG_POINTS) -> tuple[tuple[int, ...], int]:
    """`series` as at most `points` values, each the maximum over `every` consecutive seconds: (values, every)."""
    every = max(1, -(-len(series) // points))
    return tuple(max(series[i:i + every]) for i in range(0, len(series), every)), every


def _percentiles(values: Sequence[float]) -> dict[float, float | None]:
    hist: dict[int, int] = {}
    for value in values:
        bucket = locust_bucket(value)
        hist[bucket] = hist.get(bucket, 0) + 1
    return {p: histogram_percentile(hist, p) for p in PERCENTILES}


def _key(pct: float) -> str:
    return f"p{pct:g}_ms"


@dataclass(frozen=True)
class AsyncSummary:
    """summary.json's `async` (module doc). Times in ms; intervals `[low, high]` or None."""

    accepted: int
    results: int
    failed: tuple[tuple[str, int], ...]
    time_to_result: tuple[tuple[str, float | None], ...]
    time_to_result_ci95: tuple[tuple[str, Interval], ...]
    acceptance: tuple[tuple[str, float | None], ...]
    awaited_at_stop: int
    polls: int
    poll_resolution_max_ms: float | None
    backlog_max: int
    not_kept: int = 0
    backlog: tuple[int, ...] = ()
    backlog_every_s: int = 1
    first_time_to_result_ms: float | None = None  # the run's first call: against an idle endpoint, its cold start

    @property
    def failures(self) -> int:
        return sum(n for _, n in self.failed)

    @classmethod
    def from_calls(cls, calls: Sequence[AsyncCall], started_at: float, ended_at: float,
                   not_kept: int = 0) -> AsyncSummary:
        """The figures of `calls` (run-clock epoch seconds) over the run [started_at, ended_at]."""
        done = [c for c in calls if c.seen_s is not None and c.seen_s <= ended_at]
        counts: dict[str, int] = {}
        for call in done:
            if call.outcome != RESULT:
                name = call.outcome or "unknown"
                counts[name] = counts.get(name, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(ranked) > MAX_NAMES:
            ranked = [*ranked[:MAX_NAMES], ("other", sum(n for _, n in ranked[MAX_NAMES:]))]
        ttr = [c.time_to_result_ms for c in done if c.time_to_result_ms is not None]
        cis = percentile_cis(result_histograms(done, started_at), PERCENTILES)
        resolutions = [c.resolution_ms for c in done if c.resolution_ms is not None]
        backlog = backlog_series(calls, started_at, ended_at)
        series, every = thin(backlog)
        first = min(calls, key=lambda c: c.sent_s) if calls else None
        first_ms = first.time_to_result_ms if first is not None and first.seen_s is not None and \
            first.seen_s <= ended_at else None
        return cls(
            accepted=len(calls) + not_kept,
            results=len(ttr),
            failed=tuple(ranked),
            time_to_result=tuple((_key(p), v) for p, v in _percentiles(ttr).items()),
            time_to_result_ci95=tuple((_key(p), cis[p]) for p in PERCENTILES),
            acceptance=tuple((_key(p), v) for p, v in _percentiles([c.acceptance_ms for c in calls]).items()),
            awaited_at_stop=awaited_at(calls, ended_at),
            polls=sum(c.polls for c in calls),
            poll_resolution_max_ms=max(resolutions) if resolutions else None,
            backlog_max=max(backlog, default=0),
            not_kept=not_kept,
            backlog=series,
            backlog_every_s=every,
            first_time_to_result_ms=first_ms,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "results": self.results,
            "failures": self.failures,
            "failed": dict(self.failed),
            "time_to_result": {**dict(self.time_to_result),
                               "ci95": {k: v.as_list() for k, v in self.time_to_result_ci95}},
            "acceptance": dict(self.acceptance),
            "awaited_at_stop": self.awaited_at_stop,
            "polls": self.polls,
            "poll_resolution_max_ms": self.poll_resolution_max_ms,
            "backlog_max": self.backlog_max,
            "not_kept": self.not_kept,
            "backlog": list(self.backlog),
            "backlog_every_s": self.backlog_every_s,
            "first_time_to_result_ms": self.first_time_to_result_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AsyncSummary:
        ttr = dict(data.get("time_to_result") or {})
        ci = dict(ttr.pop("ci95", None) or {})

        def points(section: Mapping[str, Any]) -> tuple[tuple[str, float | None], ...]:
            return tuple((_key(p), None if section.get(_key(p)) is None else float(section[_key(p)]))
                         for p in PERCENTILES)

        return cls(
            accepted=int(data.get("accepted") or 0),
            results=int(data.get("results") or 0),
            failed=tuple((str(k), int(v)) for k, v in dict(data.get("failed") or {}).items()),
            time_to_result=points(ttr),
            time_to_result_ci95=tuple((_key(p), Interval.from_list(ci.get(_key(p)))) for p in PERCENTILES),
            acceptance=points(dict(data.get("acceptance") or {})),
            awaited_at_stop=int(data.get("awaited_at_stop") or 0),
            polls=int(data.get("polls") or 0),
            poll_resolution_max_ms=(None if data.get("poll_resolution_max_ms") is None
                                    else float(data["poll_resolution_max_ms"])),
            backlog_max=int(data.get("backlog_max") or 0),
            not_kept=int(data.get("not_kept") or 0),
            backlog=tuple(int(v) for v in data.get("backlog") or ()),
            backlog_every_s=int(data.get("backlog_every_s") or 1),
            first_time_to_result_ms=(None if data.get("first_time_to_result_ms") is None
                                     else float(data["first_time_to_result_ms"])),
        )

    def closing_line(self) -> str:
        """`sm-locust run`'s closing line for an async run (figures through the one formatter)."""
        ttr, ci = dict(self.time_to_result), dict(self.time_to_result_ci95)
        p50 = ci.get("p50_ms")
        interval = f" (95 % {latency(p50.low)}-{latency(p50.high, ' ms')})" if p50 is not None and p50.known else ""
        failed = f", failed {number(self.failures, 0)}" + (
            f" ({', '.join(f'{name} x{n}' for name, n in self.failed[:3])})" if self.failed else "")
        return (f"async: accepted {number(self.accepted, 0)}, results {number(self.results, 0)}{failed}; "
                f"time to result p50 {latency(ttr.get('p50_ms'), ' ms')}{interval}, "
                f"p95 {latency(ttr.get('p95_ms'), ' ms')}, p99 {latency(ttr.get('p99_ms'), ' ms')} "
                f"({'poll resolution' if self.polls or not self.results else 'notification delivery'} "
                f"<= {latency(self.poll_resolution_max_ms, ' ms')}); "
                f"awaited at the stop {number(self.awaited_at_stop, 0)}, backlog max {number(self.backlog_max, 0)}, "
                f"polls {number(self.polls, 0)}")
