"""The numbers a gate reads: whole-run totals and, when available, one entry per request name.

Totals come from summary.json (the recorder's in-memory stats at the end of the run). Per-name
figures come from Locust's `locust_stats.csv`, the only per-name source in a run folder; it is
rewritten on an interval, so its counts can miss the last second of a run (REFERENCE.md). That is
fine for a latency or error-rate gate, and the reason totals never come from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Metrics:
    """Requests, failures, throughput and latency percentiles of one scope (the run or one name)."""

    requests: int = 0
    failures: int = 0
    rps: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None

    @property
    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    def percentile(self, pct: int) -> float | None:
        return {50: self.p50_ms, 95: self.p95_ms, 99: self.p99_ms}[pct]


@dataclass(frozen=True)
class RunData:
    """A finished run as the gates see it."""

    totals: Metrics
    by_name: Mapping[str, Metrics] = field(default_factory=dict)
    source: str = ""  # where it came from (a run folder), for messages

    def scope(self, name: str | None) -> Metrics | None:
        """Totals for None, else the named entry (None when the run has no such name)."""
        return self.totals if name is None else self.by_name.get(name)

    @classmethod
    def from_summary(cls, summary: Mapping, stats_rows: Iterable[Mapping[str, str]] = (), source: str = "") -> RunData:
        t = summary.get("totals") or {}
        totals = Metrics(requests=int(t.get("requests") or 0), failures=int(t.get("failures") or 0),
                         rps=float(t.get("rps") or 0.0), p50_ms=_num(t.get("p50_ms")), p95_ms=_num(t.get("p95_ms")),
                         p99_ms=_num(t.get("p99_ms")))
        return cls(totals=totals, by_name=per_name_metrics(stats_rows), source=source)


def per_name_metrics(rows: Iterable[Mapping[str, str]]) -> dict[str, Metrics]:
    """Rows of locust_stats.csv -> {name: Metrics}, without the Aggregated row."""
    out: dict[str, Metrics] = {}
    for row in rows:
        name = row.get("Name", "")
        if not name or name == "Aggregated":
            continue
        requests = int(_num(row.get("Request Count")) or 0)
        out[name] = Metrics(requests=requests, failures=int(_num(row.get("Failure Count")) or 0),
                            rps=float(_num(row.get("Requests/s")) or 0.0),
                            p50_ms=_num(row.get("50%")) if requests else None,
                            p95_ms=_num(row.get("95%")) if requests else None,
                            p99_ms=_num(row.get("99%")) if requests else None)
    return out


def _num(value) -> float | None:
    if value is None or value == "" or value == "N/A":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
