"""The sweep folder's result files: `sweep.json`, `sweep.csv` and `sweep.html` (docs/sweep.md).

`sweep.json` is the document the runner builds (one object per configuration, the recommendation,
the Pareto front); this module writes it, flattens it into `sweep.csv` (one row per configuration,
settings as `setting:<key>` columns) and renders `sweep.html`: the recommendation in one sentence,
the table the seed articles compare configurations with, throughput vs latency of every
configuration on one chart (its knee marked), cost vs latency with the Pareto front, and why each
other configuration lost. Like the run report, the page inlines plotly.js and works offline.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = 1
FIG_IDS = ("fig-sweep-curves", "fig-sweep-cost")
FIGURE_COLUMNS = (
    "capacity_rps", "knee_users", "p50_ms", "p95_ms", "p99_ms", "latency_ms", "error_rate", "cpu_pct", "memory_pct",
    "price_per_hour", "instance_type", "instance_count", "instances_needed", "cost_per_1m", "cost_per_hour_at_target",
    "meets_objective", "pareto", "lost_because", "run_dir", "deploy_s", "test_s", "wall_s", "billed_s", "cost_usd",
)
CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}
tr.winner{background:#e8f5e9}tr.failed{color:#999}.rec{font-size:17px;background:#f3f7ff;border-left:4px solid #3367d6;
padding:10px 14px;margin:12px 0}.note{color:#666;font-size:13px}"""


def write_json(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=1, default=str))
    tmp.replace(path)


def csv_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    configurations = document.get("configurations") or []
    setting_keys: list[str] = []
    for c in configurations:
        for key in c.get("settings") or {}:
            if key not in setting_keys:
                setting_keys.append(key)
    header = ["index", "label", "status", "reason", *[f"setting:{k}" for k in setting_keys], *FIGURE_COLUMNS]
    rows = []
    for c in configurations:
        row = {"index": c.get("index"), "label": c.get("label"), "status": c.get("status"), "reason": c.get("reason")}
        row.update({f"setting:{k}": (c.get("settings") or {}).get(k) for k in setting_keys})
        row.update({k: c.get(k) for k in FIGURE_COLUMNS})
        rows.append(row)
    return header, rows


def write_csv(path: Path, document: dict[str, Any]) -> None:
    write_rows(path, *csv_rows(document))


def write_rows(path: Path, header: list[str], rows: list[dict[str, Any]]) -> None:
    """One CSV file, empty cells for None (shared with serverless_render)."""
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=header)
        out.writeheader()
        for row in rows:
            out.writerow({k: ("" if v is None else v) for k, v in row.items()})


# ------------------------------------------------------------------------------------------- html


def _fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return html.escape(str(value)) + unit


def table(document: dict[str, Any]) -> str:
    pct = document.get("objective", {}).get("percentile_label", "p95")
    columns = [("#", "index", 0), ("configuration", "label", 0), ("status", "status", 0), ("req/s at the knee", "capacity_rps", 1),
               ("users at the knee", "knee_users", 0), ("p50 ms", "p50_ms", 0), ("p95 ms", "p95_ms", 0),
               ("p99 ms", "p99_ms", 0), ("errors %", "error_pct", 2), ("endpoint CPU %", "cpu_pct", 0),
               ("endpoint memory %", "memory_pct", 1), ("$ per hour", "price_per_hour", 3),
               ("instances for target", "instances_needed", 0), ("$ per hour at target", "cost_per_hour_at_target", 2),
               ("$ per 1M", "cost_per_1m", 2), ("meets objective", "meets_objective", 0), ("why not", "lost_because", 0)]

    def derived(c: dict[str, Any]) -> dict[str, Any]:
        return {"error_pct": None if c.get("error_rate") is None else 100.0 * c["error_rate"]}

    note = (f'<p class="note">Figures at each configuration\'s knee (the least load that gets the plateau\'s throughput '
            f'within the SLO); the objective\'s percentile is {html.escape(pct)}. CPU is summed over cores, as CloudWatch '
            "reports an endpoint's.</p>")
    return configurations_table(document, columns, derived, note)


def configurations_table(document: dict[str, Any], columns: list[tuple[str, str, int]],
                         derived: Callable[[dict[str, Any]], dict[str, Any]], note: str) -> str:
    """The configurations table of a sweep page: one row per configuration, `columns` as (heading, key, digits),
    `derived(configuration)` adds computed keys; the winner's row highlighted, failed rows grey, the label linking
    to the run report, the status carrying its reason; `note` follows the table."""
    winner = (document.get("recommendation") or {}).get("index")
    head = "".join(f"<th>{html.escape(name)}</th>" for name, *_ in columns)
    body = []
    for c in document.get("configurations") or []:
        values = dict(c)
        values.update(derived(c))
        cls = "winner" if c.get("index") == winner else ("failed" if c.get("status") != "ok" else "")
        cells = []
        for _, key, digits in columns:
            text = _fmt(values.get(key), digits)
            if key == "label" and c.get("report"):
                text = f'<a href="{html.escape(c["report"])}">{text}</a>'
            if key == "status" and c.get("reason"):
                text = f'{text}: {html.escape(str(c["reason"]))}'
            cells.append(f"<td>{text}</td>")
        body.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{note}"


def figure_html(fig: Any, div_id: str) -> str:
    """A plotly figure as a div for a page that inlines plotly.js once."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


def fig_curves(document: dict[str, Any]) -> str:
    import plotly.graph_objects as go

    pct = document.get("objective", {}).get("percentile_label", "p95")
    fig = go.Figure()
    for c in document.get("configurations") or []:
        points = [p for p in c.get("curve") or [] if p.get("rps") is not None and p.get("latency_ms") is not None]
        if not points:
            continue
        fig.add_trace(go.Scatter(x=[p["rps"] for p in points], y=[p["latency_ms"] for p in points], mode="lines+markers",
                                 name=c["label"], text=[f"{p.get('users')} users" for p in points],
                                 hovertemplate="%{x:.1f} req/s, %{y:.0f} ms (%{text})"))
        if c.get("capacity_rps") and c.get("latency_ms") is not None:
            fig.add_trace(go.Scatter(x=[c["capacity_rps"]], y=[c["latency_ms"]], mode="markers", showlegend=False,
                                     marker={"symbol": "star", "size": 14, "color": "black"},
                                     hovertemplate=f"knee of {html.escape(c['label'])}: %{{x:.1f}} req/s, %{{y:.0f}} ms"))
    slo = document.get("objective", {}).get("slo_ms")
    if slo:
        fig.add_hline(y=slo, line_dash="dash", annotation_text=f"SLO {slo:g} ms")
    if not fig.data:
        return '<p id="fig-sweep-curves">No configuration recorded load steps.</p>'
    fig.update_layout(title=f"Throughput vs {pct} latency, every load step (stars: the knees)",
                      xaxis_title="throughput (req/s)", yaxis_title=f"{pct} latency (ms)", height=480)
    return figure_html(fig, "fig-sweep-curves")


def fig_cost(document: dict[str, Any]) -> str:
    import plotly.graph_objects as go

    pct = document.get("objective", {}).get("percentile_label", "p95")
    points = [c for c in document.get("configurations") or []
              if c.get("status") == "ok" and c.get("cost_per_1m") is not None and c.get("latency_ms") is not None]
    if not points:
        return ('<p id="fig-sweep-cost">No cost figures: give price_per_hour or instance_type (priced from the bundled '
                "table) to compare $ per 1M inferences.</p>")
    front = set(document.get("pareto") or [])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in points], y=[c["cost_per_1m"] for c in points], mode="markers+text",
                             text=[f"#{c['index']}" for c in points], textposition="top center", name="configurations",
                             hovertext=[c["label"] for c in points],
                             hovertemplate="%{hovertext}: %{x:.0f} ms, $%{y:.2f} per 1M<extra></extra>",
                             marker={"size": 11, "color": ["#3367d6" if c["index"] in front else "#aaa" for c in points]}))
    on_front = sorted((c for c in points if c["index"] in front), key=lambda c: c["latency_ms"])
    if len(on_front) > 1:
        fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in on_front], y=[c["cost_per_1m"] for c in on_front],
                                 mode="lines", name="Pareto front", line={"dash": "dot", "color": "#3367d6"}))
    fig.update_layout(title=f"$ per 1M inferences vs {pct} latency at the knee (#: the table's; blue: the Pareto front)",
                      xaxis_title=f"{pct} latency at the knee (ms)", yaxis_title="$ per 1M inferences", height=480)
    return figure_html(fig, "fig-sweep-cost")


def render_html(document: dict[str, Any]) -> str:
    objective = document.get("objective") or {}
    goal = [f"optimize {objective.get('optimize', 'cost')}"]
    if objective.get("target_rps"):
        goal.append(f"target {objective['target_rps']:g} req/s")
    if objective.get("slo_ms"):
        goal.append(f"{objective.get('percentile_label', 'p95')} ≤ {objective['slo_ms']:g} ms")
    goal.append(f"errors ≤ {100 * objective.get('max_error_rate', 0.01):g} %")
    note = (f"{html.escape(document.get('description') or '')} deploy: {html.escape(document.get('deploy', ''))}; "
            f"sweep id {html.escape(document.get('sweep_id', ''))}; {len(document.get('configurations') or [])} configurations; "
            f"{html.escape(', '.join(goal))}; {html.escape(document.get('started_at', ''))} to "
            f"{html.escape(document.get('ended_at', ''))}.")
    return page(document, "Sweep", note, [
        ("Configurations", table(document)),
        ("Throughput vs latency", fig_curves(document)),
        ("Cost vs latency", fig_cost(document)),
    ])


def page(document: dict[str, Any], kind: str, note: str, sections: list[tuple[str, str]]) -> str:
    """A sweep page: `<kind> <name>` as title and heading, the `note` line (HTML), the recommendation, the
    `sections` as (heading, HTML) and why the others lost; plotly.js inlined so the page works offline."""
    from plotly.offline import get_plotlyjs

    rec = document.get("recommendation") or {}
    name = html.escape(document.get("name", ""))
    lost = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(why)}</li>" for label, why in (document.get("why_not") or {}).items())
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{kind.lower()} {name}</title><style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>',
        f"<h1>{kind} {name}</h1>",
        f"<p class='note'>{note}</p>",
        f"<div class='rec' id='recommendation'>{html.escape(rec.get('reason') or 'No recommendation.')}</div>",
    ]
    for heading, body in sections:
        parts += [f"<h2>{heading}</h2>", body]
    parts += [f"<h2>Why the others lost</h2><ul id='why-not'>{lost or '<li>(no other configuration)</li>'}</ul>",
              "</body></html>"]
    return "\n".join(parts)


def write_all(out_dir: Path, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
    return write_files(out_dir, document, write_csv, render_html, html_too)


def write_files(out_dir: Path, document: dict[str, Any], csv_writer: Callable[[Path, dict[str, Any]], None],
                html_renderer: Callable[[dict[str, Any]], str], html_too: bool = True) -> dict[str, Path]:
    """sweep.json, sweep.csv and (with `html_too`) sweep.html in `out_dir`; returns their paths by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "sweep.json", "csv": out_dir / "sweep.csv"}
    write_json(paths["json"], document)
    csv_writer(paths["csv"], document)
    if html_too:
        paths["html"] = out_dir / "sweep.html"
        paths["html"].write_text(html_renderer(document), encoding="utf-8")
    return paths
