"""The report's LLM part: tokens/s, TTFT and ITL vs users, and $ per 1M output tokens.

Only when summary.json has an `llm` object. $ per 1M output tokens = price per hour x instances /
(output tokens/s x 3600) x 1,000,000, with the tokens/s at the sustainable point: the plateau's own
when the search ran on tokens, else the last step at the point's users, else the whole run's.
Each figure shows its 95 % interval (`llm.ci95`, the run's or the step's: the token search's own)
where the record has one. A `--turns` run adds a row per turn index: its prompt tokens, TTFT, ITL
and end-to-end percentiles with their 95 % intervals. `sm-locust compare` shows the same columns
(`LLM_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sm_locust.record.model import JsonObject, Llm, LlmTurn, Summary, SustainablePoint
from sm_locust.report.cost import Cost, cost_interval, cost_per_million_tokens
from sm_locust.report.loadaxis import VISIT_NOTE, integer_axis, load_trace, slo_line
from sm_locust.report.slos import RunSlos
from sm_locust.util.formatting import MISSING, compact, is_missing, money, number, with_interval

LLM_FIGURES = ("output_tokens_per_s", "ttft_p95_ms", "itl_p95_ms", "usd_per_million_output_tokens")
# compare's token columns: each figure, then the bounds of its 95 % interval (empty when the record has none)
LLM_COLUMNS = [*LLM_FIGURES, *(f"{figure}_ci95_{end}" for figure in LLM_FIGURES for end in ("low", "high"))]
STEP_COLUMNS = [("output_tokens_per_s", 1), ("ttft_p95_ms", 0), ("itl_p95_ms", 1)]  # the report's step table
FIG_IDS = ("fig-llm-tokens", "fig-llm-latency")
T = TypeVar("T")  # what a chart writer makes of a chart: the page's HTML, or the figure itself


@dataclass(frozen=True)
class LlmStep:
    """One step's load and its token figures."""

    users: float | None
    llm: Llm


@dataclass(frozen=True)
class LlmView:
    """What the page shows of a run's tokens: summary.json's `llm` figures, each step's, and those at the
    sustainable point (`where` says which figures `point` holds)."""

    run: Llm
    steps: tuple[LlmStep, ...] = ()
    point: Llm | None = None
    where: str = ""
    turns: tuple[LlmTurn, ...] = ()  # --turns: each turn index's figures


def llm_view(summary: Summary | JsonObject, point: SustainablePoint | None) -> LlmView | None:
    """The run's token figures, or None when it counted none."""
    record = Summary.of(summary)
    if record.llm is None:
        return None
    steps = tuple(LlmStep(s.users, s.llm) for s in record.steps if s.llm is not None)
    at, where = _at_point(record, steps, point)
    return LlmView(record.llm, steps, at, where, record.llm.turns or ())


def _at_point(summary: Summary, steps: Sequence[LlmStep], point: SustainablePoint | None) -> tuple[Llm, str]:
    if summary.plateau is not None and summary.plateau.llm is not None:
        return summary.plateau.llm, "the plateau's step"
    users = point.users if point is not None else None
    matching = [s for s in steps if users is not None and s.users == users]
    if matching:
        return matching[-1].llm, f"the step at {users} users"
    assert summary.llm is not None
    return summary.llm, "the whole run"


def _held(view: LlmView | None) -> Llm | None:
    """The figures at the sustainable point; None without any: no view, or an empty `llm` object of the
    plateau or the run (a step's, even empty, is its step's)."""
    if view is None or view.point is None:
        return None
    if not view.point.keys and not any(s.llm is view.point for s in view.steps):
        return None
    return view.point


def token_cost(cost: Cost, view: LlmView | None) -> Cost:
    """summary.json `cost` plus `output_tokens_per_s` and `usd_per_million_output_tokens` (when priced)."""
    out = cost.copy()
    at = _held(view)
    if at is None:
        return out
    rate = at.output_tokens_per_s
    out["output_tokens_per_s"] = rate if isinstance(rate, (int, float)) else None
    price = cost.get("price_per_hour_usd")
    if price is not None and isinstance(rate, (int, float)) and rate:
        out["usd_per_million_output_tokens"] = cost_per_million_tokens(price, cost.get("instance_count") or 1, rate)
    return out


def llm_columns(summary: Summary | JsonObject, point: SustainablePoint | None, cost: Cost) -> dict[str, object]:
    """`sm-locust compare`'s token columns for one run ({} when it counted no tokens)."""
    view = llm_view(summary, point)
    if view is None:
        return {}
    priced = token_cost(cost, view)
    at = _held(view) or Llm()
    tokens = at.interval("output_tokens_per_s")
    price = cost.get("price_per_hour_usd")
    token_cost_ci95 = (cost_interval(price, cost.get("instance_count") or 1, tokens)
                       if price is not None and priced.get("usd_per_million_output_tokens") is not None else None)
    out: dict[str, object] = {"output_tokens_per_s": at.output_tokens_per_s, "ttft_p95_ms": at.ttft_p95_ms,
                              "itl_p95_ms": at.itl_p95_ms,
                              "usd_per_million_output_tokens": priced.get("usd_per_million_output_tokens")}
    for figure, interval in (("output_tokens_per_s", tokens), ("ttft_p95_ms", at.interval("ttft_p95_ms")),
                             ("itl_p95_ms", at.interval("itl_p95_ms")),
                             ("usd_per_million_output_tokens", token_cost_ci95)):
        pair = interval if isinstance(interval, (list, tuple)) and len(interval) == 2 else (None, None)
        out[f"{figure}_ci95_low"], out[f"{figure}_ci95_high"] = pair
    return out


def slo_verdict(value: float | None, slo: float | None) -> str:
    """'; SLO 1000 ms: within' / '; SLO 60 ms: OVER' / '' (no SLO given)."""
    if slo is None or is_missing(slo):
        return ""
    if value is None or is_missing(value):
        return f"; SLO {compact(float(slo))} ms: {MISSING}"
    return f"; SLO {compact(float(slo))} ms: {'within' if float(value) <= float(slo) else 'OVER'}"


def llm_rows(view: LlmView | None, cost: Cost,
             slos: RunSlos | None = None) -> list[tuple[str, str]]:
    """Summary-table rows, the page's lead for an LLM run: output tokens/s, TTFT and ITL against their
    SLOs (at the SLO's percentile), each with its 95 % interval where the record has one, $ per 1M
    output tokens, then the whole run's tokens."""
    if view is None:
        return []
    slos = slos or RunSlos()
    at, run = _held(view) or Llm(), view.run
    percentile = float(slos.percentile)
    pct = compact(percentile)
    rows = [(f"Output tokens/s ({view.where})",
             _figure(at.output_tokens_per_s, at.interval("output_tokens_per_s"), " tokens/s", 1))]
    for key, label, digits in (("ttft", "Time to first token", 0), ("itl", "Inter-token latency", 1)):
        figures = " / ".join(_figure(at.percentile(p, f"{key}_"), at.interval(f"{key}_p{p}_ms"), "", digits)
                             for p in (50, 95, 99))
        slo = slos.token_slo_ms(key)
        judged = at.percentile(percentile, f"{key}_")
        rows.append((f"{label} p50 / p95 / p99",
                     f"{figures} ms{slo_verdict(judged, slo)}" + (f" (at p{pct})" if not is_missing(slo) else "")))
    priced = token_cost(cost, view)
    if priced.get("usd_per_million_output_tokens") is not None:
        rows.append(("$ per 1M output tokens",
                     (f"{money(priced['usd_per_million_output_tokens'])} ({money(cost.get('price_per_hour_usd'), 3)}/h "
                      f"x {cost.get('instance_count') or 1} / "
                      f"({number(priced['output_tokens_per_s'])} tokens/s x 3600))")))
    else:
        rows.append(("$ per 1M output tokens", f"{MISSING} (no price: pass --instance-type or --price-per-hour)"))
    rows.append(("Whole run (tokens)",
                 (f"{number(run.output_tokens)} output tokens ({run.tokens_source or MISSING} counts), "
                  f"{number(run.input_tokens)} input tokens, {number(run.output_tokens_per_s)} "
                  "output tokens/s")))
    return rows + [turn_row(turn, len(view.turns)) for turn in view.turns]


def _figure(value: float | None, interval: object, unit: str, digits: int) -> str:
    """A token figure with its interval when the record has one (`with_interval`), else as `number`
    writes it (a whole number stays whole)."""
    return number(value, digits, unit) if interval is None else with_interval(value, interval, unit, digits)


def turn_row(turn: LlmTurn, of: int) -> tuple[str, str]:
    """('Turn 2 of 3', '120 answers, 412 prompt tokens; TTFT p50 / p95 88 ms [85, 90] / ...'): one turn
    index's figures, each percentile with its 95 % interval."""
    parts = []
    for key, label, digits in (("ttft", "TTFT", 0), ("itl", "ITL", 1), ("e2e", "end-to-end", 0)):
        figures = [with_interval(getattr(turn, f"{key}_{p}_ms"), turn.interval(f"{key}_{p}_ms"), " ms", digits)
                   for p in ("p50", "p95")]
        parts.append(f"{label} p50 / p95 {figures[0]} / {figures[1]}")
    return (f"Turn {turn.turn} of {of}",
            f"{number(turn.requests, 0)} answers, {number(turn.input_tokens_mean, 0)} prompt tokens; "
            + "; ".join(parts))


def llm_step_columns(view: LlmView | None, steps: pd.DataFrame) -> pd.DataFrame:
    """The token columns of the report's step table (STEP_COLUMNS, each with its 95 % interval's bounds),
    one row per row of `steps`: the step records' own when they line up one for one, else matched by
    users in order; empty without tokens."""
    if view is None or steps.empty:
        return pd.DataFrame(index=steps.index)
    figures: list[LlmStep | None] = list(view.steps)
    if len(figures) != len(steps):
        pool = list(view.steps)
        figures = []
        for users in steps["users"] if "users" in steps.columns else []:
            match = next((f for f in pool if f.users == users), None)
            if match is not None:
                pool.remove(match)
            figures.append(match)
    return pd.DataFrame([_step_row(None if f is None else f.llm) for f in figures], index=steps.index)


def _step_row(llm: Llm | None) -> dict[str, object]:
    """One step's token cells: each STEP_COLUMNS figure and its interval's bounds (`<figure>_ci95_low`,
    `_high`, as the step table reads them; None when the record has none)."""
    intervals = (llm.ci95 if llm is not None else None) or {}
    row: dict[str, object] = {}
    for column, _ in STEP_COLUMNS:
        row[column] = getattr(llm, column) if llm is not None else None
        bounds = intervals.get(column)
        pair = bounds if isinstance(bounds, (list, tuple)) and len(bounds) == 2 else (None, None)
        row[f"{column}_ci95_low"], row[f"{column}_ci95_high"] = pair
    return row


def llm_figures(view: LlmView | None, knee_users: float | None, div: Callable[..., T],
                missing: Callable[[str, str, str], T], slos: RunSlos | None = None) -> list[T]:
    """Output tokens/s vs users, and TTFT / ITL percentiles vs users with their SLOs (nothing without
    token figures), joined by load; `div` and `missing` are the report page's chart and placeholder
    writers, `knee_users` the knee's load (None: nothing to mark)."""
    if view is None:
        return []
    slos = slos or RunSlos()
    steps = [(i, s.users, s.llm) for i, s in enumerate(view.steps, start=1) if s.users is not None]
    if not steps:
        why = "no per-step token figures (a run without steps)"
        return [missing("fig-llm-tokens", "Output tokens/s vs users", why),
                missing("fig-llm-latency", "TTFT and inter-token latency vs users", why)]
    steps.sort(key=lambda held: (held[1], held[0]))
    visits = [i for i, _, _ in steps]
    numbered = visits if visits != sorted(visits) else None
    users = [u for _, u, _ in steps]
    tokens = go.Figure(load_trace(users, [llm.output_tokens_per_s for _, _, llm in steps], "output tokens/s",
                                  numbered))
    latency_fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                                subplot_titles=("time to first token", "inter-token latency"))
    for row, prefix in ((1, "ttft"), (2, "itl")):
        for p in (50, 95):
            latency_fig.add_trace(go.Scatter(x=users, y=[llm.percentile(p, f"{prefix}_") for _, _, llm in steps],
                                             mode="lines+markers", name=f"{prefix.upper()} p{p}",
                                             line={"dash": "dot"} if p == 50 else {}), row=row, col=1)
    pct = compact(float(slos.percentile))
    slo_line(latency_fig, slos.ttft_slo_ms, f"TTFT p{pct} SLO", row=1, col=1)
    slo_line(latency_fig, slos.itl_slo_ms, f"ITL p{pct} SLO", row=2, col=1)
    distinct = len(set(users)) > 1
    if knee_users is not None and distinct:
        tokens.add_vline(x=knee_users, line_dash="dash", line_color="crimson")
        latency_fig.add_vline(x=knee_users, line_dash="dash", line_color="crimson")
    note = f" ({VISIT_NOTE})" if numbered else ("" if distinct else " (constant load: one level)")
    tokens.update_layout(title=f"Output tokens/s vs users{note}", xaxis_title="users", yaxis_title="output tokens/s")
    latency_fig.update_layout(title="Time to first token and inter-token latency vs users")
    latency_fig.update_yaxes(title_text="TTFT ms", rangemode="tozero", row=1, col=1)
    latency_fig.update_yaxes(title_text="ITL ms", rangemode="tozero", row=2, col=1)
    latency_fig.update_xaxes(title_text="users", row=2, col=1)
    integer_axis(tokens, users)
    integer_axis(latency_fig, users, row=1, col=1)
    integer_axis(latency_fig, users, row=2, col=1)
    return [div(tokens, "fig-llm-tokens"), div(latency_fig, "fig-llm-latency", height=560)]
