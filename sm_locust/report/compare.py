"""Compare runs side by side: which instance type, container setting or payload wins.

Each run is reduced to one row (max sustainable throughput, latency there, error rate, $ per 1M,
transactions per hour, endpoint CPU and ModelLatency there when a report already fetched them)
with the same compute as `sm-locust report`, without calling CloudWatch: a comparison must be
cheap and repeatable. The endpoint-side columns come from each run's `steps.csv` when
`sm-locust report` wrote one, and the price from the run's summary.json `cost` key (or the
instance type found in the run).

Counting is the one rule (`sm_locust.invocation.is_invocation`): requests are logical
invocations, read from each run's summary.json (exact, from Locust's in-memory stats; never the
lagging locust_stats.csv), and goodput (successful invocations per second) stands beside the
attempt rate, at the sustainable point and over the whole run.

Outputs: `compare.csv` (one row per run) and `compare.html` (one self-contained page).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from sm_locust.record.runfolder import read_run
from sm_locust.report import cost as cost_mod
from sm_locust.report.llm import LLM_COLUMNS, llm_columns
from sm_locust.report.pipeline import ReportOptions, compute, resolve_defaults
from sm_locust.report.render import CSS
from sm_locust.report.sources import MetricRequest, create_source
from sm_locust.sanitize import page_text
from sm_locust.util.formatting import number
from sm_locust.util.outputs import write_atomic

ROW_COLUMNS = [
    "run", "endpoint", "instance_type", "instance_count", "users", "max_sustainable_rps", "goodput_rps", "p50_ms",
    "p95_ms", "p99_ms", "error_rate", "usd_per_million", "transactions_per_hour",
    "autoscaling_target_invocations_per_instance", "cw_CPUUtilization_avg_pct", "cw_MemoryUtilization_avg_pct",
    "cw_ModelLatency_avg_ms", "run_requests", "run_failures", "run_goodput_rps", "gaps",
]


@dataclass
class RunComparison:
    name: str
    row: dict[str, Any]
    steps: pd.DataFrame
    gaps: list[str] = field(default_factory=list)


def summarize_run(run_dir: str | os.PathLike[str], prices: cost_mod.PriceTable, *, safety_factor: float = 0.5,
                  target_rps: float | None = None) -> RunComparison:
    data = read_run(run_dir)
    previous = data.summary.get("cost")
    if not isinstance(previous, dict):
        previous = {}
    opts = resolve_defaults(ReportOptions(
        cloudwatch=False, instance_type=previous.get("instance_type"), instance_count=previous.get("instance_count"),
        price_per_hour=previous.get("price_per_hour_usd") if previous.get("price_source") == "--price-per-hour"
        else None,
        safety_factor=safety_factor, target_rps=target_rps,
    ), data.summary, data.options)
    nothing = MetricRequest(opts.endpoint_name or "", 0, 0)
    none = create_source("none", reason="compare does not fetch CloudWatch").fetch(nothing)
    _, steps, point, cost, _, gaps, _ = compute(data, opts, none, prices)
    gaps = data.gaps + gaps
    saved = data.folder / "steps.csv"
    if saved.is_file() and not steps.empty:  # endpoint-side columns from an earlier `sm-locust report`
        try:
            saved_steps = pd.read_csv(saved)
            if len(saved_steps) == len(steps):
                for col in saved_steps.columns:
                    if col.startswith("cw_") or col.endswith("latency_ms") or col == "network_client_ms":
                        steps[col] = saved_steps[col].to_numpy()
        except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError):
            gaps.append(f"{saved} could not be read")
    row: dict[str, Any] = {
        "run": data.folder.name, "endpoint": opts.endpoint_name, "instance_type": opts.instance_type,
        "instance_count": opts.instance_count or 1,
        "users": (point or {}).get("users"), "max_sustainable_rps": (point or {}).get("rps"),
        "goodput_rps": (point or {}).get("goodput_rps"),
        "p50_ms": (point or {}).get("p50_ms"), "p95_ms": (point or {}).get("p95_ms"),
        "p99_ms": (point or {}).get("p99_ms"),
        "usd_per_million": cost.get("usd_per_million"), "transactions_per_hour": cost.get("transactions_per_hour"),
        "autoscaling_target_invocations_per_instance": cost.get("autoscaling_target_invocations_per_instance"),
    }
    if point and point.get("step") is not None and not steps.empty:
        at = steps[steps["step"] == point["step"]].iloc[0]
        row["error_rate"] = at.get("error_rate")
        for col in ("cw_CPUUtilization_avg_pct", "cw_MemoryUtilization_avg_pct", "cw_ModelLatency_avg_ms"):
            row[col] = at.get(col, float("nan"))
    if isinstance(data.summary.get("totals"), dict):  # the whole run, exact (summary.json)
        totals = data.totals
        row.update(run_requests=totals.requests, run_failures=totals.failures, run_goodput_rps=totals.goodput_rps)
    row["gaps"] = len(gaps)
    row.update(llm_columns(data.summary, point, cost))  # LLM runs: tokens/s, TTFT, ITL, $ per 1M output tokens
    return RunComparison(data.folder.name,
                         {c: row.get(c) for c in ROW_COLUMNS + LLM_COLUMNS if c in ROW_COLUMNS or c in row},
                         steps, gaps)


def _unique_names(runs: list[RunComparison]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        if n:
            r.name = f"{r.name} ({n + 1})"
            r.row["run"] = r.name


def compare_table_html(table: pd.DataFrame) -> str:
    """compare.csv's table turned on its side: one column per run, one row per figure (two to six
    runs side by side fit a page where 20-odd figure columns did not); a wider table scrolls inside
    its own box instead of the page."""
    runs = [str(r) for r in table["run"]]
    head = "<th>figure</th>" + "".join(f"<th>{page_text(r)}</th>" for r in runs)
    body = "".join(f"<tr><td>{page_text(str(column))}</td>"
                   + "".join(f"<td>{page_text(number(v, 2))}</td>" for v in table[column]) + "</tr>"
                   for column in table.columns if column != "run")
    return f'<div class="scroll"><table id="compare"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render_compare(runs: list[RunComparison], table: pd.DataFrame) -> str:
    def div(fig, div_id, title, ytitle, xtitle="users"):
        fig.update_layout(title=title, xaxis_title=xtitle, yaxis_title=ytitle, template="plotly_white", height=420)
        return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})

    thr, lat = go.Figure(), go.Figure()
    for r in runs:
        if not r.steps.empty:
            thr.add_trace(go.Scatter(x=r.steps["users"], y=r.steps.get("goodput_rps", r.steps["rps"]),
                                     mode="lines+markers", name=r.name))
            lat.add_trace(go.Scatter(x=r.steps["users"], y=r.steps["p95_ms"], mode="lines+markers", name=r.name))
    figs = [div(thr, "cmp-throughput", "Goodput vs users", "successful invocations/s"),
            div(lat, "cmp-latency", "p95 latency vs users", "ms")]
    priced = table.dropna(subset=["usd_per_million"])
    if len(priced):
        bar = go.Figure(go.Bar(x=priced["run"], y=priced["usd_per_million"]))
        figs.append(div(bar, "cmp-cost", "$ per 1M inferences at max sustainable throughput", "USD", "run"))
    gaps = "".join(f"<li>{page_text(r.name)}: {page_text(g)}</li>" for r in runs for g in r.gaps)
    gap_html = (f'<section id="gaps"><h2>Gaps and warnings</h2><ul>{gaps}</ul></section>' if gaps
                else '<section id="gaps" class="none"><h2>Gaps and warnings</h2><p>None.</p></section>')
    return "\n".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>sm-locust compare</title>',
        f"<style>{CSS}</style>", f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>',
        f"<h1>sm-locust compare: {len(runs)} runs</h1>", gap_html,
        compare_table_html(table), *figs, "</body></html>",
    ])


def compare_table(run_dirs: list[str], *, prices_file: str | None = None, safety_factor: float = 0.5,
                  target_rps: float | None = None, progress=None) -> tuple[list[RunComparison], pd.DataFrame]:
    """Each run reduced to its row (`summarize_run`), names made unique; the rows as compare.csv's table."""
    say = progress or (lambda _m: None)
    prices = cost_mod.load_prices(prices_file)
    runs = []
    for d in run_dirs:
        say(f"reading {d}")
        runs.append(summarize_run(d, prices, safety_factor=safety_factor, target_rps=target_rps))
    _unique_names(runs)
    llm = [c for c in LLM_COLUMNS if any(c in r.row for r in runs)]
    return runs, pd.DataFrame([r.row for r in runs], columns=ROW_COLUMNS + llm)


def compare_runs(run_dirs: list[str], out_dir: str | os.PathLike[str], *, prices_file: str | None = None,
                 safety_factor: float = 0.5, target_rps: float | None = None,
                 progress=None) -> tuple[dict[str, Path], list[str]]:
    """Write compare.csv and compare.html into out_dir; returns (outputs, gaps)."""
    runs, table = compare_table(run_dirs, prices_file=prices_file, safety_factor=safety_factor, target_rps=target_rps,
                                progress=progress)
    return write_compare(runs, table, out_dir), [f"{r.name}: {g}" for r in runs for g in r.gaps]


def write_compare(runs: list[RunComparison], table: pd.DataFrame, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """compare.csv and compare.html in out_dir; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    outputs = {"csv": out / "compare.csv", "html": out / "compare.html"}
    write_atomic(outputs["csv"], table.to_csv(index=False, float_format="%.6g"))
    write_atomic(outputs["html"], render_compare(runs, table))
    return outputs


def best(table: pd.DataFrame) -> dict[str, Any]:
    """Which run wins on throughput (goodput at the sustainable point) and on cost (for a one-line verdict)."""
    out: dict[str, Any] = {}
    rank = "goodput_rps" if table["goodput_rps"].notna().any() else "max_sustainable_rps"
    if table[rank].notna().any():
        out["highest_rps"] = table["run"].iloc[int(np.nanargmax(table[rank].to_numpy(dtype=float)))]
    if table["usd_per_million"].notna().any():
        out["cheapest"] = table["run"].iloc[int(np.nanargmin(table["usd_per_million"].to_numpy(dtype=float)))]
    return out
