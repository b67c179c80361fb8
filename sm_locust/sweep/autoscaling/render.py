"""An autoscaling sweep's result files: `sweep.json`, `sweep.csv`, `sweep.html` (docs/autoscaling.md).

`sweep.json` is `AutoscalingSweep.document` (`kind: autoscaling`); `sweep.csv` one row per
configuration; `sweep.html`, offline, the recommendation, the table, each configuration's
autoscaling figure (`report.autoscaling`, from its run folder), every configuration's instances
together, and cost against seconds over the SLO.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from sm_locust.record.runfolder import read_json
from sm_locust.report.autoscaling import autoscaling_figure, autoscaling_view
from sm_locust.sanitize import page_text
from sm_locust.sweep.autoscaling.document import SweptConfiguration, read_document
from sm_locust.sweep.autoscaling.rows import AutoscalingFigures, AutoscalingRow
from sm_locust.sweep.progress import PREFIX
from sm_locust.sweep.render import configurations_table, figure_html, page, write_files, write_rows
from sm_locust.util.formatting import count, duration

SCHEMA = 1
POLICY_COLUMNS = ("min_instances", "max_instances", "target_value", "metric", "scale_out_cooldown_s",
                  "scale_in_cooldown_s")
COLUMNS = ("reaction_s", "ready_s", "model_reaction_s", "model_ready_s", "peak_instances", "instance_hours",
           "cost_usd", "slo_breach_s", "breach_client_bound_s", "failed", "throttled", "flaps", "latency_ms",
           "meets_objective", "lost_because", "client_bound", "run_dir", "deploy_s", "test_s", "wall_s")


def bracket(interval: object) -> str:
    """' [171, 181]' for a 95 % interval (or a resolution bound), '' without one."""
    if not isinstance(interval, (list, tuple)) or len(interval) != 2 or None in interval:
        return ""
    return f" [{interval[0]:.0f}, {interval[1]:.0f}]"


def configuration_line(index: int, total: int, row: AutoscalingRow) -> str:
    """`[1/2] min_instances 1: out 1 -> 3 after 180 s [170, 180] (serving 420 s), peak 3, 0.75 instance-hours
    ($0.17), 310 s [280, 340] over the SLO, 0 flaps (46 s)`; brackets: the figures' intervals."""
    head = f"{PREFIX} [{index}/{total}] {row.label}: "
    took = f" ({duration(row.timing.wall_s)})" if row.timing is not None else ""
    if row.status != "ok":
        status = row.status.upper() if row.status == "inconclusive" else row.status  # said loudly
        return f"{head}{status}: {row.reason}{took}"
    f = row.figures or AutoscalingFigures()
    scaling = f.scaling
    events = scaling.scale_events
    parts = []
    for e in events[:3]:
        text = f"{e.direction} {e.from_} -> {e.to}"
        if e.reaction_s is not None:
            text += f" after {e.reaction_s:.0f} s{bracket(e.reaction_s_ci95)}"
        if e.ready_s is not None:
            text += f" (serving {e.ready_s:.0f} s)"
        parts.append(text)
    if len(events) > 3:
        parts.append(f"{len(events) - 3} more scale events")
    if not events:
        parts.append("no scaling")
    if scaling.peak_instances is not None:
        parts.append(f"peak {scaling.peak_instances}")
    if scaling.instance_hours is not None:
        cost = f" (${scaling.cost_usd:.2f})" if scaling.cost_usd is not None else ""
        parts.append(f"{scaling.instance_hours:.2f} instance-hours{cost}")
    if scaling.slo_breach_s is not None:
        parts.append(f"{scaling.slo_breach_s:.0f} s{bracket(scaling.breach_s_ci95)} over the SLO")
    parts.append(count(scaling.flaps or 0, "flap"))
    text = head + ", ".join(parts)
    if row.resumed:
        text += " (measured before: run folder complete)"
    return text + took


def csv_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, object]]]:
    header = ["index", "label", "status", "reason", *POLICY_COLUMNS, "price_per_hour", *COLUMNS, "scale_events"]
    rows = []
    for c in document.get("configurations") or []:
        typed = SweptConfiguration.of(c)
        row = {k: c.get(k) for k in ("index", "label", "status", "reason", "price_per_hour", *COLUMNS)}
        row.update({k: (typed.policy or {}).get(k) for k in POLICY_COLUMNS})
        events = typed.scale_events or ()
        row["scale_events"] = "; ".join(f"{e.direction} {e.from_}->{e.to} at {e.t_s:.0f} s" for e in events)
        rows.append(row)
    return header, rows


def write_csv(path: Path, document: dict[str, object]) -> None:
    write_rows(path, *csv_rows(document))


def table(document: dict[str, Any]) -> str:
    columns = [("configuration", "label", 0), ("status", "status", 0), ("min", "min_instances", 0),
               ("max", "max_instances", 0), ("target", "target_value", 0), ("reaction s", "reaction_s", 0),
               ("ready s", "ready_s", 0), ("reaction s, poll resolution", "reaction_text", 0),
               ("model reaction s", "model_reaction_s", 0),
               ("model ready s", "model_ready_s", 0), ("peak instances", "peak_instances", 0),
               ("instance-hours", "instance_hours", 3), ("$ for the traffic", "cost_usd", 2),
               ("s over the SLO [95 % interval]", "breach_text", 0),
               ("of which the client was behind, s", "breach_client_bound_s", 0), ("failed", "failed", 0),
               ("throttled", "throttled", 0),
               ("flaps", "flaps", 0), ("why not", "lost_because", 0)]

    def derived(configuration: dict[str, Any]) -> dict[str, object]:
        c = SweptConfiguration.of(configuration)
        out = {k: (c.policy or {}).get(k) for k in ("min_instances", "max_instances", "target_value")}
        breach, reaction = c.slo_breach_s, c.reaction_s
        out["breach_text"] = None if breach is None else f"{breach:.0f}{bracket(c.breach_s_ci95)}"
        out["reaction_text"] = None if reaction is None else f"{reaction:.0f}{bracket(c.reaction_s_ci95)}"
        return out

    note = ('<p class="note">Reaction: from the start of the first period above the target (below 90 % of it for a '
            "scale-in) to the change of the desired count; ready: from that same start to the new instances serving. "
            "Model: the same policy's control loop fed the traffic's datapoints (local emulation). Instance-hours: the "
            "larger of desired and in service over the traffic, in the run's (emulated) hours; $ at the "
            "configuration's price per instance-hour. Brackets: the reaction time as the instance counts' polling "
            "bounds it (a change seen at a reading happened after the one before); the seconds over the SLO's 95 % "
            "interval (each second's requests resampled). A run whose seconds over the SLO came while the load "
            "generator was behind is measured again by itself, then INCONCLUSIVE.</p>")
    return configurations_table(document, columns, derived, note)


def seconds_title(document: dict[str, Any]) -> str:
    """The time axis's title: run seconds, said emulated (with the clock's factor) on a local sweep."""
    typed = read_document(document)
    if typed.deploy != "local":
        return "run seconds"
    scales = {float(scale) for c in typed.configurations or ()
              if (scale := (c.settings or {}).get("autoscaling.time_scale")) is not None}
    return "run seconds (emulated" + (f", x{scales.pop():g})" if len(scales) == 1 else ")")


def fig_instances(document: dict[str, Any]) -> str:
    """Every configuration's instances over the traffic: in service solid, desired dashed and drawn a
    little wider (both show where they agree), whole-number ticks."""
    fig = go.Figure()
    top = 1
    for i, c in enumerate(c for c in read_document(document).configurations or () if c.instances):
        steps = c.instances or ()
        end = c.duration_s or steps[-1].t_s
        x = [s.t_s for s in steps] + [end]
        color = ["#3367d6", "#e8710a", "#188038", "#a142f4", "#d93025"][i % 5]
        in_service = [s.in_service for s in steps] + [steps[-1].in_service]
        desired = [s.desired for s in steps] + [steps[-1].desired]
        top = max(top, *(n or 0 for n in in_service + desired))
        fig.add_trace(go.Scatter(x=x, y=in_service, mode="lines", line={"shape": "hv", "color": color, "width": 5},
                                 opacity=0.45, name=f"{c.label}: in service"))
        fig.add_trace(go.Scatter(x=x, y=desired, mode="lines", line={"shape": "hv", "dash": "dash", "color": color,
                                                                      "width": 2}, name=f"{c.label}: desired"))
    if not fig.data:
        return '<p id="fig-as-instances">No instance timeline recorded.</p>'
    fig.update_layout(title="Instances over the traffic (in service: wide and pale; desired: dashed)",
                      xaxis_title=seconds_title(document), yaxis_title="instances", height=420,
                      template="plotly_white")
    fig.update_yaxes(range=[0, top + 0.5], tickmode="linear", tick0=0, dtick=1, tickformat="d")
    return figure_html(fig, "fig-as-instances")


def configuration_figures(document: dict[str, Any], folder: Path | None) -> str:
    """Each configuration's run as the run report draws a watched run's scaling (read from its run
    folder in the sweep folder), or a line saying why it is not drawn."""
    parts = []
    for c in read_document(document).configurations or ():
        div_id = f"fig-as-run-{c.index}"
        title = f"{c.label}: latency and instances over the traffic (over the SLO shaded)"
        summary = None
        if folder is not None and c.run_dir:
            summary = read_json(folder / str(c.run_dir) / "summary.json", "summary", [])
        view = autoscaling_view(summary, folder / str(c.run_dir)) if summary and folder is not None else None
        if view is None:
            why = "its run folder has no summary.json with the scaling figures" if folder is not None else \
                "the page was drawn without the sweep folder"
            parts.append(f'<p id="{div_id}" class="note">{page_text(str(c.label))}: not drawn: {why}.</p>')
            continue

        def div(fig: Any, fig_id: str, height: int = 640) -> str:
            fig.update_layout(height=height, template="plotly_white")
            return figure_html(fig, fig_id)

        def missing(fig_id: str, heading: str, why: str) -> str:
            return f'<p id="{fig_id}" class="note">{page_text(heading)}: not drawn: {page_text(why)}.</p>'

        parts += autoscaling_figure(view, div, missing, figure_id=div_id, title=title)
    return "".join(parts) or "<p>No configuration ran.</p>"


def fig_cost(document: dict[str, Any]) -> str:
    points = [c for c in read_document(document).configurations or () if c.slo_breach_s is not None
              and (c.cost_usd is not None or c.instance_hours is not None)]
    if not points:
        return '<p id="fig-as-cost">No cost and SLO figures to compare.</p>'
    priced = all(c.cost_usd is not None for c in points)
    pairs = [(c, figure) for c in points if (figure := c.cost_usd if priced else c.instance_hours) is not None]
    x = [float(figure) for _, figure in pairs]
    y = [float(c.slo_breach_s or 0) for c, _ in pairs]  # not None: kept above
    fig = go.Figure(go.Scatter(x=x, y=y, mode="markers+text", text=[c.label for c, _ in pairs],
                               textposition="top center", marker={"size": 12}))
    fig.update_layout(title="Cost of the traffic vs seconds over the SLO",
                      xaxis_title="$ for the traffic" if priced else "instance-hours",
                      yaxis_title="seconds over the SLO", height=420, template="plotly_white")
    # room around the points for their labels: autoranged, the extreme ones were cut at the plot's edge
    fig.update_xaxes(range=padded(x, 0.15, 0.15))
    fig.update_yaxes(range=padded(y, 0.1, 0.25))
    return figure_html(fig, "fig-as-cost")


def padded(values: list[float], below: float, above: float) -> list[float]:
    """An axis range around `values` with these shares of their span (or of the value, when all are
    equal) left free below and above."""
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0
    return [low - below * span, high + above * span]


def render_html(document: dict[str, Any], folder: Path | None = None) -> str:
    typed = read_document(document)
    traffic = ", ".join(f"{p.rps:g} req/s for {p.duration_s:g} s" for p in typed.traffic or ())
    note = (f"{typed.description or ''} deploy: {typed.deploy}; "
            f"{len(typed.configurations or ())} configurations; traffic: {traffic}; "
            f"{typed.started_at} to {typed.ended_at}.")

    return page(document, "Autoscaling sweep", page_text(note), [
        ("Configurations", table(document)),
        ("Latency, traffic and instances over time", configuration_figures(document, folder)),
        ("Instances of every configuration", fig_instances(document)),
        ("Cost vs SLO", fig_cost(document)),
    ])


def write_all(out_dir: Path, document: dict[str, object], html_too: bool = True) -> dict[str, Path]:
    return write_files(out_dir, document, write_csv, lambda d: render_html(d, out_dir), html_too)
