"""A serverless sweep's result files: `sweep.json`, `sweep.csv`, `sweep.html` (docs/serverless.md).

`sweep.json` is the document `ServerlessSweep.document` builds (`kind: serverless`; per
configuration `settings`, `throttle_rate`, `cold_start_p50_ms`, `cold_start_p99_ms`, `warm_p50_ms`,
`warm_p95_ms`, `cost_per_1m`, `break_even_rps`, ...; the `recommendation`). `sweep.csv` is one row
per configuration. `sweep.html`, offline like the run report: the recommendation in one sentence,
the table, throttle rate and p95 vs concurrency multiplier, the cold-start histogram, and seed 003's
chart of monthly cost vs sustained traffic against the real-time instance, break-evens marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from sm_locust.sanitize import page_text
from sm_locust.sweep import progress
from sm_locust.sweep.render import (
    configurations_table,
    figure_html,
    page,
    write_files,
    write_rows,
)
from sm_locust.sweep.serverless.cost import (
    HOURS_PER_MONTH,
    monthly_realtime_usd,
    traffic_grid,
)
from sm_locust.sweep.serverless.rows import ServerlessFigures, ServerlessRow
from sm_locust.util.formatting import percent, with_interval

SCHEMA = 1
FIG_IDS = ("fig-sls-throttle", "fig-sls-latency", "fig-sls-cold", "fig-sls-cost")
COLUMNS = ("memory_size_mb", "max_concurrency", "warm_p50_ms", "warm_p95_ms", "warm_mean_ms", "cold_start_p50_ms",
           "cold_start_p99_ms", "capacity_rps", "throttle_at_max_concurrency", "cost_per_1m", "break_even_rps",
           "break_even_requests_per_month", "meets_objective", "lost_because", "run_dir", "deploy_s", "test_s",
           "wall_s")


def configuration_line(index: int, total: int, row: ServerlessRow) -> str:
    """`[1/4] memory_size_mb 2048, max_concurrency 2: warm p95 62 ms, cold start p50 0.76 s, throttled 0 % / 49 %
    at x1 / x2, up to 31.5 req/s; $4.97 per 1M, real-time cheaper above 6.6 req/s (38 s)`."""
    f = row.figures or ServerlessFigures()

    def figures() -> str:
        parts = []
        if f.warm_p95_ms is not None:
            parts.append(f"warm p95 {with_interval(f.warm_p95_ms, f.warm_ci95('warm_p95_ms'), ' ms')}")
        if f.cold.p50_ms is not None:
            parts.append(f"cold start p50 {f.cold.p50_ms / 1000:.2f} s")
        throttles = f.throttle_rate
        if throttles:
            parts.append(f"throttled {' / '.join(percent(v, trim=True) for v in throttles.values())} at "
                         f"{' / '.join('x' + m for m in throttles)}")
        if f.capacity_rps is not None:
            parts.append(f"up to {with_interval(f.capacity_rps, f.capacity_rps_ci95, ' req/s', 1)}")
        text = ", ".join(parts or ["no figures"])
        if f.cost.cost_per_1m is not None:
            text += f"; ${with_interval(f.cost.cost_per_1m, f.cost.cost_per_1m_ci95, digits=2)} per 1M"
            if f.cost.break_even_rps is not None:
                text += f", real-time cheaper above {f.cost.break_even_rps:.1f} req/s"
        return text

    return progress.configuration_line(index, total, row, figures)


def csv_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, object]]]:
    configurations = document.get("configurations") or []
    multipliers: list[str] = []
    for c in configurations:
        for m in c.get("throttle_rate") or {}:
            if m not in multipliers:
                multipliers.append(m)
    header = ["index", "label", "status", "reason", *COLUMNS, *[f"throttle_rate_x{m}" for m in multipliers],
              *[f"goodput_rps_x{m}" for m in multipliers]]
    rows = []
    for c in configurations:
        row = {k: c.get(k) for k in ("index", "label", "status", "reason", *COLUMNS)}
        for m in multipliers:
            row[f"throttle_rate_x{m}"] = (c.get("throttle_rate") or {}).get(m)
            row[f"goodput_rps_x{m}"] = (c.get("goodput_rps") or {}).get(m)
        rows.append(row)
    return header, rows


def write_csv(path: Path, document: dict[str, object]) -> None:
    write_rows(path, *csv_rows(document))


# ------------------------------------------------------------------------------------------- html


def _interval_text(c: dict[str, Any], key: str, digits: int) -> str | None:
    """A sweep.json figure with its `<key>_ci95` interval, for a table cell (None: not measured)."""
    return None if c.get(key) is None else with_interval(c[key], c.get(f"{key}_ci95"), "", digits)


def table(document: dict[str, Any]) -> str:
    columns = [("configuration", "label", 0), ("status", "status", 0), ("memory MB", "memory_size_mb", 0),
               ("MaxConcurrency", "max_concurrency", 0), ("warm p50 ms", "warm_p50_ms", 0),
               ("warm p95 ms [95 % interval]", "warm_p95_text", 0),
               ("cold start p50 s", "cold_p50_s", 2), ("cold start p99 s", "cold_p99_s", 2),
               ("throttled with MaxConcurrency callers %", "throttle_pct", 1),
               ("most req/s served", "capacity_text", 1),
               ("$ per 1M", "cost_text", 2), ("real-time cheaper above req/s", "break_even_rps", 1),
               ("... requests a month (M)", "break_even_m", 1), ("why not", "lost_because", 0)]

    def derived(c: dict[str, Any]) -> dict[str, object]:
        return {
            "warm_p95_text": _interval_text(c, "warm_p95_ms", 0),
            "capacity_text": _interval_text(c, "capacity_rps", 1),
            "cost_text": _interval_text(c, "cost_per_1m", 2),
            "cold_p50_s": None if c.get("cold_start_p50_ms") is None else c["cold_start_p50_ms"] / 1000.0,
            "cold_p99_s": None if c.get("cold_start_p99_ms") is None else c["cold_start_p99_ms"] / 1000.0,
            "throttle_pct": (None if c.get("throttle_at_max_concurrency") is None
                             else 100.0 * c["throttle_at_max_concurrency"]),
            "break_even_m": (None if c.get("break_even_requests_per_month") is None
                             else c["break_even_requests_per_month"] / 1e6),
        }

    note = ('<p class="note">Warm latency: the stability test (one caller at a time) without its cold starts. '
            "Cold start: the first requests after an idle gap longer than the idle timeout. Throttle rates and p95 "
            "per multiplier: the concurrency test's steady windows, callers back to back. $ per 1M: the warm mean "
            "latency billed per ms at the memory size's price, plus data in and out.</p>")
    return configurations_table(document, columns, derived, note)


def _ok(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in document.get("configurations") or [] if c.get("status") == "ok"]


def fig_throttle(document: dict[str, Any], key: str = "throttle", div_id: str = "fig-sls-throttle") -> str:
    fig = go.Figure()
    for c in _ok(document):
        points = [f for f in c.get("concurrency") or [] if f.get("requests")]
        if not points:
            continue
        if key == "throttle":
            y = [100.0 * (f.get("throttle_rate") or 0.0) for f in points]
        else:
            y = [f.get("p95_ms") for f in points]
        fig.add_trace(go.Scatter(x=[f["multiplier"] for f in points], y=y, mode="lines+markers", name=c["label"],
                                 text=[f"{f['users']} callers, {f.get('goodput_rps') or 0:.1f} req/s served"
                                       for f in points],
                                 hovertemplate="x%{x}: %{y:.1f} (%{text})"))
    if not fig.data:
        return f'<p id="{div_id}">No concurrency test ran.</p>'
    if key == "throttle":
        fig.update_layout(title="Throttled share of invocations vs callers (multiplier x MaxConcurrency)",
                          xaxis_title="concurrency multiplier", yaxis_title="throttled (%)", height=420)
    else:
        fig.update_layout(title="p95 latency of successful invocations vs callers",
                          xaxis_title="concurrency multiplier",
                          yaxis_title="p95 (ms)", height=420)
    return figure_html(fig, div_id)


def fig_cold(document: dict[str, Any]) -> str:
    fig = go.Figure()
    for c in _ok(document):
        samples = c.get("cold_start_samples_ms") or []
        if samples:
            fig.add_trace(go.Histogram(x=samples, name=c["label"], opacity=0.6, nbinsx=20))
    if not fig.data:
        return '<p id="fig-sls-cold">No cold-start test ran.</p>'
    fig.update_layout(barmode="overlay", title="Cold-start latency: first requests after an idle gap",
                      xaxis_title="latency (ms)", yaxis_title="requests", height=420)
    return figure_html(fig, "fig-sls-cold")


def fig_cost(document: dict[str, Any]) -> str:
    compare = document.get("compare_instance") or {}
    priced = [c for c in _ok(document) if c.get("cost_per_1m") is not None]
    if not priced:
        return '<p id="fig-sls-cost">No cost figures (no warm latency measured).</p>'
    grid = traffic_grid([c.get("break_even_rps") for c in priced])
    fig = go.Figure()
    for c in priced:
        per_request = c["cost_per_1m"] / 1e6
        fig.add_trace(go.Scatter(x=grid, y=[r * 3600 * HOURS_PER_MONTH * per_request for r in grid], mode="lines",
                                 name=f"serverless {c['label']}",
                                 hovertemplate="%{x:.1f} req/s: $%{y:,.2f} a month"))
    price = compare.get("price_per_hour")
    if price is not None:
        name = compare.get("instance_type") or "real-time instance"
        fig.add_trace(go.Scatter(x=grid, y=[monthly_realtime_usd(r, price, compare.get("capacity_rps")) for r in grid],
                                 mode="lines", name=f"real-time {name} (${price:g}/h)",
                                 line={"dash": "dash", "color": "black"},
                                 hovertemplate="%{x:.1f} req/s: $%{y:,.2f} a month"))
        marks = [c for c in priced if c.get("break_even_rps") is not None]
        if marks:
            fig.add_trace(go.Scatter(x=[c["break_even_rps"] for c in marks],
                                     y=[monthly_realtime_usd(c["break_even_rps"], price,
                                                             compare.get("capacity_rps")) for c in marks],
                                     mode="markers", name="break-even",
                                     marker={"symbol": "x", "size": 12, "color": "black"},
                                     text=[f"{c['label']}: {c['break_even_requests_per_month'] / 1e6:.1f}M "
                                           "requests a month" for c in marks],
                                     hovertemplate="%{x:.1f} req/s (%{text})"))
    fig.update_layout(title=f"Monthly cost vs sustained traffic ({HOURS_PER_MONTH} h a month)",
                      xaxis_title="sustained traffic (req/s)", yaxis_title="$ per month", height=480)
    return figure_html(fig, "fig-sls-cost")


def render_html(document: dict[str, Any]) -> str:
    compare = document.get("compare_instance") or {}
    prices = document.get("prices") or {}
    versus = (f"compared with real-time {page_text(str(compare.get('instance_type') or 'instance'))} at "
              f"${compare['price_per_hour']:g}/h ({page_text(str(compare.get('price_source') or ''))}); "
              if compare.get("price_per_hour") is not None else "")
    note = (f"{page_text(document.get('description') or '')} deploy: {page_text(document.get('deploy', ''))}; "
            f"{len(document.get('configurations') or [])} configurations; "
            f"{versus}{page_text(prices.get('serverless') or '')}; "
            f"{page_text(document.get('started_at', ''))} to {page_text(document.get('ended_at', ''))}.")
    return page(document, "Serverless sweep", note, [
        ("Configurations", table(document)),
        ("Throttles vs callers", fig_throttle(document)),
        ("Latency vs callers", fig_throttle(document, key="latency", div_id="fig-sls-latency")),
        ("Cold starts", fig_cold(document)),
        ("Cost vs traffic", fig_cost(document)),
    ])


def write_all(out_dir: Path, document: dict[str, object], html_too: bool = True) -> dict[str, Path]:
    return write_files(out_dir, document, write_csv, render_html, html_too)
