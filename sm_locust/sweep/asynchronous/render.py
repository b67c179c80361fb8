"""An async sweep's result files: `sweep.json`, `sweep.csv`, `sweep.html` (docs/async.md).

`sweep.json` is `AsyncSweep.document` (`kind: async`); `sweep.csv` one row per configuration;
`sweep.html`, offline, the recommendation, the table (the capacity with its bracket, the time to result
at it with its interval, instance-hours and $ per 1M) and every configuration's time to result per
rate step of its search, the SLO drawn across.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from sm_locust.sweep.asynchronous.rank import bracket_text
from sm_locust.sweep.asynchronous.rows import AsyncFigures, AsyncRow
from sm_locust.sweep.progress import configuration_line as line
from sm_locust.sweep.render import configurations_table, figure_html, page, write_files, write_rows
from sm_locust.util.formatting import money, number, with_interval

SCHEMA = 1
COLUMNS = ("instance_count", "max_concurrent_invocations_per_instance", "price_per_hour", "fleet_per_hour",
           "capacity_rps", "capacity_ci95", "stopped_by", "time_to_result_ms", "time_to_result_ci95",
           "instance_hours_per_1m", "cost_per_1m", "cost_per_1m_ci95", "accepted", "results", "failures",
           "awaited_at_stop", "backlog_max", "error_rate", "inconclusive", "inconclusive_reason", "meets_objective",
           "lost_because", "client_bound", "run_dir", "deploy_s", "test_s", "wall_s")


def configuration_line(index: int, total: int, row: AsyncRow, percentile_label: str) -> str:
    """`[1/4] instance_count 1, ...: capacity 6 req/s [6, 9), p95 time to result 640 ms [600, 700]; $1.06 per 1M
    (41 s)`; the search's INCONCLUSIVE said loudly."""

    def figures() -> str:
        f = row.figures or AsyncFigures()
        if f.capacity_rps is None:
            text = f"no capacity: {f.no_capacity_reason}"
        else:
            text = (f"capacity {bracket_text(f.capacity_rps, f.capacity_ci95)}, {percentile_label} time to result "
                    f"{with_interval(f.time_to_result_ms, f.time_to_result_ci95, ' ms')}")
            if f.cost_per_1m is not None:
                text += f"; {money(f.cost_per_1m)} per 1M"
            elif f.instance_hours_per_1m is not None:
                text += f"; {number(f.instance_hours_per_1m, 2)} instance-hours per 1M"
        if f.inconclusive:
            text += f" - INCONCLUSIVE: {f.inconclusive_reason}"
        return text

    return line(index, total, row, figures)


def csv_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    header = ["index", "label", "status", "reason", *COLUMNS]
    rows = []
    for c in document.get("configurations") or []:
        row = {k: c.get(k) for k in header}
        for key in ("capacity_ci95", "time_to_result_ci95", "cost_per_1m_ci95"):
            if isinstance(row.get(key), list):
                row[key] = " ".join("" if v is None else f"{v:g}" for v in row[key])
        rows.append(row)
    return header, rows


def write_csv(path: Path, document: dict[str, object]) -> None:
    write_rows(path, *csv_rows(document))


def table(document: dict[str, Any]) -> str:
    p = (document.get("objective") or {}).get("percentile_label", "p95")
    columns = [("configuration", "label", 0), ("status", "status", 0), ("instances", "instance_count", 0),
               ("workers per instance", "max_concurrent_invocations_per_instance", 0),
               ("capacity [bracket)", "capacity_text", 0), ("stopped by", "stopped_by", 0),
               (f"{p} time to result at it", "ttr_text", 0), ("instance-hours per 1M", "instance_hours_per_1m", 2),
               ("$ per 1M", "cost_text", 0), ("accepted", "accepted", 0), ("failures", "failures", 0),
               ("backlog max", "backlog_max", 0), ("why not", "lost_because", 0)]

    def derived(c: dict[str, Any]) -> dict[str, object]:
        cost, bounds = c.get("cost_per_1m"), c.get("cost_per_1m_ci95")
        return {"capacity_text": None if c.get("capacity_rps") is None else
                bracket_text(c["capacity_rps"], c.get("capacity_ci95")),
                "ttr_text": None if c.get("time_to_result_ms") is None else
                with_interval(c["time_to_result_ms"], c.get("time_to_result_ci95"), " ms"),
                "cost_text": None if cost is None else
                "$" + with_interval(cost, None if not bounds or None in bounds else bounds, digits=2)}

    note = ('<p class="note">Capacity: the highest rate of the async search whose backlog was shown bounded and whose '
            "time to result was shown within the SLO; the bracket runs to the rate that stopped the search (its "
            "backlog grew or its time to result broke the SLO), which is not within it. Instance-hours and $ per 1M: "
            "the configuration's instances for the time a million inferences take at the capacity, with the same "
            "arithmetic at the bracket's ends. An INCONCLUSIVE search (a step above the capacity whose SLO verdict "
            "stayed undecided) is never recommended.</p>")
    return configurations_table(document, columns, derived, note)


def fig_steps(document: dict[str, Any]) -> str:
    """Each configuration's time to result per rate step, the SLO across."""
    fig = go.Figure()
    for c in document.get("configurations") or []:
        steps = [s for s in c.get("steps") or [] if s.get("time_to_result_ms") is not None]
        if steps:
            fig.add_trace(go.Scatter(x=[s["rate_rps"] for s in steps], y=[s["time_to_result_ms"] for s in steps],
                                     mode="lines+markers", name=str(c.get("label"))))
    if not fig.data:
        return '<p id="fig-async-steps">No step judged its time to result.</p>'
    slo = (document.get("objective") or {}).get("slo_ms")
    if slo is not None:
        fig.add_hline(y=float(slo), line_dash="dash", annotation_text=f"SLO {slo:g} ms")
    p = (document.get("objective") or {}).get("percentile_label", "p95")
    fig.update_layout(title=f"{p} time to result per rate step of each search", xaxis_title="arrival rate (req/s)",
                      yaxis_title=f"{p} time to result (ms)", height=420, template="plotly_white")
    return figure_html(fig, "fig-async-steps")


def render_html(document: dict[str, Any]) -> str:
    note = (f"{len(document.get('configurations') or [])} configurations on {document.get('deploy')}; instance count x "
            "MaxConcurrentInvocationsPerInstance, each measured by the async search against the time-to-result SLO")
    return page(document, "Async sweep", note, [("Configurations", table(document)),
                                                 ("Time to result by rate", fig_steps(document))])


def write_all(out_dir: Path, document: dict[str, object], html_too: bool = True) -> dict[str, Path]:
    return write_files(out_dir, document, write_csv, render_html, html_too)
