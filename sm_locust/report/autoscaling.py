"""The report's autoscaling part: instances under throughput and the percentile, breaches shaded.

Only when the run watched an endpoint's scaling (summary.json has an `autoscaling` block, written by
`sm-locust run --watch-scaling` or an autoscaling sweep; `sm_locust.scaling.figures`). Then the
report draws one figure (`fig-autoscaling`), three rows on one time axis in run seconds (emulated
seconds on the local fleet emulation, so the axis reads as it would on SageMaker): throughput
(requests completed per second) under the traffic's phases (the rate offered, summary.json
`traffic`), the SLO's percentile per second with the SLO as a line, and the instances, in service
(a filled step) under desired (a dashed line on top, so neither hides the other when they agree);
the windows whose percentile was over the SLO are shaded across all three. An autoscaling sweep's
page draws the same figure for each configuration (`figure_id`). The summary table gains the scale events and the totals
(instance-hours, cost, seconds over the SLO, failed, throttled, flaps).

The per-second percentile comes from the run's timeline.jsonl histograms (exact per second, where
Locust's own history rows are ~10-s windows): read only for runs that have the block. This module
reads the block as data and imports nothing of `sm_locust.scaling` (which prices with `report.cost`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE, histogram_percentile
from sm_locust.record.model import Autoscaling, JsonObject, Phase, Summary
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.util.formatting import money, number

FIG_ID = "fig-autoscaling"
T = TypeVar("T")  # what the chart writers make (report.render)
BREACH_COLOR = "rgba(217,48,37,0.12)"
HEIGHT = 640  # three rows


@dataclass
class AutoscalingView:
    """What the page shows of a run's scaling (plain data)."""

    figures: Autoscaling  # summary.json `autoscaling`
    t_s: list[float] = field(default_factory=list)  # run second each per-second sample ends at
    rps: list[float] = field(default_factory=list)
    latency_ms: list[float | None] = field(default_factory=list)  # the SLO's percentile per second
    percentile: float = DEFAULT_SLO_PERCENTILE
    slo_ms: float | None = None
    phases: Sequence[Phase | JsonObject] = ()  # the traffic: {duration_s, rps}, run seconds


def autoscaling_view(summary: Summary | JsonObject, run_dir: Path) -> AutoscalingView | None:
    """The run's scaling figures and its per-second series in run seconds, or None without the block."""
    record = Summary.of(summary)
    figures = record.autoscaling
    if figures is None:
        return None
    slo = figures.slo
    percentile = float((slo.percentile if slo is not None else None) or DEFAULT_SLO_PERCENTILE)
    phases = record.traffic.phases if record.traffic is not None else ()
    view = AutoscalingView(figures, percentile=percentile, slo_ms=slo.slo_ms if slo is not None else None,
                           phases=phases)
    path = timeline_path(run_dir)
    started = record.started_at
    if path is None or not started:
        return view
    start = datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()
    scale = float(figures.time_scale or 1.0)  # run seconds as scaling.timeline.RunClock counts them
    for second in read_seconds(path):
        if second.interval < 0.5:  # a partial second at a stop: its rate would read as a spike
            continue
        view.t_s.append((second.t - start) * scale)
        view.rps.append(second.requests / second.interval if second.interval else 0.0)
        view.latency_ms.append(histogram_percentile(second.hist, view.percentile))
    return view


def autoscaling_rows(view: AutoscalingView | None, verdict_shown: bool = False) -> list[tuple[str, str]]:
    """Summary-table rows: one per scale event, then the totals (`verdict_shown`: the policy's verdict
    rows, report/policy.py, already give the instances, their cost and the seconds over the SLO)."""
    if view is None:
        return []
    f = view.figures
    rows = []
    events = list(f.scale_events)
    if verdict_shown:  # the first scale-out is the verdict's "Scale-out reaction"
        first_out = next((e for e in events if e.direction == "out"), None)
        events = [e for e in events if e is not first_out]
    for e in events:
        text = f"{e.from_} -> {e.to} at {number(e.t_s, 0)} s"
        if e.reaction_s is not None:
            text += f", {number(e.reaction_s, 0)} s after the metric crossed"
        if e.ready_s is not None:
            text += f", serving {number(e.ready_s, 0)} s after"
        rows.append((f"Scale {e.direction}", text))
    if not verdict_shown:
        cost = f" ({money(f.cost_usd)})" if f.cost_usd is not None else ""
        rows.append(("Instances", f"peak {f.peak_instances}, {number(f.instance_hours, 3)} instance-hours{cost}"))
        if f.slo_breach_s is not None:
            rows.append((f"Seconds over the p{view.percentile:g} SLO", number(f.slo_breach_s, 0)))
    rows.append(("Failed / throttled / flaps", " / ".join(str(_count(f, key)) for key in ("failed", "throttled",
                                                                                              "flaps"))))
    if (f.time_scale or 1.0) != 1.0:
        rows.append(("Autoscaling clock", f"emulated, x{f.time_scale:g} (run seconds are emulated seconds)"))
    return rows


def _count(figures: Autoscaling, key: str) -> object:
    """A count as the file holds it: 0 when the key is absent (null stays None, as it was shown)."""
    return getattr(figures, key) if figures.has(key) else 0


def phase_steps(phases: Sequence[Phase | JsonObject], end: float | None = None) -> tuple[list[float], list[float]]:
    """The offered rate as a step line: (x, y) with a point at each phase's start and one at the end,
    cut at `end` (a run stopped before its traffic did)."""
    x, y, t = [], [], 0.0
    for given in phases:
        if end is not None and t >= end:
            break
        phase = given if isinstance(given, Phase) else Phase.from_json(given, check=False)
        x.append(t)
        y.append(float(phase.rps or 0.0))
        t += float(phase.duration_s or 0.0)
    if x:
        x.append(t if end is None else min(t, end))
        y.append(y[-1])
    return x, y


def autoscaling_figure(view: AutoscalingView | None, div: Callable[..., T],
                       missing: Callable[[str, str, str], T], figure_id: str = FIG_ID,
                       title: str = "Autoscaling: instances under the traffic and latency (over the SLO shaded)",
                       ) -> list[T]:
    """The figure (in a list, empty when the run watched no scaling)."""
    if view is None:
        return []
    steps = view.figures.instances
    if not steps:
        return [missing(figure_id, "Instances under throughput and latency", "no instance counts were recorded")]

    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.35, 0.35, 0.3])
    if view.phases:
        px, py = phase_steps(view.phases, view.figures.duration_s)
        fig.add_trace(go.Scatter(x=px, y=py, name="offered (traffic phases)",
                                 line={"shape": "hv", "dash": "dash", "color": "#5f6368"}), row=1, col=1)
    if view.t_s:
        fig.add_trace(go.Scatter(x=view.t_s, y=view.rps, name="requests/s completed", line={"shape": "hv"}),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=view.t_s, y=view.latency_ms, name=f"p{view.percentile:g} per second",
                                 line={"shape": "hv"}), row=2, col=1)
    else:
        fig.add_annotation(text="no per-second latency (timeline.jsonl) in the run folder", showarrow=False,
                           xref="x2 domain", yref="y2 domain", x=0.5, y=0.5)
    if view.slo_ms is not None:
        fig.add_hline(y=view.slo_ms, line_dash="dash", line_color="crimson", row=2, col=1,
                      annotation_text=f"p{view.percentile:g} SLO {view.slo_ms:g} ms", annotation_position="top left",
                      annotation_font_color="crimson")
    end = view.figures.duration_s or steps[-1].t_s
    x = [s.t_s for s in steps] + [end]
    in_service = [s.in_service for s in steps] + [steps[-1].in_service]
    desired = [s.desired for s in steps] + [steps[-1].desired]
    fig.add_trace(go.Scatter(x=x, y=in_service, name="in service", fill="tozeroy", fillcolor="rgba(24,128,56,0.25)",
                             line={"shape": "hv", "color": "#188038", "width": 1}), row=3, col=1)
    fig.add_trace(go.Scatter(x=x, y=desired, name="desired", line={"shape": "hv", "dash": "dash", "color": "#e8710a",
                                                                   "width": 2.5}), row=3, col=1)
    for start, stop in view.figures.breaches or []:
        fig.add_vrect(x0=start, x1=stop, fillcolor=BREACH_COLOR, line_width=0, row="all", col=1)
    fig.update_yaxes(title_text="req/s", row=1, col=1, rangemode="tozero")  # 20 req/s is not the bottom
    # headroom over the SLO line: autoranged, a latency under the SLO put the line on the panel's top
    # edge and its label in the gap under the throughput panel, as if it belonged to neither
    highest = max([v for v in view.latency_ms if v is not None and math.isfinite(v)] + [view.slo_ms or 0.0])
    fig.update_yaxes(title_text="ms", row=2, col=1, range=[0, highest * 1.15 or 1])
    top = max([*(n or 0 for n in in_service), *(n or 0 for n in desired), 1])
    fig.update_yaxes(title_text="instances", row=3, col=1, range=[0, top + 0.5], tickmode="linear", tick0=0, dtick=1,
                     tickformat="d")
    scale = view.figures.time_scale or 1.0
    fig.update_xaxes(title_text="run seconds" + (f" (emulated, x{scale:g})" if scale != 1 else ""), row=3, col=1)
    fig.update_layout(title=title)
    return [div(fig, figure_id, height=HEIGHT)]
