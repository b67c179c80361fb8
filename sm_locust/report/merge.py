"""Pure compute: put the client's and the endpoint's view of a run on one UTC time axis.

`per_second` builds one row per second; `attach_metrics` writes each CloudWatch minute on its
seconds (second T in bucket `T - T % period`), a minute's Sum spread over the seconds the run covered
(`bucket_share`). `step_records` reduces each step to one record with time-weighted CloudWatch means
and the latency decomposition client avg - ModelLatency - OverheadLatency = network + client time,
the client's average taken over the same whole minutes and the CloudWatch means weighted by
invocations, so like is compared with like (docs/report.md). No I/O: DataFrames and dicts in and out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from sm_locust.measure.looplag import LoopLag
from sm_locust.record.model import Intervals, JsonObject, Step, Summary, SustainablePoint, Verdict
from sm_locust.record.summary import iso
from sm_locust.report.metrics import STAT_ABBREV
from sm_locust.util.formatting import is_missing, number, with_interval

LOCUST_SECOND_COLUMNS = [
    "users", "rps", "failures_per_s", "requests", "failures", "avg_ms",
    "p50_ms", "p66_ms", "p75_ms", "p80_ms", "p90_ms", "p95_ms", "p98_ms", "p99_ms", "p999_ms", "p100_ms",
    "total_requests", "total_failures",
]

MAX_ERROR_RATE = 0.01  # a step with more failures than this is not "sustainable"


def parse_time(value: object) -> float | None:
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


@dataclass(frozen=True)
class Span:
    """A step's place on the time axis: users, start and end (epoch s), its number (1-based; None: its
    place in the list), where it came from ("summary" or "history") and summary.json's record of it."""

    users: float | None
    start_s: float
    end_s: float
    step: int | None = None
    source: str = "history"
    summary: Step | None = None


def step_spans(summary: Summary | JsonObject, seconds: pd.DataFrame) -> list[Span]:
    """Steps as Spans: summary.json's if it has them (`step` is the
    record's place in summary.json's list, 1-based, as every surface numbers steps), else runs of one
    user count in the history (ramps included; good enough for a run without a summary)."""
    spans: list[Span] = []
    for index, step in enumerate(Summary.of(summary).steps or (), start=1):
        start, end = parse_time(step.start), parse_time(step.end)
        if start is None or end is None or end <= start:
            continue
        spans.append(Span(step.users, start, end, step=index, source="summary", summary=step))
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
        spans.append(Span(int(values[a]), float(epochs[a]), float(epochs[b - 1] + 1), step=len(spans) + 1))
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


def decomposition(seconds: pd.DataFrame, rows: slice, period: int = 60) -> dict[str, float | str]:
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


# A step's client figures that summary.json holds (one definition: `measure.steady.measure_step` over
# the step's steady window): the report shows these, never a recomputation from Locust's history.
SUMMARY_STEP_FIGURES = ("requests", "failures", "successes", "rps", "goodput_rps", "error_rate", "p50_ms", "p95_ms",
                        "p99_ms", "steady_s", "stable", "client_cpu_pct", "client_wait_pct", "client_bound",
                        "client_bound_reason")


def loop_lag_columns(record: Step) -> dict[str, object]:
    """A step record's loop lag as columns (`loop_lag_p99_ms`, `loop_lag_max_ms`, `throttled_periods`)
    and `client_flag` ("client-bound" when the step's figures are the load generator's); nothing
    for a record from before loop lag."""
    lag = LoopLag.from_json(record.loop_lag)
    out: dict[str, object] = {"client_flag": "client-bound" if record.client_bound else None}
    if lag is not None:
        out.update(loop_lag_p99_ms=lag.p99_ms, loop_lag_max_ms=lag.max_ms, throttled_periods=lag.throttled_periods)
    return out


def interval_columns(ci95: Intervals | None) -> dict[str, float]:
    """summary.json's `ci95` object as flat columns: `rps_ci95_low`, `rps_ci95_high`, ... (NaN when null)."""
    out: dict[str, float] = {}
    for key, value in (ci95 or {}).items():
        low, high = value if value is not None else (float("nan"), float("nan"))
        out[f"{key}_ci95_low"], out[f"{key}_ci95_high"] = low, high
    return out


def step_records(seconds: pd.DataFrame, spans: list[Span], period: int = 60) -> pd.DataFrame:
    """One record per step: the client's figures as summary.json records them (the step's steady
    window, with their 95 % intervals); the endpoint's (CloudWatch) over the step's window in the
    merged seconds (start <= epoch_s < end). A step without a summary.json record (a run folder
    without one) gets its figures from the history's seconds."""
    epochs = seconds["epoch_s"].to_numpy()
    cw_cols = [c for c in seconds.columns if c.startswith("cw_")]
    share = bucket_share(epochs, period) if len(epochs) else np.array([])
    rows = []
    for i, span in enumerate(spans, start=1):
        a = int(np.searchsorted(epochs, span.start_s, side="left"))
        b = int(np.searchsorted(epochs, span.end_s, side="left"))
        part = seconds.iloc[a:b]
        duration = span.end_s - span.start_s
        given = span.summary

        def col(name: str, part: pd.DataFrame = part) -> np.ndarray:
            return part[name].to_numpy(dtype="float64") if name in part.columns else np.array([])

        row: dict[str, Any] = {  # Any: a frame's row (numbers, text, flags)
            "step": span.step if span.step is not None else i,
            "users": span.users,
            "start": iso(span.start_s, "seconds"),
            "end": iso(span.end_s, "seconds"),
            "duration_s": round(duration, 3),
            "seconds_with_data": int(np.count_nonzero(~np.isnan(col("requests")))) if len(col("requests")) else 0,
        }
        if given is not None:
            row.update({key: getattr(given, key) for key in SUMMARY_STEP_FIGURES if given.has(key)})
            if given.has("target_rate"):
                row["target_rate"] = given.target_rate
            row.update(interval_columns(given.ci95))
            row.update(loop_lag_columns(given))
        # what the record lacks (a run folder without summary.json steps, or an older summary.json):
        # the history's seconds over the whole span
        if row.get("requests") is None:
            row["requests"] = _nan(np.sum, col("requests")) if len(col("requests")) else float("nan")
        if row.get("failures") is None:
            row["failures"] = _nan(np.sum, col("failures")) if len(col("failures")) else float("nan")
        requests, failures = row["requests"], row["failures"]
        if row.get("rps") is None:
            row["rps"] = requests / duration if duration > 0 and not _isnan(requests) else float("nan")
        if row.get("error_rate") is None:
            row["error_rate"] = (failures / requests) if requests and not _isnan(requests) and not _isnan(failures) \
                else float("nan")
        for p in ("p50_ms", "p95_ms", "p99_ms"):  # the history's are Locust's ~10-s windows
            if row.get(p) is None:
                row[p] = _nan(np.median, col(p))
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


def _isnan(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# ------------------------------------------------------------------------------------- findings


def sustainable_point(summary: Summary | JsonObject, steps: pd.DataFrame,
                      max_error_rate: float = MAX_ERROR_RATE) -> SustainablePoint | None:
    """The max sustainable throughput: summary.json's plateau if the run found one, else the step
    with the highest goodput (successful invocations/s; rps without that column) among steps with
    error rate <= max_error_rate.

    Every figure of the point is ONE step's own (its summary.json record, the row of `steps` with
    that step number): the knee's rate, users and percentiles come from the knee step
    (`plateau.knee_step`), the capacity and its interval from the capacity step
    (`plateau.capacity_step`), each named by its number. A summary.json written before those
    indices existed is matched by the plateau's user count, as before."""
    record = Summary.of(summary)
    plateau = record.plateau
    if plateau is not None and plateau.rps:
        knee: pd.Series | None = _row_of(steps, plateau.knee_step, plateau.users)
        capacity: pd.Series | None = _row_of(steps, plateau.capacity_step, None)
        point = _figures(knee) if knee is not None else _figures(plateau.to_json())
        point["source"] = "plateau found during the run" + (f" ({plateau.reason})" if plateau.reason else "")
        point["stable"] = plateau.stable
        point["capacity_rps"] = plateau.capacity_rps
        point["capacity_ci95"] = plateau.capacity_ci95
        point["inconclusive"], point["inconclusive_reason"] = inconclusive_of(record)
        if knee is not None:
            point["step"] = int(knee["step"])
            _add_intervals(point, knee)
        if capacity is not None:
            point["capacity_step"] = int(capacity["step"])
            point["capacity_users"] = _plain(capacity.get("users"))
            point["capacity_p95_ms"] = _plain(capacity.get("p95_ms"))
        return SustainablePoint.make(**point)
    if steps.empty or "rps" not in steps.columns:
        return None
    ok = steps[(steps["error_rate"].fillna(0) <= max_error_rate) & steps["rps"].notna()]
    if ok.empty:
        return None
    ranked = ok["goodput_rps" if "goodput_rps" in ok.columns else "rps"]
    best = ok.loc[[ranked.idxmax()]].iloc[0]
    point = _figures(best)
    point["source"] = f"highest-throughput step with error rate <= {max_error_rate:.0%} (no plateau in summary.json)"
    point["stable"] = None
    point["step"] = int(best["step"])
    _add_intervals(point, best)
    point["inconclusive"], point["inconclusive_reason"] = inconclusive_of(record)
    return SustainablePoint.make(**point)


def _figures(row: Mapping[str, object] | pd.Series) -> dict[str, object]:
    """A step's (or the plateau's) users, rates and percentiles, as the point's first keys."""
    return {"users": _plain(row.get("users")), "rps": _plain(row.get("rps")),
            "goodput_rps": _plain(row.get("goodput_rps")), "p50_ms": _plain(row.get("p50_ms")),
            "p95_ms": _plain(row.get("p95_ms")), "p99_ms": _plain(row.get("p99_ms"))}


def inconclusive_of(summary: Summary) -> tuple[bool, str | None]:
    """(inconclusive, the reason) from summary.json's `verdict` (record.summary.run_verdict), else (an
    older summary.json) from its plateau."""
    verdict: Verdict | None = summary.verdict
    if verdict is not None and verdict.status:
        return verdict.status == "inconclusive", verdict.reason
    plateau = summary.plateau
    if plateau is None:
        return False, None
    bound = bool(plateau.inconclusive or plateau.client_bound)
    return bound, (plateau.inconclusive_reason or plateau.client_reason) if bound else None


def describe_point(point: SustainablePoint) -> dict[str, str]:
    """The point's figures in words, each naming its step and quoting that step's own figures, with
    their 95 % intervals: {"capacity": ..., "knee": ..., "latency": ..., "verdict": ...} (keys only for
    what the point has). One wording for the report's page and `sm-locust report`'s lines."""
    out: dict[str, str] = {}
    capacity = point.capacity_rps
    if capacity is not None and not is_missing(capacity):
        where = ""
        if point.capacity_step is not None:
            where = f" (step {point.capacity_step}: {number(point.capacity_users, 0)} users, p95 " \
                    f"{number(point.capacity_p95_ms, 0)} ms)"
        out["capacity"] = with_interval(capacity, point.capacity_ci95, " req/s", 1) + where
    step = f"step {point.step}: " if point.step is not None else ""
    goodput, rps = point.goodput_rps, point.rps
    knee = f"{step}{with_interval(point.rps, point.rps_ci95, ' req/s', 1)} " \
           f"at {number(point.users, 0)} users"
    if goodput is not None and rps is not None and not is_missing(goodput) and abs(goodput - rps) >= 0.05:
        knee += f" (goodput {with_interval(goodput, point.goodput_rps_ci95, ' req/s', 1)})"
    out["knee"] = knee
    latencies = ((point.p50_ms, point.p50_ms_ci95), (point.p95_ms, point.p95_ms_ci95),
                 (point.p99_ms, point.p99_ms_ci95))
    out["latency"] = " / ".join(with_interval(value, interval) for value, interval in latencies) + " ms"
    if point.inconclusive:
        out["verdict"] = f"INCONCLUSIVE: {point.inconclusive_reason}"
    return out


def _row_of(steps: pd.DataFrame, index: int | None, users: float | None) -> pd.Series | None:
    """The step row of summary.json's step `index` (0-based), or (no index: an older summary.json) the
    last step run at `users`; None when there is none."""
    if steps.empty or "step" not in steps.columns:
        return None
    if isinstance(index, int) and not isinstance(index, bool):
        match = steps[steps["step"] == index + 1]
    elif users is not None and "users" in steps.columns:
        match = steps[steps["users"] == users]
    else:
        return None
    return match.iloc[-1] if len(match) else None


def _add_intervals(point: dict[str, object], row: Mapping[str, object] | pd.Series) -> None:
    """The step row's `<figure>_ci95` lists ([low, high] or None) for the point's figures."""
    point["rps_ci95"] = _pair(row, "rps")
    point["goodput_rps_ci95"] = _pair(row, "goodput_rps")
    point["p50_ms_ci95"] = _pair(row, "p50_ms")
    point["p95_ms_ci95"] = _pair(row, "p95_ms")
    point["p99_ms_ci95"] = _pair(row, "p99_ms")


def _pair(row: Mapping[str, object] | pd.Series, key: str) -> list[float] | None:
    low, high = _plain(row.get(f"{key}_ci95_low")), _plain(row.get(f"{key}_ci95_high"))
    return [low, high] if low is not None and high is not None else None


def _plain(value: object) -> float | None:
    """A frame's figure as JSON holds it: a whole number stays whole, NaN is None."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    return value if isinstance(value, int) else None


def errors_by_code(summary: Summary | JsonObject, failures: pd.DataFrame | None) -> dict[str, int]:
    """{error code or message: count}: summary.json's totals.errors, else Locust's failures table."""
    totals = Summary.of(summary).totals
    errors = totals.errors if totals is not None else None
    if errors:
        return {str(k): int(v) for k, v in sorted(errors.items(), key=lambda kv: -kv[1])}
    if failures is None or failures.empty:
        return {}
    grouped = failures.groupby(failures["error"].fillna("unknown"))["occurrences"].sum()
    return {str(k): int(v) for k, v in grouped.sort_values(ascending=False).items()}
