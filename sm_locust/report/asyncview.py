"""The report's "Asynchronous inference" section, for a run that waited for async results
(summary.json `async`; docs/async.md).

What the client saw (accepted, results, failures, the time to result with its interval, awaited at
the stop), the async search's steps when `--shape async` ran (`async_search`), the client-side
backlog per second beside the endpoint's own queue metrics as CloudWatch has them per minute
(`cw_*` columns of the merged seconds, report/metrics.py ASYNC_METRICS), and those metrics per step.
`async_view` is pure (summary, merged seconds, steps -> `AsyncView`); `async_section` writes the HTML.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sm_locust.record.model import Async, AsyncSearch, Interval, Intervals, Record, Summary, json_field
from sm_locust.report.metrics import ASYNC_METRICS
from sm_locust.sanitize import page_text
from sm_locust.util.formatting import MISSING, compact, latency, number

FIG_ID = "fig-async-backlog"
BACKLOG_AVG = "cw_ApproximateBacklogSize_avg_count"
BACKLOG_MAX = "cw_ApproximateBacklogSize_max_count"
AGE_MAX = "cw_ApproximateAgeOfOldestRequest_max_s"
# the per-step table: (column, label, digits)
STEP_COLUMNS = (
    (BACKLOG_AVG, "ApproximateBacklogSize avg", 1), (BACKLOG_MAX, "ApproximateBacklogSize max", 0),
    ("cw_ApproximateBacklogSizePerInstance_max_count", "per instance max", 1),
    (AGE_MAX, "ApproximateAgeOfOldestRequest max s", 1),
    ("cw_HasBacklogWithoutCapacity_max_count", "HasBacklogWithoutCapacity max", 0),
    ("cw_TimeInBacklog_avg_ms", "TimeInBacklog avg ms", 0),
    ("cw_TotalProcessingTime_avg_ms", "TotalProcessingTime avg ms", 0),
    ("cw_InvocationsProcessed_sum_count", "InvocationsProcessed", 0),
    ("cw_InvocationFailures_sum_count", "InvocationFailures", 0),
)
ASYNC_COLUMNS = frozenset(c for m in ASYNC_METRICS for c in m.columns())


@dataclass(frozen=True)
class AsyncView:
    """What the section shows: summary.json's `async` and `async_search`, the backlog over time
    (client per second, CloudWatch per minute) and the CloudWatch figures per step."""

    figures: Async
    search: AsyncSearch | None
    client_backlog: pd.DataFrame  # time, backlog
    endpoint: pd.DataFrame  # time + the async cw_ columns present, one row per minute with data
    steps: pd.DataFrame  # step + the async cw_ columns present


def async_view(summary: Mapping[str, object], seconds: pd.DataFrame, steps: pd.DataFrame) -> AsyncView | None:
    """The section's data, or None for a run without `async`."""
    record = Summary.of(summary)
    figures = record.async_
    if figures is None:
        return None
    started = pd.to_datetime(record.started_at or "", utc=True, errors="coerce")
    series = list(figures.backlog or [])
    every = int(figures.backlog_every_s or 1)
    client = pd.DataFrame({"time": [started + pd.Timedelta(seconds=(i + 1) * every) for i in range(len(series))],
                           "backlog": series}) if series and not pd.isna(started) else pd.DataFrame()
    cw = [c for c in seconds.columns if c in ASYNC_COLUMNS] if "epoch_s" in seconds.columns else []
    endpoint = pd.DataFrame()
    if cw:
        part = seconds[["epoch_s", *cw]].dropna(how="all", subset=cw)
        minute = (part["epoch_s"] // 60 * 60).astype("int64")
        endpoint = part.groupby(minute)[cw].first().reset_index(names="minute_s")
        endpoint.insert(0, "time", pd.to_datetime(endpoint["minute_s"], unit="s", utc=True))
    step_cols = [c for c, _, _ in STEP_COLUMNS if c in steps.columns]
    per_step = steps[["step", *step_cols]] if step_cols and "step" in steps.columns else pd.DataFrame()
    return AsyncView(figures, record.async_search, client, endpoint, per_step)


@dataclass(frozen=True, kw_only=True)
class TimeToResult(Record):
    """`async.time_to_result`: the percentiles of the time from a call's acceptance to its result, with
    their 95 % intervals (record.asyncsummary writes it); read without judging."""

    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    ci95: Intervals | None = json_field("intervals?")

    def interval(self, name: str) -> Interval | None:
        """The 95 % interval of percentile `name` (`p50_ms`, ...) as recorded; None when none is."""
        return (self.ci95 or {}).get(name)


def _client_rows(figures: Async) -> list[tuple[str, str]]:
    ttr = TimeToResult.of(figures.time_to_result or {})
    ci = ttr.interval("p50_ms")
    interval = f" (95 % {latency(ci[0])}-{latency(ci[1], ' ms')})" if ci is not None else ""
    failed = figures.failed or {}
    names = ", ".join(f"{name} x{n}" for name, n in list(failed.items())[:3])
    return [
        ("accepted", number(figures.accepted, 0)),
        ("results", number(figures.results, 0)),
        ("failures", number(figures.failures, 0) + (f" ({names})" if names else "")),
        ("time to result p50", latency(ttr.p50_ms, " ms") + interval),
        ("time to result p95 / p99", f"{latency(ttr.p95_ms, ' ms')} / {latency(ttr.p99_ms, ' ms')}"),
        ("awaited at the stop", number(figures.awaited_at_stop, 0)),
        ("client-side backlog max", number(figures.backlog_max, 0)),
    ]


def _table(rows: list[tuple[str, str]], table_id: str) -> str:
    body = "".join(f"<tr><td>{page_text(k)}</td><td>{page_text(v)}</td></tr>" for k, v in rows)
    return f'<table id="{table_id}">{body}</table>'


def _interval(ci: tuple[float, float] | None, digits: int) -> str:
    return MISSING if ci is None else f"{number(ci[0], digits)} to {number(ci[1], digits)}"


def _search_table(search: AsyncSearch) -> str:
    slo = search.time_to_result_slo_ms
    pct = compact(search.slo_percentile)
    head = ("<tr><th>rate req/s</th><th>backlog slope /s</th><th>95 % interval</th><th>backlog</th>"
            "<th>at the end</th>" + ("" if slo is None else f"<th>p{page_text(pct)} time to result ms</th>"
                                     "<th>95 % interval</th><th>awaited past the SLO</th><th>SLO</th>") + "</tr>")
    rows = []
    for step in search.steps:
        cells = (f"<td>{compact(step.rate_rps)}</td><td>{number(step.backlog_slope_per_s, 2)}</td>"
                 f"<td>{page_text(_interval(step.backlog_slope_ci95, 2))}</td>"
                 f"<td>{page_text(str(step.backlog))}</td><td>{number(step.backlog_last, 0)}</td>")
        if slo is not None:
            cells += (f"<td>{number(step.time_to_result_ms, 0)}</td>"
                      f"<td>{page_text(_interval(step.time_to_result_ci95, 0))}</td>"
                      f"<td>{number(step.awaited, 0)}</td><td>{page_text(step.slo or MISSING)}</td>")
        rows.append(f"<tr>{cells}</tr>")
    bracket = (f"capacity at least {compact(search.capacity_rps)} req/s, below "
               f"{compact(search.grows_at_rps or search.slo_breach_at_rps)} req/s")
    if slo is not None:
        bracket += f" (time-to-result SLO p{pct} <= {compact(slo)} ms)"
        if search.verdict == "INCONCLUSIVE":
            bracket += f"; INCONCLUSIVE: {search.inconclusive_reason or ''}"
    return (f"<h3>Capacity search</h3><p>{page_text(bracket)}; {page_text(search.stop_reason or '')}</p>"
            f'<table id="async-search">{head}{"".join(rows)}</table>')


def _steps_table(steps: pd.DataFrame) -> str:
    cols = [(c, label, digits) for c, label, digits in STEP_COLUMNS if c in steps.columns]
    head = "<tr><th>step</th>" + "".join(f"<th>{page_text(label)}</th>" for _, label, _ in cols) + "</tr>"
    body = "".join("<tr><td>" + number(row["step"], 0) + "</td>"
                   + "".join(f"<td>{number(row[c], d)}</td>" for c, _, d in cols) + "</tr>"
                   for _, row in steps.iterrows())
    return f'<h3>The endpoint\'s queue per step (CloudWatch)</h3><table id="async-steps">{head}{body}</table>'


def fig_backlog(view: AsyncView, div: Callable[[Any, str], str], missing: Callable[[str, str, str], str]) -> str:
    if view.client_backlog.empty and view.endpoint.empty:
        return missing(FIG_ID, "Backlog over time", "no backlog series in summary.json and no CloudWatch "
                       "ApproximateBacklogSize for the run")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    if not view.client_backlog.empty:
        fig.add_trace(go.Scatter(x=view.client_backlog["time"], y=view.client_backlog["backlog"], mode="lines",
                                 name="client: accepted, result not seen (per second)", line={"shape": "hv"}),
                      secondary_y=False)
    for col, name in ((BACKLOG_AVG, "ApproximateBacklogSize average (CloudWatch, per minute)"),
                      (BACKLOG_MAX, "ApproximateBacklogSize maximum (CloudWatch, per minute)")):
        if col in view.endpoint.columns:
            fig.add_trace(go.Scatter(x=view.endpoint["time"], y=view.endpoint[col], mode="lines+markers", name=name,
                                     line={"dash": "dot"}), secondary_y=False)
    if AGE_MAX in view.endpoint.columns:
        fig.add_trace(go.Scatter(x=view.endpoint["time"], y=view.endpoint[AGE_MAX], mode="lines+markers",
                                 name="ApproximateAgeOfOldestRequest maximum s (CloudWatch)", line={"dash": "dash"}),
                      secondary_y=True)
    fig.update_layout(title="Backlog over time (UTC)")
    fig.update_yaxes(title_text="requests", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="seconds", rangemode="tozero", secondary_y=True)
    return div(fig, FIG_ID)


def async_section(view: AsyncView | None, div: Callable[[Any, str], str],
                  missing: Callable[[str, str, str], str]) -> str:
    """The "Asynchronous inference" section, or '' for a run without `async`."""
    if view is None:
        return ""
    parts = ["<h2>Asynchronous inference</h2><p><small>Each call waited for its result (summary.json async); "
             "the endpoint's own queue is CloudWatch's, per minute, when the report fetched it.</small></p>",
             _table(_client_rows(view.figures), "async-client")]
    if view.search is not None:
        parts.append(_search_table(view.search))
    parts.append(fig_backlog(view, div, missing))
    if not view.steps.empty:
        parts.append(_steps_table(view.steps))
    return "".join(parts)
