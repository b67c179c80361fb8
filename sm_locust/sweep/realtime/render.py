"""A real-time sweep's result files: `sweep.json`, `sweep.csv`, `sweep.html` (docs/sweep.md).

`sweep.json` is the document `RealtimeSweep.document` builds (one object per configuration, the
recommendation, the Pareto front); `sweep.csv` flattens it (one row per configuration, settings as
`setting:<key>` columns); `sweep.html` holds the recommendation in one sentence, the table the
seed articles compare configurations with, throughput vs latency of every configuration on one
chart (its knee marked), cost vs latency with the Pareto front, and why each other configuration
lost, on the page every kind shares (`sweep/render.py`). Also the line printed per configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from sm_locust.sanitize import page_text
from sm_locust.sweep import progress
from sm_locust.sweep.realtime.rows import RealtimeFigures, RealtimeRow
from sm_locust.sweep.render import (
    configurations_table,
    figure_html,
    page,
    write_files,
    write_rows,
)
from sm_locust.util.formatting import percent, with_interval

SCHEMA = 1
FIG_IDS = ("fig-sweep-curves", "fig-sweep-cost")
FIGURE_COLUMNS = (
    "capacity_rps", "capacity_users", "capacity_step", "capacity_latency_ms", "knee_rps", "knee_users", "p50_ms",
    "p95_ms", "p99_ms", "latency_ms", "error_rate", "cpu_pct",
    "memory_pct", "price_per_hour", "instance_type", "instance_count", "instances_needed", "instances_needed_ci95",
    "cost_per_1m", "cost_per_1m_ci95", "cost_per_hour_at_target", "cost_per_hour_at_target_ci95",
    "meets_objective", "pareto", "lost_because", "client_bound", "run_dir", "deploy_s", "test_s", "wall_s",
    "billed_s", "cost_usd",
    "cache_hit_rate", "cache_hit_rate_ci95", "models_loaded", "cold_p95_ms", "cost_per_model_month",
)
MIX_COLUMNS = [("cache hit %", "cache_hit_pct", 1), ("models loaded", "models_loaded", 1),
               ("cold p95 ms", "cold_p95_ms", 0), ("$ per model-month", "cost_per_model_month", 4)]


def configuration_line(index: int, total: int, row: RealtimeRow, percentile_label: str) -> str:
    """`[2/6] max_concurrency 5: 121.3 req/s at 6 users, p95 44 ms, 0 % errors, capacity 125.0 req/s (±2.1);
    $0.46 per 1M (38 s)`: the knee step's own rate, users and latency (one step, never the rate of one
    with the users of another), then the capacity with its interval when it is another step's."""
    f = row.figures or RealtimeFigures()

    def figures() -> str:
        if not f.capacity_rps:
            return f"no sustainable throughput ({f.no_capacity_reason or 'see its run folder'})"
        users = f.knee_users
        at = f" at {users:g} user{'s' if users != 1 else ''}" if isinstance(users, (int, float)) else ""
        latency = with_interval(f.latency_ms, f.latency_ci95, " ms")
        rate, interval = (f.knee_rps, f.knee_rps_ci95) if f.knee_rps is not None else (f.capacity_rps, f.capacity_ci95)
        text = (f"{with_interval(rate, interval, ' req/s', 1)}{at}, {percentile_label} {latency}, "
                f"{percent(f.error_rate, trim=True)} errors")
        if f.capacity_step is not None and f.capacity_step != f.knee_step:
            text += f", capacity {with_interval(f.capacity_rps, f.capacity_ci95, ' req/s', 1)}"
        if f.repeat and f.repeat.get("capacity_values"):
            values = f.repeat["capacity_values"]
            text += (f" ({f.repeat['quoted_run']}, the median of {f.repeat['runs']} runs: run to run "
                     f"{min(values):.1f}..{max(values):.1f} req/s)")
        if f.knee_note:
            text += f" ({f.knee_note})"
        return text + (f"; ${with_interval(f.cost_per_1m, f.cost_per_1m_ci95, digits=2)} per 1M"
                       if f.cost_per_1m is not None else "")

    return progress.configuration_line(index, total, row, figures)


def csv_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, object]]]:
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


def write_csv(path: Path, document: dict[str, object]) -> None:
    write_rows(path, *csv_rows(document))


# ------------------------------------------------------------------------------------------- html


def _cache_hit_pct(c: dict[str, Any]) -> str | None:
    """The cache hit rate in % with its interval, for the 'cache hit %' cell (None: no model cache)."""
    rate, interval = c.get("cache_hit_rate"), c.get("cache_hit_rate_ci95")
    if rate is None:
        return None
    bounds = [100.0 * v for v in interval] if isinstance(interval, list) and len(interval) == 2 else None
    return with_interval(100.0 * rate, bounds, "", 1)


def _interval_text(c: dict[str, Any], key: str, digits: int) -> str | None:
    """A sweep.json figure with its `<key>_ci95` interval, for a table cell (None: not measured); an
    interval of one whole count (instances) is the figure itself."""
    interval = c.get(f"{key}_ci95")
    if isinstance(interval, list) and len(interval) == 2 and interval[0] == interval[1] == c.get(key):
        interval = None
    return None if c.get(key) is None else with_interval(c[key], interval, "", digits)


def table(document: dict[str, Any]) -> str:
    pct = document.get("objective", {}).get("percentile_label", "p95")
    columns = [("#", "index", 0), ("configuration", "label", 0), ("status", "status", 0),
               ("capacity req/s [95 % interval]", "capacity_text", 0), ("req/s at the knee", "knee_rps", 1),
               ("users at the knee", "knee_users", 0), ("p50 ms", "p50_ms", 0), ("p95 ms", "p95_ms", 0),
               ("p99 ms", "p99_ms", 0), ("errors %", "error_pct", 2), ("endpoint CPU %", "cpu_pct", 0),
               ("endpoint memory %", "memory_pct", 1), ("$ per hour", "price_per_hour", 3),
               ("instances for target", "instances_text", 0),
               ("$ per hour at target", "fleet_text", 2), ("$ per 1M", "cost_text", 2),
               ("meets objective", "meets_objective", 0),
               ("why not", "lost_because", 0)]
    if any(c.get("cache_hit_rate") is not None or c.get("models_loaded") is not None
           for c in document.get("configurations") or []):  # a sweep under a model mix (realtime/mix.py)
        columns[-2:-2] = MIX_COLUMNS

    def derived(c: dict[str, Any]) -> dict[str, object]:
        capacity = c.get("capacity_rps")
        return {"error_pct": None if c.get("error_rate") is None else 100.0 * c["error_rate"],
                "cache_hit_pct": _cache_hit_pct(c),
                "instances_text": _interval_text(c, "instances_needed", 0),
                "fleet_text": _interval_text(c, "cost_per_hour_at_target", 2),
                "cost_text": _interval_text(c, "cost_per_1m", 2),
                "capacity_text": None if capacity is None else with_interval(capacity, c.get("capacity_ci95"), "", 1)}

    note = ('<p class="note">Figures at each configuration\'s knee (the least load that gets the plateau\'s '
            f"throughput within the SLO); the objective's percentile is {page_text(pct)}. CPU is summed over "
            "cores, as CloudWatch reports an endpoint's.</p>")
    return configurations_table(document, columns, derived, note)


def fig_curves(document: dict[str, Any]) -> str:
    pct = document.get("objective", {}).get("percentile_label", "p95")
    fig = go.Figure()
    numbered = False
    for c in document.get("configurations") or []:
        visited = [(i, p) for i, p in enumerate(c.get("curve") or [], start=1)
                   if p.get("rps") is not None and p.get("latency_ms") is not None]
        if not visited:
            continue
        ordered = sorted(visited, key=lambda pair: (pair[1].get("users") or 0, pair[0]))  # by load, not by visit
        visits = [i for i, _ in ordered]
        points = [p for _, p in ordered]
        out_of_order = visits != sorted(visits)
        numbered = numbered or out_of_order
        fig.add_trace(go.Scatter(x=[p["rps"] for p in points], y=[p["latency_ms"] for p in points],
                                 mode="lines+markers+text" if out_of_order else "lines+markers",
                                 name=c["label"], text=[str(v) for v in visits] if out_of_order else None,
                                 textposition="top center", textfont={"size": 10, "color": "#555"},
                                 customdata=[f"{p.get('users')} users, step {v}" for v, p in zip(visits, points,
                                                                                                   strict=True)],
                                 hovertemplate="%{x:.1f} req/s, %{y:.0f} ms (%{customdata})"))
        knee = next((p for p in points if c.get("knee_users") is not None and p.get("users") == c["knee_users"]), None)
        if knee is not None:  # on the curve: the knee step's own throughput and latency
            fig.add_trace(go.Scatter(x=[knee["rps"]], y=[knee["latency_ms"]], mode="markers", showlegend=False,
                                     marker={"symbol": "star", "size": 14, "color": "black"},
                                     hovertemplate=f"knee of {page_text(c['label'])}: "
                                                   "%{x:.1f} req/s, %{y:.0f} ms"))
    slo = document.get("objective", {}).get("slo_ms")
    if slo:
        fig.add_hline(y=slo, line_dash="dash", line_color="crimson", annotation_text=f"{pct} SLO {slo:g} ms",
                      annotation_font_color="crimson")
    if not fig.data:
        return '<p id="fig-sweep-curves">No configuration recorded load steps.</p>'
    note = "; numbers: the order the steps ran" if numbered else ""
    fig.update_layout(title=f"Throughput vs {pct} latency, every load step joined by load (stars: the knees{note})",
                      xaxis_title="throughput (req/s)", yaxis_title=f"{pct} latency (ms)", height=480)
    return figure_html(fig, "fig-sweep-curves")


def fig_cost(document: dict[str, Any]) -> str:
    pct = document.get("objective", {}).get("percentile_label", "p95")
    points = [c for c in document.get("configurations") or []
              if c.get("status") == "ok" and c.get("cost_per_1m") is not None and c.get("latency_ms") is not None]
    if not points:
        return ('<p id="fig-sweep-cost">No cost figures: give price_per_hour or instance_type (priced from the bundled '
                "table) to compare $ per 1M inferences.</p>")
    front = set(document.get("pareto") or [])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in points], y=[c["cost_per_1m"] for c in points],
                             mode="markers+text",
                             text=[f"#{c['index']}" for c in points], textposition="top center", name="configurations",
                             hovertext=[c["label"] for c in points],
                             hovertemplate="%{hovertext}: %{x:.0f} ms, $%{y:.2f} per 1M<extra></extra>",
                             marker={"size": 11,
                                     "color": ["#3367d6" if c["index"] in front else "#aaa" for c in points]}))
    on_front = sorted((c for c in points if c["index"] in front), key=lambda c: c["latency_ms"])
    if len(on_front) > 1:
        fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in on_front], y=[c["cost_per_1m"] for c in on_front],
                                 mode="lines", name="Pareto front", line={"dash": "dot", "color": "#3367d6"}))
    fig.update_layout(title=f"$ per 1M inferences vs {pct} latency at the knee "
                            "(#: the table's; blue: the Pareto front)",
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
    note = (f"{page_text(document.get('description') or '')} deploy: {page_text(document.get('deploy', ''))}; "
            f"sweep id {page_text(document.get('sweep_id', ''))}; {len(document.get('configurations') or [])} "
            f"configurations; "
            f"{page_text(', '.join(goal))}; {page_text(document.get('started_at', ''))} to "
            f"{page_text(document.get('ended_at', ''))}.")
    return page(document, "Sweep", note, [
        ("Configurations", table(document)),
        ("Throughput vs latency", fig_curves(document)),
        ("Cost vs latency", fig_cost(document)),
    ])


def write_all(out_dir: Path, document: dict[str, object], html_too: bool = True) -> dict[str, Path]:
    return write_files(out_dir, document, write_csv, render_html, html_too)


