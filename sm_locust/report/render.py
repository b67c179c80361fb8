"""Render a report model as ONE self-contained HTML file.

The report is often opened later, on a laptop on a plane, or attached to a ticket: so plotly.js is
inlined once (about 4.8 MB) and nothing is fetched from the network. Each chart is a plotly div
with a stable id (`fig-throughput`, `fig-latency-users`, `fig-latency-time`, `fig-endpoint-load`,
`fig-errors`, `fig-decomposition`) so tests and users can find it. Charts whose data is missing
are replaced by a sentence saying what is missing, and the "Gaps and warnings" section lists
every gap the readers, CloudWatch and cost steps wrote down.
`figures(model)` returns the same charts as plotly Figure objects (the Python API's
`RunResult.figures()`): each figure function takes the writer of a drawn chart and of a missing one.

Per-second series longer than MAX_POINTS are averaged into coarser buckets for drawing only (the
CSV keeps every second), with the buckets' min / max drawn as a band around throughput and p95, so
a week-long run's spikes stay visible. A run longer than an hour gets a "Per hour" section: one row
per hour (`report.hourly`) and a chart of its throughput and latency, where drift shows. Requests
are logical invocations; goodput (successful invocations per second) is drawn and tabled beside
every attempt rate.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from sm_locust.record.model import SustainablePoint, Totals, percentile_key
from sm_locust.report.asyncview import async_section
from sm_locust.report.autoscaling import AutoscalingView, autoscaling_figure, autoscaling_rows
from sm_locust.report.cost import Cost
from sm_locust.report.llm import STEP_COLUMNS as LLM_STEP_COLUMNS
from sm_locust.report.llm import LlmView, llm_figures, llm_rows, llm_step_columns
from sm_locust.report.loadaxis import VISIT_NOTE, by_load, integer_axis, load_trace, out_of_order, slo_line
from sm_locust.report.merge import describe_point
from sm_locust.report.policy import RateSlo
from sm_locust.report.slos import RunSlos
from sm_locust.report.targets import TargetView, mix_rows, targets_section
from sm_locust.sanitize import clean, page_text
from sm_locust.util.formatting import MISSING, is_missing, money, number, percent, with_interval

MAX_POINTS = 3000
FIG_IDS = ("fig-throughput", "fig-throughput-time", "fig-latency-users", "fig-latency-time",
           "fig-endpoint-load", "fig-errors", "fig-decomposition")
HOURLY_FIG_ID = "fig-hourly"  # runs longer than an hour, in the "Per hour" section


@dataclass(frozen=True)
class RateView:
    """A run whose load was rate phases (report/policy.py): the SLO it is judged by, the watched
    policy's verdict rows (empty when no scaling was watched), and why it has no per-instance figure
    (None when it has one)."""

    slo: RateSlo
    policy: list[tuple[str, str]] = field(default_factory=list)
    no_point_reason: str | None = None


@dataclass
class ReportModel:
    """Everything the page shows; built by the pipeline, plain data only."""

    title: str
    run: dict[str, str | None]  # endpoint, started_at, ended_at, run_dir, variant, instance_type ...
    steps: pd.DataFrame
    seconds: pd.DataFrame  # merged per-second frame
    point: SustainablePoint | None
    cost: Cost
    errors: dict[str, int]
    gaps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    generated_at: str = ""
    totals: Totals = field(default_factory=Totals)  # summary.json's totals (invocations, goodput, back-off)
    llm: LlmView | None = None  # when the run counted tokens
    hours: pd.DataFrame | None = None  # report.hourly.hourly_rows: one row per hour of the run
    targets: TargetView | None = None  # when requests named models or components
    autoscaling: AutoscalingView | None = None  # when the run watched an endpoint's scaling
    slos: RunSlos = field(default_factory=RunSlos)  # the run's SLO options
    rate: RateView | None = None  # a traffic or watched run: its policy verdict, and why no per-instance figure
    async_inference: Any = None  # report.asyncview.AsyncView when the run waited for async results

    @property
    def constant_load(self) -> bool:
        """One load level for the whole run (constant users): no knee to find, none to mark. Traffic
        phases (a watched autoscaling run) are not one level, whatever their user count."""
        if self.autoscaling is not None and self.autoscaling.phases:
            return False
        steps: pd.DataFrame = self.steps
        return steps.empty or "users" not in steps.columns or steps["users"].nunique() <= 1

    @property
    def slo_label(self) -> str:
        return f"p{self.slos.percentile:g} SLO"


# -------------------------------------------------------------------------------------- helpers


def _downsample(seconds: pd.DataFrame, columns: list[str], envelope: tuple[str, ...] = ()) -> pd.DataFrame:
    """At most MAX_POINTS rows to draw: buckets of k consecutive seconds averaged (NaN ignored); for
    the `envelope` columns also `<col>_min` / `<col>_max` per bucket (only when k > 1)."""
    cols = [c for c in columns if c in seconds.columns]
    n = len(seconds)
    k = math.ceil(n / MAX_POINTS) if n > MAX_POINTS else 1
    out = pd.DataFrame()
    if k == 1:
        out = seconds[["epoch_s", *cols]].copy()
    else:
        m = math.ceil(n / k)

        def buckets(column: str) -> np.ndarray:
            values = np.full(m * k, np.nan)
            values[:n] = seconds[column].to_numpy(dtype="float64")
            return values.reshape(m, k)

        with warnings.catch_warnings():  # a bucket with no data is NaN, which is what it should draw
            warnings.simplefilter("ignore", RuntimeWarning)
            out["epoch_s"] = np.round(np.nanmean(buckets("epoch_s"), axis=1))
            for c in cols:
                grid = buckets(c)
                out[c] = np.nanmean(grid, axis=1)
                if c in envelope:
                    out[f"{c}_min"] = np.nanmin(grid, axis=1)
                    out[f"{c}_max"] = np.nanmax(grid, axis=1)
    out["time"] = pd.to_datetime(out["epoch_s"], unit="s", utc=True).dt.tz_localize(None)
    out.attrs["bucket_s"] = k
    return out


def _band(fig, d: pd.DataFrame, column: str, name: str, **where) -> None:
    """The min / max of each drawn bucket as a shaded band behind `column` (long runs only)."""
    if f"{column}_max" not in d.columns:
        return
    group = f"band-{column}"
    fig.add_trace(go.Scatter(x=d["time"], y=d[f"{column}_max"], mode="lines", line={"width": 0}, hoverinfo="skip",
                             legendgroup=group, showlegend=False), **where)
    fig.add_trace(go.Scatter(x=d["time"], y=d[f"{column}_min"], mode="lines", line={"width": 0}, fill="tonexty",
                             fillcolor="rgba(99,110,250,0.18)", legendgroup=group, hoverinfo="skip",
                             name=f"{name} min-max per {d.attrs.get('bucket_s', 1)} s"), **where)


def _has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and bool(frame[column].notna().any())


def _style(fig, height: int = 420):
    """The report's look, on the page and in a notebook alike."""
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 30, "t": 50, "b": 50}, height=height,
                      legend={"orientation": "h", "y": -0.2})
    return fig


def _div(fig, div_id: str, height: int = 420) -> str:
    return _style(fig, height).to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                               config={"displaylogo": False, "responsive": True})


def _point_on(steps: pd.DataFrame, point: SustainablePoint | None, column: str) -> float | None:
    """`column` of the step the point names (where its marker sits on the drawn line), else None."""
    if point is None or point.step is None or steps.empty or column not in steps.columns:
        return None
    match = steps[steps["step"] == point.step]
    if not len(match) or is_missing(match.iloc[0][column]):
        return None
    return float(match.iloc[0][column])


def _over_slo(ordered: pd.DataFrame, m: ReportModel) -> pd.Series | None:
    """A mask of the steps whose SLO percentile was over the latency SLO (None: no SLO, no column)."""
    slo = m.slos.latency_slo_ms
    column = percentile_key(float(m.slos.percentile))
    if slo is None or is_missing(slo) or column not in ordered.columns:
        return None
    return ordered[column].astype(float) > float(slo)


def _visits(ordered: pd.DataFrame) -> pd.Series | None:
    """The steps' places in the run, for numbered markers, when they ran out of load order; else None."""
    return ordered["visit"] if out_of_order(ordered) else None


def _load_title(m: ReportModel, title: str) -> str:
    if m.constant_load and not m.steps.empty:
        return f"{title} (constant load: one level, no knee to find)"
    return f"{title} ({VISIT_NOTE})" if out_of_order(by_load(m.steps)) else title


def _missing(div_id: str, title: str, why: str) -> str:
    return (f'<div id="{div_id}" class="missing"><h3>{page_text(title)}</h3>'
            f"<p>Not drawn: {page_text(why)}</p></div>")


# What a figure function does with its chart, and with a chart it cannot draw: the page writes HTML
# (`_div`, `_missing`); `figures()` keeps the plotly Figure objects (the Python API's RunResult).
T = TypeVar("T")  # what the writers make: the page's HTML (`_div`, `_missing`), or the Figure kept (`figures`)
ChartWriter = Callable[..., T]  # (figure, div id, height=420)
MissingWriter = Callable[[str, str, str], T]


# -------------------------------------------------------------------------------------- figures


def fig_throughput(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    """Throughput vs users, joined by load (the order the steps ran numbered on the markers), the knee
    marked on the line it belongs to and the capacity as a line; nothing marked for a constant load."""
    s: pd.DataFrame = m.steps
    if s.empty or not _has(s, "rps"):
        return missing("fig-throughput", "Throughput vs users",
                       "no per-step data (summary.json steps or Locust history)")
    ordered = by_load(s)
    visits = _visits(ordered)
    # goodput is never above the attempt rate: a record whose goodput_rps says otherwise carries another
    # figure (a token-objective step's output tokens/s), so requests/s are drawn
    plausible = _has(ordered, "goodput_rps") and bool((ordered["goodput_rps"].fillna(0) <= ordered["rps"].fillna(0)
                                                       * 1.001 + 1e-9).all())
    main = "goodput_rps" if plausible else "rps"
    fig = go.Figure()
    fig.add_trace(load_trace(ordered["users"], ordered[main], "goodput (successful/s)" if main == "goodput_rps"
                             else "client rps (attempted)", visits))
    if main == "goodput_rps":
        fig.add_trace(go.Scatter(x=ordered["users"], y=ordered["rps"], mode="lines+markers",
                                 name="client rps (attempted)", line={"dash": "dot", "width": 1}))
    if _has(ordered, "cw_invocations_per_s"):
        fig.add_trace(go.Scatter(x=ordered["users"], y=ordered["cw_invocations_per_s"], mode="lines+markers",
                                 name="Invocations/s (CloudWatch, per-minute average over the step)",
                                 line={"dash": "dot"}))
    over = _over_slo(ordered, m)
    if over is not None and over.any():
        fig.add_trace(go.Scatter(x=ordered["users"][over], y=ordered[main][over], mode="markers",
                                 name=f"over the {m.slo_label}",
                                 marker={"size": 13, "symbol": "circle-open", "color": "crimson",
                                         "line": {"width": 2}}))
    knee_y = _point_on(s, m.point, main)
    knee_users = m.point.users if m.point is not None else None
    if m.point is not None and knee_users is not None and knee_y is not None and not m.constant_load:
        right_half = knee_users > (ordered["users"].min() + ordered["users"].max()) / 2
        fig.add_trace(go.Scatter(x=[knee_users], y=[knee_y], mode="markers+text", name="knee",
                                 marker={"size": 16, "symbol": "star", "color": "crimson"},
                                 text=[f"knee: {knee_y:.1f} req/s at {knee_users} users"],
                                 textposition="bottom left" if right_half else "bottom right"))
        capacity = m.point.capacity_rps
        if capacity is not None and not is_missing(capacity):
            fig.add_hline(y=capacity, line_dash="dot", line_color="crimson",
                          annotation_text=f"capacity {capacity:.1f} req/s",
                          annotation_position="top left")
    fig.update_layout(title=_load_title(m, "Throughput vs users"), xaxis_title="users", yaxis_title="requests/s")
    integer_axis(fig, ordered["users"])
    return div(fig, "fig-throughput")


def fig_throughput_time(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    if not _has(m.seconds, "rps"):
        return missing("fig-throughput-time", "Throughput and users vs time", "no Locust history")
    d = _downsample(m.seconds, ["rps", "goodput_rps", "failures_per_s", "users"], envelope=("rps",))
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    _band(fig, d, "rps", "requests/s", secondary_y=False)
    fig.add_trace(go.Scatter(x=d["time"], y=d["rps"], name="requests/s"), secondary_y=False)
    if _has(d, "goodput_rps"):
        fig.add_trace(go.Scatter(x=d["time"], y=d["goodput_rps"], name="goodput/s"), secondary_y=False)
    if _has(d, "failures_per_s"):
        fig.add_trace(go.Scatter(x=d["time"], y=d["failures_per_s"], name="failures/s"), secondary_y=False)
    if _has(d, "users"):
        fig.add_trace(go.Scatter(x=d["time"], y=d["users"], name="users", line={"shape": "hv", "dash": "dot"}),
                      secondary_y=True)
    fig.update_layout(title="Throughput and users vs time (UTC)")
    fig.update_yaxes(title_text="per second", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="users", secondary_y=True, rangemode="tozero")
    if _has(d, "users"):
        integer_axis(fig, d["users"], axis="y", secondary_y=True)
    return div(fig, "fig-throughput-time")


def fig_latency_users(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    """Each percentile once, joined by load; the SLO as a line when one was given; the knee's load."""
    s: pd.DataFrame = m.steps
    cols = [c for c in ("p50_ms", "p95_ms", "p99_ms", "client_avg_ms") if _has(s, c)]
    if s.empty or not cols:
        return missing("fig-latency-users", "Latency percentiles vs users", "no per-step latency")
    ordered = by_load(s)
    visits = _visits(ordered)
    fig = go.Figure()
    for c in cols:
        name = c.replace("_ms", "").replace("client_", "")
        fig.add_trace(load_trace(ordered["users"], ordered[c], name, visits if c == "p95_ms" else None))
    slo_line(fig, m.slos.latency_slo_ms, m.slo_label)
    if m.point is not None and m.point.users is not None and not m.constant_load:
        fig.add_vline(x=m.point.users, line_dash="dash", line_color="crimson", annotation_text="knee",
                      annotation_position="top")
    fig.update_layout(title=_load_title(m, "Client latency vs users"), xaxis_title="users", yaxis_title="ms")
    integer_axis(fig, ordered["users"])
    return div(fig, "fig-latency-users")


CW_STATS = {"avg": "average", "max": "maximum", "min": "minimum", "sum": "sum", "samples": "samples"}
CW_UNITS = {"pct": "%", "ms": "ms", "per_s": "/s"}
_CW_COLUMN = re.compile(r"^cw_(?P<metric>[A-Za-z0-9]+)_(?P<stat>avg|max|min|sum|samples)_(?P<unit>\w+)$")


def series_label(column: str) -> str:
    """A chart legend for a merged column: `cw_CPUUtilization_avg_pct` -> 'CPUUtilization average %
    (CloudWatch, per minute)': CloudWatch's figures are per-minute values, whatever the axis steps
    by; other columns as they are, without the unit suffix."""
    match = _CW_COLUMN.match(column)
    if match is None:
        return column.removesuffix("_ms")
    unit = CW_UNITS.get(match["unit"], match["unit"])
    return f"{match['metric']} {CW_STATS[match['stat']]} {unit} (CloudWatch, per minute)"


def fig_latency_time(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    cols = [c for c in ("p50_ms", "p95_ms", "p99_ms", "avg_ms", "cw_ModelLatency_avg_ms", "cw_OverheadLatency_avg_ms")
            if _has(m.seconds, c)]
    if not cols:
        return missing("fig-latency-time", "Latency vs time", "no Locust history")
    d = _downsample(m.seconds, cols, envelope=("p95_ms",))
    fig = go.Figure()
    _band(fig, d, "p95_ms", "p95")
    for c in cols:
        fig.add_trace(go.Scatter(x=d["time"], y=d[c], name=series_label(c),
                                 line={"dash": "dot"} if c.startswith("cw_") else {}))
    slo_line(fig, m.slos.latency_slo_ms, m.slo_label)
    fig.update_layout(title="Latency vs time (UTC; Locust percentiles are ~10 s windows)", yaxis_title="ms")
    return div(fig, "fig-latency-time")


def fig_endpoint_load(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    s: pd.DataFrame = m.steps
    pct = [c for c in ("cw_CPUUtilization_avg_pct", "cw_CPUUtilization_max_pct", "cw_MemoryUtilization_avg_pct",
                       "cw_MemoryUtilization_max_pct", "cw_GPUUtilization_avg_pct", "cw_GPUMemoryUtilization_avg_pct")
           if _has(s, c)]
    ms = [c for c in ("cw_ModelLatency_avg_ms", "cw_ModelLatency_max_ms") if _has(s, c)]
    if s.empty or not (pct or ms):
        return missing("fig-endpoint-load", "CPU, memory and ModelLatency vs load",
                       "no CloudWatch data for this run (see Gaps and warnings)")
    s = by_load(s)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for c in pct:
        fig.add_trace(go.Scatter(x=s["users"], y=s[c], mode="lines+markers", name=series_label(c)), secondary_y=False)
    for c in ms:
        fig.add_trace(go.Scatter(x=s["users"], y=s[c], mode="lines+markers", name=series_label(c),
                                 line={"dash": "dot"}), secondary_y=True)
    integer_axis(fig, s["users"])
    fig.update_layout(title="Endpoint CPU / memory (% summed over cores) and ModelLatency vs users")
    fig.update_xaxes(title_text="users")
    fig.update_yaxes(title_text="percent", secondary_y=False)
    fig.update_yaxes(title_text="ms", secondary_y=True)
    return div(fig, "fig-endpoint-load")


def fig_errors(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    if not m.errors:
        return missing("fig-errors", "Errors by code", "no failed requests were recorded")
    codes = list(m.errors)
    fig = go.Figure(go.Bar(x=[clean(c, 60) for c in codes], y=[m.errors[c] for c in codes], name="failures"))
    fig.update_layout(title="Errors by code", yaxis_title="requests")
    return div(fig, "fig-errors")


def fig_decomposition(m: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> T:
    s: pd.DataFrame = m.steps
    if s.empty or not _has(s, "model_latency_ms") or not _has(s, "client_avg_ms"):
        return missing("fig-decomposition", "Latency decomposition",
                       "needs CloudWatch ModelLatency and OverheadLatency next to Locust's latency")
    s = by_load(s)
    x = [f"{u} users (step {v})" for u, v in zip(s["users"], s["visit"], strict=True)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=s["model_latency_ms"], name="ModelLatency (model container)"))
    fig.add_trace(go.Bar(x=x, y=s["overhead_latency_ms"], name="OverheadLatency (SageMaker)"))
    fig.add_trace(go.Bar(x=x, y=s["network_client_ms"], name="network + client"))
    client = s["decomposition_client_avg_ms"] if _has(s, "decomposition_client_avg_ms") else s["client_avg_ms"]
    fig.add_trace(go.Scatter(x=x, y=client, mode="markers", name="client average (Locust), same minutes",
                             marker={"symbol": "diamond", "size": 10, "color": "black"}))
    fig.update_layout(barmode="relative", xaxis_title="users", yaxis_title="ms",
                      title="Where the average latency goes, per step (over the CloudWatch minutes each step touches)")
    return div(fig, "fig-decomposition")


def fig_hourly(h: pd.DataFrame, div: ChartWriter[T]) -> T:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    x = h["hour"]
    for c, name in (("rps", "requests/s"), ("goodput_rps", "goodput/s")):
        if _has(h, c):
            fig.add_trace(go.Scatter(x=x, y=h[c], mode="lines+markers", name=name), secondary_y=False)
    for c in ("p50_ms", "p95_ms", "p99_ms", "cw_ModelLatency_avg_ms"):
        if _has(h, c):
            fig.add_trace(go.Scatter(x=x, y=h[c], mode="lines+markers", name=c, line={"dash": "dot"}), secondary_y=True)
    fig.update_layout(title="Per hour: throughput and latency (drift shows here)")
    fig.update_xaxes(title_text="hour of the run")
    fig.update_yaxes(title_text="per second", secondary_y=False)
    fig.update_yaxes(title_text="ms", secondary_y=True)
    return div(fig, HOURLY_FIG_ID)


# ---------------------------------------------------------------------------------------- tables


def rate_rows(m: ReportModel) -> list[tuple[str, str]]:
    """A traffic run's per-instance rows: the SLO-holding step's figures per instance, or the reason
    there are none (no sustainable throughput, autoscaling target or instances needed from a step
    that broke the SLO)."""
    p, c = m.point, m.cost or {}
    if m.rate is None or m.rate.no_point_reason or p is None:
        return [("Per-instance figures", (m.rate.no_point_reason if m.rate else None) or MISSING)]
    instances = p.instances or 1
    rows = [("Most goodput per instance within the SLO",
             f"{number(c.get('rps_per_instance'), 1, ' req/s')} per instance (step {p.step}: "
             f"{number(p.goodput_rps, 1, ' req/s')} over {instances} instance{'s' if instances != 1 else ''}, "
             f"p95 {number(p.p95_ms, 0, ' ms')})"),
            ("How it was found", str(p.source or MISSING)),
            ("Autoscaling target (SageMakerVariantInvocationsPerInstance)",
             f"{number(c.get('autoscaling_target_invocations_per_instance'), 0)} per minute "
             f"(= {number(c.get('rps_per_instance'))} rps/instance x safety factor {c.get('safety_factor')} x 60)")]
    if c.get("target_rps"):
        rows.append((f"Instances needed for {number(c['target_rps'], 0)} rps",
                     f"{number(c.get('instances_needed'), 0)} with safety factor {c.get('safety_factor')} "
                     f"({number(c.get('instances_needed_no_headroom'), 0)} with no headroom)"))
    return rows


def summary_rows(m: ReportModel) -> list[tuple[str, str]]:
    if m.rate is not None:
        return rate_rows(m) + whole_run_rows(m)
    p = m.point
    c = m.cost or {}
    words = describe_point(p) if p is not None else {}
    knee = words.get("knee", MISSING)
    if m.constant_load and p is not None:
        headline = [(f"Throughput (constant load: {number(p.users, 0)} users, no knee to find)", knee)]
    elif "capacity" in words:  # the plateau search's verdict: what it sustains, and where it starts
        headline = [("Capacity (best stable goodput at or beyond the knee)", words["capacity"]),
                    ("Knee (least load within 5 % of the plateau)", knee)]
    else:
        headline = [("Max sustainable throughput", knee)]
    if "verdict" in words:  # the load generator was the bottleneck where it decides the answer: say so first
        headline.insert(0, ("Verdict", words["verdict"]))
    rows = [
        *headline,
        ("How it was found", (p.source if p is not None else None) or "no plateau and no clean step"),
        ("Request latency there, whole answers (p50 / p95 / p99)" if m.llm is not None else
         "Latency there (p50 / p95 / p99)", words.get("latency", MISSING)),
    ]
    step = _point_step(m)
    if step is not None:
        rows.append(("Error rate there", percent(step.get("error_rate"), 2)))
        if "cw_CPUUtilization_avg_pct" in step:
            rows.append(("Endpoint CPU there (avg / max, summed over vCPUs)",
                         f"{number(step.get('cw_CPUUtilization_avg_pct'))} / "
                         f"{number(step.get('cw_CPUUtilization_max_pct'))} %"))
        if "cw_MemoryUtilization_avg_pct" in step:
            rows.append(("Endpoint memory there (avg / max)",
                         f"{number(step.get('cw_MemoryUtilization_avg_pct'))} / "
                         f"{number(step.get('cw_MemoryUtilization_max_pct'))} %"))
        if not is_missing(step.get("model_latency_ms")):
            rows.append(("Latency decomposition there (client avg = model + overhead + network/client)",
                         decomposition_text(step)))
    rows += whole_run_rows(m)
    instance = f"{c.get('instance_count', 1)} x {c.get('instance_type') or 'unknown instance'}"
    rows += [
        ("$ per 1M inferences", f"{_money_interval(c.get('usd_per_million'), c.get('usd_per_million_ci95'))} "
                                f"({instance} at "
                                f"{_per_hour(c.get('price_per_hour_usd'))}, {c.get('price_source') or 'no price'})"),
        ("Transactions per hour", number(c.get("transactions_per_hour"), 0)),
        ("Autoscaling target (SageMakerVariantInvocationsPerInstance)",
         with_interval(c.get("autoscaling_target_invocations_per_instance"),
                       c.get("autoscaling_target_invocations_per_instance_ci95")) + " per minute "
         f"(= {number(c.get('rps_per_instance'))} rps/instance x safety factor {c.get('safety_factor')} x 60)"),
    ]
    if c.get("target_rps"):
        rows.append((f"Instances needed for {number(c['target_rps'], 0)} rps",
                     f"{with_interval(c.get('instances_needed'), c.get('instances_needed_ci95'))} with safety factor "
                     f"{c.get('safety_factor')} "
                     f"({number(c.get('instances_needed_no_headroom'), 0)} with no headroom)"))
    if c.get("serverless"):
        sv = c["serverless"]
        rows.append(("Serverless estimate", f"{money(sv['usd_per_million'])} per 1M ({sv['memory_mb']} MB, "
                                            f"{number(sv['duration_ms'])} ms, ${sv['usd_per_gb_second']}/GB-s)"))
    return rows


def whole_run_rows(m: ReportModel) -> list[tuple[str, str]]:
    t = m.totals
    if not t.has("requests") or t.requests is None:
        return []
    backoff = t.backoff or {}
    one_load = len(m.steps) <= 1  # a changing load: the steps' intervals, not the whole run's
    failures = t.failures if t.has("failures") else None
    return [("Whole run (invocations)",
             f"{number(t.requests, 0)} attempted, {number(failures, 0)} failed; "
             f"{with_interval(t.rps, t.interval('rps') if one_load else None, '', 1)} req/s attempted, goodput "
             f"{with_interval(t.goodput_rps, t.interval('goodput_rps') if one_load else None, '', 1)} req/s"
             + (f"; {backoff['count']:,} back-offs after connection errors ({number(backoff.get('seconds'))} s)"
                if backoff.get("count") else ""))]


def headline_rows(m: ReportModel) -> list[tuple[str, str]]:
    """The Summary table, led by the question the run asked: an LLM run by its tokens (output
    tokens/s, TTFT and ITL against their SLOs, $ per 1M output tokens), a multi-model run by its cache
    (hit rate, cold vs warm, models loaded), a watched autoscaling run by its scaling; then the
    request-level figures every run has."""
    policy = m.rate.policy if m.rate is not None else []
    return (policy + autoscaling_rows(m.autoscaling, verdict_shown=bool(policy)) + llm_rows(m.llm, m.cost, m.slos)
            + mix_rows(m.targets) + summary_rows(m))


# The Summary rows `sm-locust report` also prints as its closing lines: what the run and its flags asked.
CLOSING_ROWS = ("Policy verdict", "Scale-out reaction", "Peak instances", "Instance-hours", "Per-instance figures",
                "Most goodput per instance", "Verdict", "Capacity", "Knee", "Max sustainable", "Throughput (constant",
                "Output tokens/s", "Time to first token", "Inter-token latency", "$ per 1M", "Model cache hit rate",
                "Cold vs warm", "Models loaded", "Autoscaling target", "Instances needed", "seconds over the")


def closing_rows(m: ReportModel) -> list[tuple[str, str]]:
    """The headline rows worth a line in the terminal: the sustainable point, an LLM run's tokens
    against their SLOs and $ per 1M output tokens, a model mix's cache, $ per 1M inferences, the
    autoscaling target and the instances for --target-rps, seconds over the SLO of a watched run."""
    return [(label, value) for label, value in headline_rows(m) if label.startswith(CLOSING_ROWS)]


def _per_hour(price: object) -> str:
    """'$0.230/h', or 'no price per hour' (never 'n/a/h')."""
    return "no price per hour" if is_missing(price) else f"{money(price, 3)}/h"


def _money_interval(value: object, interval: object) -> str:
    """'$0.46 (±0.01)' / '$0.46 [0.44, 0.49]': the cost and its 95 % interval, or the cost alone."""
    return MISSING if is_missing(value) else "$" + with_interval(value, interval, "", 2)


def decomposition_text(step: dict[str, Any]) -> str:
    """`122.0 = 94.3 + 5.7 + 22.0 ms over 12:00:56-12:01:06 UTC ...`: the decomposition and why its
    client average is not the step's own (CloudWatch only knows whole minutes)."""
    window = ""
    if step.get("decomposition_start") and step.get("decomposition_end"):
        window = f" over {step['decomposition_start'][11:19]}-{step['decomposition_end'][11:19]} UTC"
    return (f"{number(step.get('decomposition_client_avg_ms', step.get('client_avg_ms')))} = "
            f"{number(step.get('model_latency_ms'))} + {number(step.get('overhead_latency_ms'))} + "
            f"{number(step.get('network_client_ms'))} ms{window}: CloudWatch reports whole minutes, so the client's "
            f"average is taken over the same minutes (the step's own: {number(step.get('client_avg_ms'))} ms)")


def _point_step(m: ReportModel) -> dict[str, object] | None:
    steps: pd.DataFrame = m.steps
    if m.point is None or steps.empty or m.point.step is None:
        return None
    match = steps[steps["step"] == m.point.step]
    return {str(k): v for k, v in match.iloc[0].to_dict().items()} if len(match) else None


STEP_TABLE_COLUMNS = [
    ("step", 0), ("users", 0), ("duration_s", 0), ("requests", 0), ("rps", 1), ("goodput_rps", 1), ("error_rate", 4),
    ("p50_ms", 1), ("p95_ms", 1), ("p99_ms", 1), ("client_avg_ms", 1), ("cw_ModelLatency_avg_ms", 1),
    ("cw_OverheadLatency_avg_ms", 1), ("network_client_ms", 1), ("cw_CPUUtilization_avg_pct", 1),
    ("cw_CPUUtilization_max_pct", 1), ("cw_MemoryUtilization_avg_pct", 1), ("loop_lag_p99_ms", 1),
    ("client_flag", 0),
]


STEP_HEADINGS = {"users": "users", "duration_s": "seconds", "requests": "requests", "rps": "req/s",
                 "goodput_rps": "goodput/s", "error_rate": "error rate", "p50_ms": "p50 ms", "p95_ms": "p95 ms",
                 "p99_ms": "p99 ms", "client_avg_ms": "avg ms", "cw_ModelLatency_avg_ms": "ModelLatency ms",
                 "cw_OverheadLatency_avg_ms": "OverheadLatency ms", "network_client_ms": "network + client ms",
                 "cw_CPUUtilization_avg_pct": "CPU avg %", "cw_CPUUtilization_max_pct": "CPU max %",
                 "cw_MemoryUtilization_avg_pct": "memory avg %", "output_tokens_per_s": "output tokens/s",
                 "ttft_p95_ms": "TTFT p95 ms", "itl_p95_ms": "ITL p95 ms", "loop_lag_p99_ms": "loop lag p99 ms",
                 "client_flag": "load generator"}


def step_cell(row: pd.Series, column: str, digits: int) -> str:
    """A step table's cell: the figure, with its 95 % interval where summary.json has one
    (`<column>_ci95_low` / `_high`, report.merge.interval_columns); the error rate in %."""
    if column == "error_rate":
        return percent(row[column], 2)
    if column == "client_flag":  # the step's figures are the load generator's (summary.json client_bound)
        return str(row[column]) if isinstance(row[column], str) else ""
    low, high = row.get(f"{column}_ci95_low"), row.get(f"{column}_ci95_high")
    if low is None or high is None or is_missing(low) or is_missing(high):
        return number(row[column], digits)
    return with_interval(row[column], [low, high], "", digits)


def steps_table(steps: pd.DataFrame, llm: LlmView | None = None) -> str:
    """The steps in the order they ran (# = that order), with the token columns of an LLM run."""
    if steps.empty:
        return "<p>No steps.</p>"
    tokens = llm_step_columns(llm, steps)
    frame = pd.concat([steps, tokens], axis=1) if len(tokens.columns) else steps
    cols = [(c, d) for c, d in STEP_TABLE_COLUMNS if _has(frame, c)]  # a column with nothing in it says nothing
    cols += [(c, d) for c, d in LLM_STEP_COLUMNS if _has(tokens, c)]
    head = "<th>#</th>" + "".join(f"<th>{page_text(STEP_HEADINGS.get(c, c))}</th>" for c, _ in cols)
    body = []
    for position, (_, row) in enumerate(frame.iterrows(), start=1):
        step = row["step"] if "step" in frame.columns and not is_missing(row.get("step")) else position
        cells = "".join(f"<td>{page_text(step_cell(row, c, d))}</td>" for c, d in cols)
        body.append(f"<tr><td>{number(step, 0)}</td>{cells}</tr>")
    return f'<table id="steps"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


HOURLY_TABLE_COLUMNS = [
    ("hour", 0), ("start", 0), ("users", 0), ("requests", 0), ("rps", 1), ("goodput_rps", 1), ("error_rate", 4),
    ("p50_ms", 1), ("p95_ms", 1), ("p99_ms", 1), ("errors", 0), ("client_cpu_pct", 0),
    ("cw_CPUUtilization_avg_pct", 1), ("cw_CPUUtilization_max_pct", 1), ("cw_MemoryUtilization_avg_pct", 1),
    ("cw_MemoryUtilization_max_pct", 1), ("cw_ModelLatency_avg_ms", 1),
]


def hourly_section(m: ReportModel) -> str:
    """The "Per hour" section (a chart and a table), for runs that span more than one hour; else ''."""
    h = m.hours
    if h is None or len(h) < 2:
        return ""
    cols = [(c, d) for c, d in HOURLY_TABLE_COLUMNS if c in h.columns]
    head = "".join(f"<th>{page_text(c)}</th>" for c, _ in cols)
    body = "".join("<tr>" + "".join(f"<td>{page_text(number(row[c], d))}</td>" for c, d in cols) + "</tr>"
                   for _, row in h.iterrows())
    return (f"<h2>Per hour</h2><p><small>One row per hour from the start of the run; counts and percentiles are "
            f"the recorder's own for the hour (summary.json hours) when the run has them; endpoint columns are "
            f"CloudWatch's minutes in the hour (mean, or max for *_max_*).</small></p>{fig_hourly(h, _div)}"
            f'<table id="hours"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


# ------------------------------------------------------------------------------------------ page

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
#summary td:first-child{text-align:left;font-weight:600}#summary td{text-align:left}
.missing{border:1px dashed #999;padding:1em;margin:1em 0;color:#555}
#gaps{background:#fff6e0;border:1px solid #e0b040;padding:.5em 1.5em}#gaps.none{background:#eef8ee;border-color:#6a6}
small{color:#666}
#steps{font-size:.82em}#steps th,#steps td{padding:3px 5px}#steps th{max-width:6.5em;overflow-wrap:break-word}
.scroll{overflow-x:auto;max-width:100%}#compare th{overflow-wrap:anywhere;max-width:14em}
#compare td:first-child,#compare th:first-child{text-align:left;font-weight:600;white-space:nowrap}
#compare td.change{color:#555;font-size:.9em}.left-out+ul{color:#555;font-size:.9em;margin-top:0}
"""


def charts(model: ReportModel, div: ChartWriter[T], missing: MissingWriter[T]) -> list[T]:
    """The page's charts in page order, each through `div` (drawn) or `missing` (not drawable)."""
    page: tuple[Callable[[ReportModel, ChartWriter[T], MissingWriter[T]], T], ...] = (
        fig_throughput, fig_throughput_time, fig_latency_users, fig_latency_time, fig_endpoint_load, fig_decomposition,
        fig_errors)
    if model.rate is not None:  # rate phases: over time (the autoscaling figure draws the phases), never vs users
        page = (fig_throughput_time, fig_latency_time, fig_decomposition, fig_errors)
    knee_users = None if model.constant_load or model.point is None else model.point.users
    tokens = llm_figures(model.llm, knee_users, div, missing, model.slos)
    # the run's own question first: an LLM run's tokens, a watched run's scaling
    return [*autoscaling_figure(model.autoscaling, div, missing), *tokens,
            *(chart(model, div, missing) for chart in page)]


def figures(model: ReportModel) -> dict[str, go.Figure]:
    """The page's charts as plotly Figure objects by their div id (`fig-throughput`, ...; the per-hour
    chart as `fig-hourly` for runs longer than an hour); charts without data are left out."""
    drawn: dict[str, go.Figure] = {}

    def keep(fig, div_id: str, height: int = 420) -> None:
        drawn[div_id] = _style(fig, height)

    charts(model, keep, lambda *_: None)
    if model.hours is not None and len(model.hours) >= 2:
        fig_hourly(model.hours, keep)
    return drawn


def render_html(model: ReportModel) -> str:
    """The complete page as a string (plotly.js inline)."""
    run = model.run
    info = " &middot; ".join(page_text(f"{k}: {v}") for k, v in run.items() if v not in (None, ""))
    gaps_items = "".join(f"<li>{page_text(g)}</li>" for g in model.gaps)
    notes_items = "".join(f"<li>{page_text(n)}</li>" for n in model.notes)
    if model.gaps:
        gaps_html = f'<section id="gaps"><h2>Gaps and warnings</h2><ul>{gaps_items}</ul>'
    else:
        gaps_html = '<section id="gaps" class="none"><h2>Gaps and warnings</h2><p>None: all data present.</p>'
    if notes_items:
        gaps_html += f"<h3>Notes</h3><ul>{notes_items}</ul>"
    gaps_html += "</section>"
    summary = "".join(f"<tr><td>{page_text(k)}</td><td>{page_text(v)}</td></tr>" for k, v in
                      headline_rows(model))
    figures = charts(model, _div, _missing)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{page_text(model.title)}</title>",
        f"<style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{page_text(model.title)}</h1>",
        f"<p><small>{info}<br>generated {page_text(model.generated_at)} by sm-locust report</small></p>",
        gaps_html,
        f'<h2>Summary</h2><table id="summary">{summary}</table>',
        targets_section(model.targets, _div, _missing),  # a traffic mix's cache is its run's question: first
        async_section(model.async_inference, _div, _missing),  # an async run's results and queue (asyncview.py)
        "<h2>Charts</h2>",
        *figures,
        hourly_section(model),
        "<h2>Steps</h2>",
        steps_table(model.steps, model.llm),
        "</body></html>",
    ])
