"""The report's LLM part: tokens/s, TTFT and ITL vs users, and $ per 1M output tokens.

Only when the run counted tokens (summary.json has an `llm` object, sm_locust.record.llm): then
the report draws output tokens/s vs users (`fig-llm-tokens`) and TTFT / ITL percentiles vs users
(`fig-llm-latency`), adds the token figures at the sustainable point to the summary table, and
prices the tokens:

    $ per 1M output tokens = price per hour x instances / (output tokens/s x 3600) x 1,000,000

The output tokens/s used is the one at the sustainable point: the plateau's own when the search ran
on tokens (`--objective output-tokens`), else that of the last step run at the point's users, else
the whole run's. `sm-locust compare` shows the same columns when a run has them (`LLM_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from sm_locust.report.cost import cost_per_million_tokens
from sm_locust.util.formatting import MISSING, money, number

LLM_COLUMNS = ["output_tokens_per_s", "ttft_p95_ms", "itl_p95_ms", "usd_per_million_output_tokens"]
FIG_IDS = ("fig-llm-tokens", "fig-llm-latency")


@dataclass
class LlmView:
    """What the page shows of a run's tokens (plain data)."""

    run: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"users": n, **step llm figures}
    point: dict[str, Any] | None = None  # the token figures at the sustainable point
    where: str = ""  # which figures `point` holds


def llm_view(summary: Mapping[str, Any], point: Mapping[str, Any] | None) -> LlmView | None:
    """The run's token figures, or None when it counted none."""
    run = summary.get("llm")
    if not isinstance(run, dict):
        return None
    steps = [{"users": s.get("users"), **s["llm"]} for s in summary.get("steps") or []
             if isinstance(s, dict) and isinstance(s.get("llm"), dict)]
    at, where = _at_point(summary, steps, point)
    return LlmView(dict(run), steps, at, where)


def _at_point(summary: Mapping[str, Any], steps: list[dict], point: Mapping[str, Any] | None) -> tuple[dict, str]:
    plateau = summary.get("plateau")
    if isinstance(plateau, dict) and isinstance(plateau.get("llm"), dict):
        return dict(plateau["llm"]), "the plateau's step"
    users = (point or {}).get("users")
    matching = [s for s in steps if users is not None and s.get("users") == users]
    if matching:
        return dict(matching[-1]), f"the step at {users} users"
    return dict(summary["llm"]), "the whole run"


def token_cost(cost: Mapping[str, Any], view: LlmView | None) -> dict[str, Any]:
    """summary.json `cost` plus `output_tokens_per_s` and `usd_per_million_output_tokens` (when priced)."""
    out = dict(cost)
    if view is None or not view.point:
        return out
    rate = view.point.get("output_tokens_per_s")
    out["output_tokens_per_s"] = rate
    price = cost.get("price_per_hour_usd")
    if price is not None and rate:
        out["usd_per_million_output_tokens"] = cost_per_million_tokens(price, cost.get("instance_count") or 1, rate)
    return out


def llm_columns(summary: Mapping[str, Any], point: Mapping[str, Any] | None, cost: Mapping[str, Any]) -> dict[str, Any]:
    """`sm-locust compare`'s token columns for one run ({} when it counted no tokens)."""
    view = llm_view(summary, point)
    if view is None:
        return {}
    priced = token_cost(cost, view)
    at = view.point or {}
    return {"output_tokens_per_s": at.get("output_tokens_per_s"), "ttft_p95_ms": at.get("ttft_p95_ms"),
            "itl_p95_ms": at.get("itl_p95_ms"),
            "usd_per_million_output_tokens": priced.get("usd_per_million_output_tokens")}


def llm_rows(view: LlmView | None, cost: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Summary-table rows: token figures at the sustainable point, the whole run, $ per 1M output tokens."""
    if view is None:
        return []
    at, run = view.point or {}, view.run
    rows = [
        (f"Output tokens/s there ({view.where})",
         f"{number(at.get('output_tokens_per_s'))} tokens/s; TTFT p50 / p95 / p99 "
         + " / ".join(number(at.get(k), 0) for k in ("ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms"))
         + " ms; ITL p50 / p95 / p99 "
         + " / ".join(number(at.get(k)) for k in ("itl_p50_ms", "itl_p95_ms", "itl_p99_ms"))
         + " ms"),
        ("Whole run (tokens)",
         (f"{number(run.get('output_tokens'))} output tokens ({run.get('tokens_source') or MISSING} counts), "
          f"{number(run.get('input_tokens'))} input tokens, {number(run.get('output_tokens_per_s'))} output tokens/s")),
    ]
    priced = token_cost(cost, view)
    if priced.get("usd_per_million_output_tokens") is not None:
        rows.append(("$ per 1M output tokens",
                     (f"{money(priced['usd_per_million_output_tokens'])} ({money(cost.get('price_per_hour_usd'), 3)}/h "
                      f"x {cost.get('instance_count') or 1} / "
                      f"({number(priced['output_tokens_per_s'])} tokens/s x 3600))")))
    else:
        rows.append(("$ per 1M output tokens", f"{MISSING} (no price: pass --instance-type or --price-per-hour)"))
    return rows


def llm_figures(view: LlmView | None, knee_users: Any, div: Callable[[Any, str], Any],
                missing: Callable[[str, str, str], Any]) -> list[Any]:
    """Output tokens/s vs users, and TTFT / ITL percentiles vs users (nothing without token figures);
    `div` and `missing` are the report page's chart and placeholder writers."""
    if view is None:
        return []

    steps = [s for s in view.steps if s.get("users") is not None]
    if not steps:
        why = "no per-step token figures (a run without steps)"
        return [missing("fig-llm-tokens", "Output tokens/s vs users", why),
                missing("fig-llm-latency", "TTFT and inter-token latency vs users", why)]
    users = [s["users"] for s in steps]
    tokens = go.Figure(go.Scatter(x=users, y=[s.get("output_tokens_per_s") for s in steps], mode="lines+markers",
                                  name="output tokens/s"))
    latency = go.Figure()
    for key, name in (("ttft_p50_ms", "TTFT p50"), ("ttft_p95_ms", "TTFT p95"), ("itl_p50_ms", "ITL p50"),
                      ("itl_p95_ms", "ITL p95")):
        latency.add_trace(go.Scatter(x=users, y=[s.get(key) for s in steps], mode="lines+markers", name=name,
                                     yaxis="y2" if key.startswith("itl") else "y"))
    if knee_users is not None:
        tokens.add_vline(x=knee_users, line_dash="dash", line_color="crimson")
        latency.add_vline(x=knee_users, line_dash="dash", line_color="crimson")
    tokens.update_layout(title="Output tokens/s vs users", xaxis_title="users", yaxis_title="output tokens/s")
    latency.update_layout(title="Time to first token and inter-token latency vs users", xaxis_title="users",
                          yaxis={"title": "TTFT ms"}, yaxis2={"title": "ITL ms", "overlaying": "y", "side": "right"})
    return [div(tokens, "fig-llm-tokens"), div(latency, "fig-llm-latency")]
