"""Pure compute: one row per hour of the run, so a soak test's drift is visible at a glance.

`hourly_rows` cuts the merged per-second frame into hours from the run's start: throughput, goodput,
error rate, p50 / p95 / p99, errors by code, generator CPU, and the endpoint's CloudWatch CPU /
memory / ModelLatency. Figures come from summary.json's `hours` when present, else from the frame;
CloudWatch columns always from the frame. No I/O: a DataFrame and summary.json's dict in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from sm_locust.record.model import Hour, JsonObject, Summary
from sm_locust.record.summary import iso
from sm_locust.report.merge import parse_time

HOUR_S = 3600
ENDPOINT_COLUMNS = (  # (frame column, aggregation)
    ("cw_CPUUtilization_avg_pct", "mean"), ("cw_CPUUtilization_max_pct", "max"),
    ("cw_MemoryUtilization_avg_pct", "mean"), ("cw_MemoryUtilization_max_pct", "max"),
    ("cw_GPUUtilization_avg_pct", "mean"), ("cw_GPUMemoryUtilization_avg_pct", "mean"),
    ("cw_ModelLatency_avg_ms", "mean"), ("cw_ModelLatency_max_ms", "max"),
)
HOURLY_COLUMNS = [
    "hour", "start", "end", "duration_s", "users", "requests", "failures", "rps", "goodput_rps", "error_rate",
    "p50_ms", "p95_ms", "p99_ms", "errors", "client_cpu_pct", *(c for c, _ in ENDPOINT_COLUMNS),
]


def _errors_text(errors: JsonObject | None) -> str:
    """{code: n} -> 'ModelError 30, ThrottlingException 2' (most first), '' when none."""
    if not isinstance(errors, Mapping) or not errors:
        return ""
    return ", ".join(f"{code} {n}" for code, n in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))


def _origin(summary: Summary, seconds: pd.DataFrame) -> float | None:
    start = parse_time(summary.started_at)
    if start is not None:
        return start
    if not seconds.empty:
        return float(seconds["epoch_s"].iloc[0]) - 1.0  # a history row covers the second before its stamp
    return None


def hourly_rows(seconds: pd.DataFrame, summary: Summary | JsonObject | None = None) -> pd.DataFrame:
    """One row per hour of the run (HOURLY_COLUMNS; CloudWatch columns only when the frame has them).

    `seconds`: the merged per-second frame (`epoch_s`, and `requests`, `failures`, `users`,
    `p50_ms` .. and `cw_*` when known). `summary`: summary.json, whose `hours` (when present) give
    the exact counts, percentiles and errors. Second T (the sample ending at T) belongs to hour
    k = floor((T - 1 - start) / 3600).
    """
    record = Summary.of(summary or {})
    recorded = [h for h in record.hours or () if h.hour]
    origin = _origin(record, seconds)
    if origin is None:
        return pd.DataFrame(columns=HOURLY_COLUMNS[:15])
    frame_hours: dict[int, pd.DataFrame] = {}
    if not seconds.empty:  # the frame is one row per second, in time order: each hour is a slice
        epochs = seconds["epoch_s"].to_numpy(dtype="float64")
        index = np.maximum(((epochs - 1.0 - origin) // HOUR_S).astype("int64"), 0)
        cuts = np.flatnonzero(np.diff(index)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(index)], strict=True):
            frame_hours[int(index[a])] = seconds.iloc[a:b]
    by_hour = {int(h.hour) - 1: h for h in recorded if h.hour}
    keys = sorted(set(by_hour) | set(frame_hours))
    cw = [(c, how) for c, how in ENDPOINT_COLUMNS if c in seconds.columns and seconds[c].notna().any()]
    rows = []
    for k in keys:
        part = frame_hours.get(k)
        exact = by_hour.get(k)
        row = _row(k, origin, part, exact)
        for column, how in cw:
            values = part[column].to_numpy(dtype="float64") if part is not None else np.array([])
            values = values[~np.isnan(values)]
            row[column] = float(values.max() if how == "max" else values.mean()) if len(values) else math.nan
        rows.append(row)
    columns = HOURLY_COLUMNS[:15] + [c for c, _ in cw]
    return pd.DataFrame(rows, columns=columns)


def _column(part: pd.DataFrame | None, name: str) -> np.ndarray:
    if part is None or name not in part.columns:
        return np.array([])
    values = part[name].to_numpy(dtype="float64")
    return values[~np.isnan(values)]


def _row(k: int, origin: float, part: pd.DataFrame | None, exact: Hour | None) -> dict[str, object]:
    start = origin + k * HOUR_S
    if exact is not None:
        duration = float(exact.duration_s or 0.0)
        end = parse_time(exact.end) or start + duration
        return {
            "hour": k + 1, "start": iso(start, "seconds"), "end": iso(end, "seconds"), "duration_s": round(duration, 3),
            "users": exact.users, "requests": exact.requests if exact.has("requests") else None,
            "failures": exact.failures if exact.has("failures") else None,
            "rps": exact.rps, "goodput_rps": exact.goodput_rps, "error_rate": exact.error_rate,
            "p50_ms": exact.p50_ms, "p95_ms": exact.p95_ms, "p99_ms": exact.p99_ms,
            "errors": _errors_text(exact.errors), "client_cpu_pct": exact.client_cpu_pct,
        }
    epochs = _column(part, "epoch_s")
    last = float(epochs.max()) if len(epochs) else start
    end = min(start + HOUR_S, last)
    duration = max(0.0, end - start)
    requests, failures = _column(part, "requests"), _column(part, "failures")
    req = float(requests.sum()) if len(requests) else math.nan
    fail = float(failures.sum()) if len(failures) else math.nan
    users = _column(part, "users")
    median = {p: (float(np.median(v)) if len(v) else math.nan) for p in ("p50_ms", "p95_ms", "p99_ms")
              for v in [_column(part, p)]}
    return {
        "hour": k + 1, "start": iso(start, "seconds"), "end": iso(end, "seconds"), "duration_s": round(duration, 3),
        "users": int(users[-1]) if len(users) else None,
        "requests": req, "failures": fail,
        "rps": req / duration if duration > 0 else math.nan,
        "goodput_rps": (req - fail) / duration if duration > 0 else math.nan,
        "error_rate": fail / req if req else (0.0 if req == 0 else math.nan),
        **median, "errors": "", "client_cpu_pct": None,
    }
