"""Pure compute: put the client's and the endpoint's view of a run on one UTC time axis.

Locust's history has one row per second; CloudWatch has one value per minute. `per_second`
builds one row per second of the run with Locust's columns, and `attach_metrics` writes each
minute's CloudWatch value on the seconds of that minute (second T belongs to the bucket
`T - T % period`). `step_records` then reduces the seconds of each step (one user count held) to
one record: throughput, percentiles, error rate, endpoint CPU/memory/latency, and the latency
decomposition

    client avg latency - ModelLatency avg - OverheadLatency avg = network + client time

(all three are means, so the difference is a mean too). CloudWatch averages in a step are
time-weighted: a minute half inside the step counts half. A minute's Sum (Invocations) is spread
over the seconds of that minute the run covered (`bucket_share`): a run that starts at :30 made
its first minute's invocations in 30 s, not 60, and spreading them over 60 read half the client's
rate there. The decomposition compares like with like: CloudWatch knows only whole minutes, so the
client's average is taken over the same minutes (every request in the minutes the step touches,
neighbouring steps' included) and the CloudWatch averages are weighted by each minute's
invocations. Against the step's own client average a one-minute CloudWatch value that mixes a
heavier step's requests could exceed it, and the "network" share came out negative.

No I/O here: DataFrames and dicts in, DataFrames and dicts out.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from sm_locust.record.summary import iso
from sm_locust.report.metrics import STAT_ABBREV

LOCUST_SECOND_COLUMNS = [
    "users", "rps", "failures_per_s", "requests", "failures", "avg_ms",
    "p50_ms", "p66_ms", "p75_ms", "p80_ms", "p90_ms", "p95_ms", "p98_ms", "p99_ms", "p999_ms", "p100_ms",
    "total_requests", "total_failures",
]

MAX_ERROR_RATE = 0.01  # a step with more failures than this is not "sustainable"


def parse_time(value: Any) -> float | None:
    """ISO-8601 (with Z or an offset; naive = UTC) or epoch number -> epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def per_second(history: pd.DataFrame | None, start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """One row per second from the first to the last history row (or start..end without history).

    `requests`/`failures` are the differences of Locust's cumulative totals, `avg_ms` the mean
    response time of that second's requests (from the cumulative average); seconds Locust did
    not write are NaN, and so is the first second (no previous total to subtract).
    """
    if history is not None and not history.empty:
        first, last = int(history["epoch_s"].iloc[0]), int(history["epoch_s"].iloc[-1])
    elif start is not None and end is not None:
        first, last = int(math.floor(start)), int(math.ceil(end))
    else:
        return pd.DataFrame({"epoch_s": pd.Series([], dtype="int64")})
    grid = np.arange(first, last + 1, dtype="int64")
    out = pd.DataFrame({"epoch_s": grid})
    if history is None or history.empty:
        return out
    h = history.set_index("epoch_s").reindex(grid)
    for col in ("users", "rps", "failures_per_s"):
        if col in h.columns:
            out[col] = h[col].to_numpy()
    total = h["total_requests"]
    req = total.diff()
    fail = h["total_failures"].diff()
    req[req < 0] = np.nan  # stats were reset mid-run
    fail[fail < 0] = np.nan
    out["requests"] = req.to_numpy()
    out["failures"] = fail.to_numpy()
    if "total_avg_ms" in h.columns:
        weighted = (h["total_avg_ms"] * total).diff()
        with np.errstate(divide="ignore", invalid="ignore"):
            avg = weighted / req
        avg[(req <= 0) | req.isna()] = np.nan
        out["avg_ms"] = avg.to_numpy()
    for col in LOCUST_SECOND_COLUMNS:
        if col.startswith("p") and col.endswith("_ms") and col in h.columns:
            out[col] = h[col].to_numpy()
    out["total_requests"] = total.to_numpy()
    out["total_failures"] = h["total_failures"].to_numpy()
    return out


def attach_metrics(seconds: pd.DataFrame, metrics: pd.DataFrame | None, period: int = 60) -> pd.DataFrame:
    """Add each `cw_*` column of `metrics` (indexed by bucket start) to every second of its bucket."""
    out = seconds.copy(deep=False)  # new columns only: `seconds` is left as it was
    if metrics is None or metrics.empty or not len(metrics.columns):
        return out
    buckets = out["epoch_s"].to_numpy() // period * period
    aligned = metrics.reindex(buckets)
    for col in metrics.columns:
        out[col] = aligned[col].to_numpy()
    return out


def iso_seconds(epochs) -> np.ndarray:
    """Whole epoch seconds -> `2024-01-01T00:00:01Z` strings (as `iso(t, "seconds")`), vectorized:
    each minute's prefix is formatted once, so a week of seconds takes ~0.1 s instead of ~2 s."""
    e = np.asarray(epochs, dtype="int64")
    if e.size == 0:
        return np.array([], dtype="U20")
    minutes = e // 60
    low, high = int(minutes.min()), int(minutes.max())
    if high - low <= 2 * e.size:  # a run's seconds: every minute in between, no sort needed
        unique, inverse = np.arange(low, high + 1), minutes - low
    else:
        unique, inverse = np.unique(minutes, return_inverse=True)
    prefixes = np.datetime_as_string((unique * 60).astype("datetime64[s]"), unit="m").astype("S16")
    chars = np.empty((e.size, 20), dtype=np.uint8)
    chars[:, :16] = prefixes.view(np.uint8).reshape(-1, 16)[inverse.ravel()]
    second = e - minutes * 60
    chars[:, 16] = ord(":")
    chars[:, 17] = ord("0") + second // 10
    chars[:, 18] = ord("0") + second % 10
    chars[:, 19] = ord("Z")
    return chars.view("S20").ravel().astype("U20")


def with_time(seconds: pd.DataFrame) -> pd.DataFrame:
    """Prepend the ISO-8601 UTC `time` column (the CSV's first column)."""
    out = seconds.copy()
    out.insert(0, "time", iso_seconds(out["epoch_s"].to_numpy()))
    return out


# ---------------------------------------------------------------------------------------- steps


def step_spans(summary: dict[str, Any], seconds: pd.DataFrame) -> list[dict[str, Any]]:
    """Steps as {users, start_s, end_s, source}: summary.json's if it has them, else runs of one
    user count in the history (ramps included; good enough for a run without a summary)."""
    spans = []
    for step in summary.get("steps") or []:
        start, end = parse_time(step.get("start")), parse_time(step.get("end"))
        if start is None or end is None or end <= start:
            continue
        spans.append({"users": step.get("users"), "start_s": start, "end_s": end, "source": "summary",
                      "summary": step})
    if spans or "users" not in seconds.columns:
        return spans
    users = seconds["users"].ffill()
    valid = users.notna().to_numpy()
    if not valid.any():
        return spans
    epochs = seconds["epoch_s"].to_numpy()
    values = users.to_numpy()
    change = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    bounds = np.r_[change, len(values)]
    for a, b in pairwise(bounds):
        if not valid[a]:
            continue
        spans.append({"users": int(values[a]), "start_s": float(epochs[a]), "end_s": float(epochs[b - 1] + 1),
                      "source": "history"})
    return spans


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    ok = ~np.isnan(values) & ~np.isnan(weights) & (weights > 0)
    if not ok.any():
        return float("nan")
    return float(np.sum(values[ok] * weights[ok]) / np.sum(weights[ok]))


def _nan(fn, values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(fn(values)) if len(values) else float("nan")


def bucket_share(epochs: np.ndarray, period: int = 60) -> np.ndarray:
    """For each second of the run, the share of its bucket's Sum that belongs to it: 1 / the number
    of the run's seconds in that bucket (a run that covers 30 s of a minute made that minute's
    invocations in those 30 s)."""
    buckets = np.asarray(epochs, dtype="int64") // period
    _, inverse, counts = np.unique(buckets, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse.ravel()]


def decomposition(seconds: pd.DataFrame, rows: slice, period: int = 60) -> dict[str, Any]:
    """The latency decomposition of the seconds `rows` over the CloudWatch minutes they touch:
    the client's average over every request in those minutes, ModelLatency and OverheadLatency
    averaged over the same minutes weighted by each minute's invocations (equal weights without
    Invocations), network + client time the difference; and the window (epoch s)."""
    epochs = seconds["epoch_s"].to_numpy(dtype="int64")
    buckets = epochs // period
    touched = np.unique(buckets[rows])
    if not len(touched):
        return {}
    window = np.isin(buckets, touched)

    def col(name: str) -> np.ndarray:
        if name not in seconds.columns:
            return np.full(int(window.sum()), np.nan)
        return seconds[name].to_numpy(dtype="float64")[window]

    invocations = col("cw_Invocations_sum_count") * bucket_share(epochs, period)[window]
    weights = invocations if (invocations > 0).any() else np.ones(len(invocations))
    client = _weighted_mean(col("avg_ms"), col("requests"))
    model = _weighted_mean(col("cw_ModelLatency_avg_ms"), weights)
    overhead = _weighted_mean(col("cw_OverheadLatency_avg_ms"), weights)
    covered = epochs[window]
    return {"decomposition_client_avg_ms": client, "model_latency_ms": model, "overhead_latency_ms": overhead,
            "network_client_ms": client - model - overhead,
            "decomposition_start": iso(float(covered.min()), "seconds"),
            "decomposition_end": iso(float(covered.max() + 1), "seconds")}


def step_records(seconds: pd.DataFrame, spans: list[dict[str, Any]], period: int = 60) -> pd.DataFrame:
    """One record per step from the merged seconds (rows with start <= epoch_s < end)."""
    epochs = seconds["epoch_s"].to_numpy()
    cw_cols = [c for c in seconds.columns if c.startswith("cw_")]
    share = bucket_share(epochs, period) if len(epochs) else np.array([])
    rows = []
    for i, span in enumerate(spans, start=1):
        a = int(np.searchsorted(epochs, span["start_s"], side="left"))
        b = int(np.searchsorted(epochs, span["end_s"], side="left"))
        part = seconds.iloc[a:b]
        duration = span["end_s"] - span["start_s"]
        given = span.get("summary") or {}

        def col(name: str, part: pd.DataFrame = part) -> np.ndarray:
            return part[name].to_numpy(dtype="float64") if name in part.columns else np.array([])

        requests = given.get("requests")
        if requests is None:
            requests = _nan(np.sum, col("requests")) if len(col("requests")) else float("nan")
        failures = given.get("failures")
        if failures is None:
            failures = _nan(np.sum, col("failures")) if len(col("failures")) else float("nan")
        rps = given.get("rps")
        if rps is None:
            rps = requests / duration if duration > 0 and not _isnan(requests) else float("nan")
        row: dict[str, Any] = {
            "step": i,
            "users": span["users"],
            "start": iso(span["start_s"], "seconds"),
            "end": iso(span["end_s"], "seconds"),
            "duration_s": round(duration, 3),
            "seconds_with_data": int(np.count_nonzero(~np.isnan(col("requests")))) if len(col("requests")) else 0,
            "requests": requests,
            "failures": failures,
            "rps": rps,
            "error_rate": (failures / requests) if requests and not _isnan(requests) and not _isnan(failures)
            else float("nan"),
        }
        for p in ("p50_ms", "p95_ms", "p99_ms"):
            # summary.json's are exact (the step's own histogram); the history's are ~10 s windows
            row[p] = given.get(p) if given.get(p) is not None else _nan(np.median, col(p))
        row["client_avg_ms"] = _weighted_mean(col("avg_ms"), col("requests")) if len(col("avg_ms")) else float("nan")
        for c in cw_cols:
            values = col(c)
            stat = c.rsplit("_", 2)[-2]
            if stat == STAT_ABBREV["Maximum"]:
                row[c] = _nan(np.max, values)
            elif stat == STAT_ABBREV["Minimum"]:
                row[c] = _nan(np.min, values)
            elif stat == STAT_ABBREV["Sum"]:
                # each second carries its minute's total: its share is 1 / the run's seconds in that minute
                row[c] = float(np.nansum(values * share[a:b])) if (~np.isnan(values)).any() else float("nan")
            else:
                row[c] = _nan(np.mean, values)
        if "cw_Invocations_sum_count" in row and duration > 0:
            row["cw_invocations_per_s"] = row["cw_Invocations_sum_count"] / duration
        if "cw_ModelLatency_avg_ms" in row:
            row.update(decomposition(seconds, slice(a, b), period))
        else:
            row.update(model_latency_ms=float("nan"), overhead_latency_ms=float("nan"), network_client_ms=float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def _isnan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# ------------------------------------------------------------------------------------- findings


def sustainable_point(summary: dict[str, Any], steps: pd.DataFrame,
                      max_error_rate: float = MAX_ERROR_RATE) -> dict[str, Any] | None:
    """The max sustainable throughput: summary.json's plateau if the run found one, else the step
    with the highest goodput (successful invocations/s; rps without that column) among steps with
    error rate <= max_error_rate."""
    plateau = summary.get("plateau")
    if isinstance(plateau, dict) and plateau.get("rps"):
        point = {k: plateau.get(k) for k in ("users", "rps", "p50_ms", "p95_ms", "p99_ms", "capacity_rps")}
        point["source"] = "plateau found during the run" + (f" ({plateau['reason']})" if plateau.get("reason") else "")
        point["stable"] = plateau.get("stable")
        match = steps[steps["users"] == plateau.get("users")] if not steps.empty else steps
        if len(match):
            point["step"] = int(match.iloc[-1]["step"])
            point["goodput_rps"] = _plain(match.iloc[-1].get("goodput_rps"))
        return point
    if steps.empty or "rps" not in steps.columns:
        return None
    ok = steps[(steps["error_rate"].fillna(0) <= max_error_rate) & steps["rps"].notna()]
    if ok.empty:
        return None
    ranked = ok["goodput_rps" if "goodput_rps" in ok.columns else "rps"]
    best = ok.loc[[ranked.idxmax()]].iloc[0]
    point = {k: _plain(best.get(k)) for k in ("users", "rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms")}
    point["source"] = f"highest-throughput step with error rate <= {max_error_rate:.0%} (no plateau in summary.json)"
    point["stable"] = None
    point["step"] = int(best["step"])
    return point


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if np.isnan(value) else float(value)
    return value


def errors_by_code(summary: dict[str, Any], failures: pd.DataFrame | None) -> dict[str, int]:
    """{error code or message: count}: summary.json's totals.errors, else Locust's failures table."""
    errors = (summary.get("totals") or {}).get("errors")
    if isinstance(errors, dict) and errors:
        return {str(k): int(v) for k, v in sorted(errors.items(), key=lambda kv: -kv[1])}
    if failures is None or failures.empty:
        return {}
    grouped = failures.groupby(failures["error"].fillna("unknown"))["occurrences"].sum()
    return {str(k): int(v) for k, v in grouped.sort_values(ascending=False).items()}
