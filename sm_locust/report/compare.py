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

Outputs: `compare.csv` (one row per run, the field names as columns) and `compare.html` (one
self-contained page): the table with a human label per figure and, for every run after the first,
its change against the first (the baseline), and the charts, each with every run or a line saying
which run is not in it and why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import SupportsFloat

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from sm_locust.record.model import SustainablePoint
from sm_locust.record.runfolder import read_run
from sm_locust.report import cost as cost_mod
from sm_locust.report.llm import LLM_COLUMNS, LLM_FIGURES, llm_columns
from sm_locust.report.loadaxis import by_load, integer_axis
from sm_locust.report.merge import inconclusive_of
from sm_locust.report.pipeline import ReportOptions, compute, resolve_defaults
from sm_locust.report.policy import is_rate_run
from sm_locust.report.render import CSS
from sm_locust.report.sources import MetricRequest, create_source
from sm_locust.sanitize import clean, page_text
from sm_locust.util.formatting import is_missing, number, percent, with_interval
from sm_locust.util.outputs import write_atomic

ROW_COLUMNS = [
    "run", "endpoint", "instance_type", "instance_count", "users", "max_sustainable_rps", "goodput_rps", "p50_ms",
    "p95_ms", "p99_ms", "error_rate", "usd_per_million", "transactions_per_hour",
    "autoscaling_target_invocations_per_instance", "cw_CPUUtilization_avg_pct", "cw_MemoryUtilization_avg_pct",
    "cw_ModelLatency_avg_ms", "run_requests", "run_failures", "run_goodput_rps", "gaps",
    # issue 28: the point's step, its intervals, the capacity, and whether the run is inconclusive
    "step", "rps_ci95_low", "rps_ci95_high", "p95_ms_ci95_low", "p95_ms_ci95_high", "capacity_rps",
    "capacity_ci95_low", "capacity_ci95_high", "inconclusive",
    "usd_per_million_ci95_low", "usd_per_million_ci95_high", "autoscaling_target_ci95_low",
    "autoscaling_target_ci95_high", "goodput_rps_ci95_low", "goodput_rps_ci95_high", "p50_ms_ci95_low",
    "p50_ms_ci95_high", "p99_ms_ci95_low", "p99_ms_ci95_high", "transactions_per_hour_ci95_low",
    "transactions_per_hour_ci95_high",
]


# column -> (what the page calls it, how it is printed: digits, or "%" for a fraction); in page order
LABELS: dict[str, tuple[str, int | str | None]] = {
    "endpoint": ("endpoint", None), "instance_type": ("instance type", None),
    "instance_count": ("instances", 0), "users": ("users at the sustainable point", 0),
    "max_sustainable_rps": ("max sustainable throughput (req/s)", 1), "goodput_rps": ("goodput there (req/s)", 1),
    "p50_ms": ("p50 there (ms)", 1), "p95_ms": ("p95 there (ms)", 1), "p99_ms": ("p99 there (ms)", 1),
    "error_rate": ("error rate there", "%"), "usd_per_million": ("$ per 1M inferences", 2),
    "transactions_per_hour": ("transactions per hour", 0),
    "autoscaling_target_invocations_per_instance": ("autoscaling target (invocations per instance per minute)", 0),
    "cw_CPUUtilization_avg_pct": ("endpoint CPU there (avg %, summed over cores)", 1),
    "cw_MemoryUtilization_avg_pct": ("endpoint memory there (avg %)", 1),
    "cw_ModelLatency_avg_ms": ("ModelLatency there (avg ms, CloudWatch)", 1),
    "run_requests": ("whole run: requests", 0), "run_failures": ("whole run: failures", 0),
    "run_goodput_rps": ("whole run: goodput (req/s)", 1), "gaps": ("gaps (see below)", 0),
    "output_tokens_per_s": ("output tokens/s there", 1), "ttft_p95_ms": ("TTFT p95 there (ms)", 0),
    "itl_p95_ms": ("ITL p95 there (ms)", 1), "usd_per_million_output_tokens": ("$ per 1M output tokens", 2),
    "step": ("sustainable step (index)", 0), "capacity_rps": ("capacity (req/s)", 1),
    "inconclusive": ("inconclusive (no step decided)", None),
}
# text, an index or a flag: not a figure of the run, so no change in % against the baseline
NO_CHANGE = ("endpoint", "instance_type", "gaps", "step", "inconclusive")
# figure -> the columns of its 95 % interval; shown beside the figure, never as rows of their own
INTERVALS: dict[str, tuple[str, str]] = {
    "max_sustainable_rps": ("rps_ci95_low", "rps_ci95_high"),
    "p95_ms": ("p95_ms_ci95_low", "p95_ms_ci95_high"),
    "capacity_rps": ("capacity_ci95_low", "capacity_ci95_high"),
    "usd_per_million": ("usd_per_million_ci95_low", "usd_per_million_ci95_high"),
    "autoscaling_target_invocations_per_instance": ("autoscaling_target_ci95_low", "autoscaling_target_ci95_high"),
    "goodput_rps": ("goodput_rps_ci95_low", "goodput_rps_ci95_high"),
    "p50_ms": ("p50_ms_ci95_low", "p50_ms_ci95_high"),
    "p99_ms": ("p99_ms_ci95_low", "p99_ms_ci95_high"),
    "transactions_per_hour": ("transactions_per_hour_ci95_low", "transactions_per_hour_ci95_high"),
    **{column: (f"{column}_ci95_low", f"{column}_ci95_high") for column in LLM_FIGURES},
}
BOUNDS = frozenset(c for pair in INTERVALS.values() for c in pair)


def label(column: str) -> str:
    return LABELS.get(column, (column, 2))[0]


def shown(column: str, value: object, interval: tuple[object, object] | None = None) -> str:
    """A cell of the compare table: the formatter's number with the figure's own digits, and its 95 %
    interval (`with_interval`'s wording) when the run has one."""
    digits = LABELS.get(column, (column, 2))[1]
    if isinstance(digits, int) and interval is not None and not is_missing(value):
        return with_interval(value, interval, digits=digits)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(digits, str):  # "%": a fraction
        return percent(value, 2)
    if digits is None:
        return number(value)
    if digits == 0 and not is_missing(value) and isinstance(value, (int, float, np.number)):
        return number(int(round(float(value))), 0)
    if isinstance(value, (int, float, np.number)):  # a whole number read from JSON prints as the others: 5.0
        return number(float(value), digits)
    return number(value, digits)


def change(column: str, value: object, baseline: object) -> str:
    """The change of `value` against the baseline's, in %: '+12.3 %', '-4.0 %', '' when either is
    missing, not a number, or the baseline is 0."""
    if column in NO_CHANGE or is_missing(value) or is_missing(baseline):
        return ""
    if not isinstance(value, (SupportsFloat, str)) or not isinstance(baseline, (SupportsFloat, str)):
        return ""
    try:
        now, then = float(value), float(baseline)
    except (TypeError, ValueError):
        return ""
    if then == 0:
        return "" if now == 0 else "new"
    return f"{(now - then) / abs(then) * 100:+.1f} %"


def interval_of(column: str, row: pd.Series | Mapping[str, object]) -> tuple[object, object] | None:
    """The figure's 95 % interval in a row of compare.csv's table, or None (no interval for it, or
    a bound missing)."""
    pair = INTERVALS.get(column)
    if pair is None or any(c not in row or is_missing(row[c]) for c in pair):
        return None
    return row[pair[0]], row[pair[1]]


@dataclass
class RunComparison:
    name: str
    row: dict[str, object]
    steps: pd.DataFrame
    gaps: list[str] = field(default_factory=list)
    rate_phases: bool = False  # its load was rate phases (traffic, a watched policy): not set by users
    warnings: list[str] = field(default_factory=list)  # complete, but its answer is not decided (INCONCLUSIVE)


def summarize_run(run_dir: str | os.PathLike[str], prices: cost_mod.PriceTable, *, safety_factor: float = 0.5,
                  target_rps: float | None = None) -> RunComparison:
    data = read_run(run_dir)
    previous = data.record.cost or {}
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
    p = point or SustainablePoint()  # no point: every figure None
    row: dict[str, object] = {
        "run": data.folder.name, "endpoint": opts.endpoint_name, "instance_type": opts.instance_type,
        "instance_count": opts.instance_count or 1,
        "users": p.users, "max_sustainable_rps": p.rps, "goodput_rps": p.goodput_rps,
        "p50_ms": p.p50_ms, "p95_ms": p.p95_ms, "p99_ms": p.p99_ms,
        "usd_per_million": cost.get("usd_per_million"), "transactions_per_hour": cost.get("transactions_per_hour"),
        "autoscaling_target_invocations_per_instance": cost.get("autoscaling_target_invocations_per_instance"),
    }
    inconclusive, why = (bool(p.inconclusive), p.inconclusive_reason) if point is not None else \
        inconclusive_of(data.record)
    row.update(step=p.step, capacity_rps=p.capacity_rps, inconclusive=inconclusive)
    rate = p.rps_ci95
    for key, interval in (("rps", rate), ("p95_ms", p.p95_ms_ci95),
                          ("capacity", p.capacity_ci95), ("usd_per_million", cost.get("usd_per_million_ci95")),
                          ("autoscaling_target", cost.get("autoscaling_target_invocations_per_instance_ci95")),
                          ("goodput_rps", p.goodput_rps_ci95), ("p50_ms", p.p50_ms_ci95),
                          ("p99_ms", p.p99_ms_ci95),
                          ("transactions_per_hour", [cost_mod.transactions_per_hour(r) for r in rate]
                           if rate is not None and row["transactions_per_hour"] is not None else None)):
        pair = interval if isinstance(interval, (list, tuple)) else (None, None)
        row[f"{key}_ci95_low"], row[f"{key}_ci95_high"] = pair
    if point is not None and point.step is not None and not steps.empty:
        at = steps[steps["step"] == point.step].iloc[0]
        row["error_rate"] = at.get("error_rate")
        for col in ("cw_CPUUtilization_avg_pct", "cw_MemoryUtilization_avg_pct", "cw_ModelLatency_avg_ms"):
            row[col] = at.get(col, float("nan"))
    if data.record.has("totals"):  # the whole run, exact (summary.json)
        totals = data.totals
        row.update(run_requests=totals.requests, run_failures=totals.failures, run_goodput_rps=totals.goodput_rps)
    row["gaps"] = len(gaps)
    row.update(llm_columns(data.record, point, cost))  # LLM runs: tokens/s, TTFT, ITL, $ per 1M output tokens
    return RunComparison(data.folder.name,
                         {c: row.get(c) for c in ROW_COLUMNS + LLM_COLUMNS if c in ROW_COLUMNS or c in row},
                         steps, gaps, rate_phases=is_rate_run(data.summary),
                         warnings=[inconclusive_warning(why)] if inconclusive else [])


def inconclusive_warning(reason: object) -> str:
    """What compare says of a run whose verdict is INCONCLUSIVE: the verdict and its reason, as the report says it."""
    return f"INCONCLUSIVE: {reason or 'the run did not decide its answer'}"


def _unique_names(runs: list[RunComparison]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        if n:
            r.name = f"{r.name} ({n + 1})"
            r.row["run"] = r.name


def compare_table_html(table: pd.DataFrame) -> str:
    """compare.csv's table turned on its side: one row per figure (its label), one column per run, and
    beside every run after the first its change against the first run (the baseline), in %; a wider
    table scrolls inside its own box instead of the page."""
    runs = [str(r) for r in table["run"]]
    head = "<th>figure</th>" + "".join(
        f"<th>{page_text(r)}</th>" + (f"<th>change vs {page_text(runs[0])}</th>" if i else "")
        for i, r in enumerate(runs))
    rows, empty = [], []
    records = [row for _, row in table.iterrows()]
    for column in table.columns:
        if column == "run" or column in BOUNDS:  # the bounds are shown beside their figure
            continue
        values = list(table[column])
        if all(is_missing(v) for v in values):  # no run has it: named under the table, not a row of n/a
            empty.append(label(column))
            continue
        cells = "".join(f"<td>{page_text(shown(column, v, interval_of(column, records[i])))}</td>"
                        + (f'<td class="change">{page_text(change(column, v, values[0]))}</td>' if i else "")
                        for i, v in enumerate(values))
        rows.append(f'<tr><td title="{page_text(str(column))}">{page_text(label(column))}</td>{cells}</tr>')
    none = (f"<p><small>No run has: {page_text('; '.join(empty))}.</small></p>" if empty else "")
    return (f'<div class="scroll"><table id="compare"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            f"</tbody></table></div>{none}")


def terminal_table(table: pd.DataFrame, columns: tuple[str, ...] = ("max_sustainable_rps", "p95_ms",
                                                                     "usd_per_million")) -> list[str]:
    """`sm-locust compare`'s closing lines: one row per run, a few figures (each with its 95 % interval
    when the run has one) and each one's change against the first run; run names sanitised."""
    present = [c for c in columns if c in table.columns and table[c].notna().any()]
    first = table.iloc[0]
    rows = [["run", *(label(c) for c in present)]]
    for i, (_, row) in enumerate(table.iterrows()):
        cells = [clean(row["run"])]
        for c in present:
            text = shown(c, row[c], interval_of(c, row))
            delta = change(c, row[c], first[c]) if i else ""
            cells.append(f"{text} ({delta})" if delta else text)
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths,
                                                                                              strict=True)))
            for r in rows]


def render_compare(runs: list[RunComparison], table: pd.DataFrame) -> str:
    def div(fig, div_id, title, ytitle, xtitle="users", left_out=()):
        fig.update_layout(title=title, xaxis_title=xtitle, yaxis_title=ytitle, template="plotly_white", height=420)
        chart = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})
        why = "".join(f"<li>{page_text(name)}: {page_text(reason)}</li>" for name, reason in left_out)
        return chart + (f'<p class="left-out"><small>Not in this chart:</small></p><ul>{why}</ul>' if why else "")

    thr, lat = go.Figure(), go.Figure()
    no_steps = [(r.name, "no load steps in the run") for r in runs if r.steps.empty]
    no_steps += [(r.name, "its load was rate phases, which users do not set (its report draws them over time)")
                 for r in runs if r.rate_phases and not r.steps.empty]
    users: list[float] = []
    for r in runs:
        if not r.steps.empty and not r.rate_phases:
            ordered: pd.DataFrame = by_load(r.steps)
            users += list(ordered["users"])
            thr.add_trace(go.Scatter(x=ordered["users"], y=ordered.get("goodput_rps", ordered["rps"]),
                                     mode="lines+markers", name=r.name))
            lat.add_trace(go.Scatter(x=ordered["users"], y=ordered["p95_ms"], mode="lines+markers", name=r.name))
    integer_axis(thr, users)
    integer_axis(lat, users)
    if thr.data:
        figs = [div(thr, "cmp-throughput", "Goodput vs users (each run joined by load)", "successful invocations/s",
                    left_out=no_steps),
                div(lat, "cmp-latency", "p95 latency vs users (each run joined by load)", "ms", left_out=no_steps)]
    else:  # no run to draw: a note, not two empty charts
        why = "".join(f"<li>{page_text(name)}: {page_text(reason)}</li>" for name, reason in no_steps)
        figs = [f'<div id="cmp-throughput" class="missing"><h3>Goodput and p95 latency vs users</h3><p>Not drawn:'
                f"</p><ul>{why}</ul></div>"]
    priced = table.dropna(subset=["usd_per_million"])
    unpriced = [(str(name), "no price (pass --instance-type or --price-per-hour to sm-locust report, or --prices)")
                for name in table.loc[table["usd_per_million"].isna(), "run"]]
    if len(priced):
        bar = go.Figure(go.Bar(x=priced["run"], y=priced["usd_per_million"],
                               text=[shown("usd_per_million", v) for v in priced["usd_per_million"]],
                               textposition="outside"))
        figs.append(div(bar, "cmp-cost", "$ per 1M inferences at max sustainable throughput", "USD", "run",
                        left_out=unpriced))
    else:
        figs.append('<div id="cmp-cost" class="missing"><h3>$ per 1M inferences</h3><p>Not drawn: no run has a '
                    "price (pass --instance-type or --price-per-hour to sm-locust report, or --prices).</p></div>")
    gaps = "".join(f"<li>{page_text(r.name)}: {page_text(g)}</li>" for r in runs for g in r.warnings + r.gaps)
    gap_html = (f'<section id="gaps"><h2>Gaps and warnings</h2><ul>{gaps}</ul></section>' if gaps
                else '<section id="gaps" class="none"><h2>Gaps and warnings</h2><p>None.</p></section>')
    return "\n".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>sm-locust compare</title>',
        f"<style>{CSS}</style>", f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>',
        f"<h1>sm-locust compare: {len(runs)} runs</h1>",
        f"<p><small>Changes are against the first run, {page_text(runs[0].name) if runs else ''}.</small></p>",
        compare_table_html(table), *figs, gap_html, "</body></html>",
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

