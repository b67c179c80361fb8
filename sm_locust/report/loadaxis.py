"""How the pages draw a figure against load: points ordered by load, the order they ran shown apart,
whole numbers on a users or instances axis, and an SLO as a line wherever one was given.

Why: a search visits loads out of order (1 -> 4 -> 8 -> 16 -> 12 -> 5 users), and a line joining
its steps in the order they ran loops back on itself, so a marker placed on the data seems to float
beside it. Every "vs load" chart (the run report, its LLM part, compare, the sweeps) joins its points
by load instead (`by_load`) and numbers each marker with the step's place in the run (`visit`), so the
order is still there to read. Plotly picks ticks like 4.44 / 8.89 for a users axis of a few points and
1.5 / 2.5 for instances: `integer_axis` asks for whole-number ticks. `slo_line` is the one way an SLO
is drawn (a dashed red line labelled with its percentile).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from sm_locust.util.formatting import compact, is_missing

SLO_COLOR = "crimson"
VISIT_NOTE = "numbers: the order the steps ran"


def by_load(steps: pd.DataFrame, load: str = "users") -> pd.DataFrame:
    """The steps ordered by `load` (ties in the order they ran), with `visit`: each step's place in
    the run, 1 for the first (its `step` number when the frame has one)."""
    frame = steps.copy()
    frame["visit"] = frame["step"].to_numpy() if "step" in frame.columns else range(1, len(frame) + 1)
    if load not in frame.columns:
        return frame
    return frame.sort_values([load, "visit"], kind="stable").reset_index(drop=True)


def out_of_order(frame: pd.DataFrame) -> bool:
    """True when the steps did not run in the order of their load (the numbers say something)."""
    return "visit" in frame.columns and list(frame["visit"]) != sorted(frame["visit"])


def load_trace(x: Iterable[object], y: Iterable[object], name: str, visits: Iterable[Any] | None = None,
               **kwargs: object) -> go.Scatter:
    """A line through points ordered by load; with `visits`, each marker numbered by its place in the run."""
    if visits is None:
        return go.Scatter(x=list(x), y=list(y), mode="lines+markers", name=name, **kwargs)
    labels = [str(int(v)) for v in visits]
    return go.Scatter(x=list(x), y=list(y), mode="lines+markers+text", name=name, text=labels,
                      textposition="top center", textfont={"size": 10, "color": "#555"},
                      customdata=labels, hovertemplate="%{x}, %{y:.1f} (step %{customdata})", **kwargs)


def integer_ticks(values: Iterable[Any], most: int = 12) -> dict[str, object]:
    """Axis settings for whole-number ticks over `values` (at most `most` of them); {} without values."""
    numbers = [float(v) for v in values if not is_missing(v)]
    if not numbers:
        return {}
    span = max(numbers) - min(0.0, min(numbers))
    dtick = max(1, math.ceil(span / most)) if span > 0 else 1
    return {"tickmode": "linear", "tick0": 0, "dtick": dtick, "tickformat": "d"}


def integer_axis(fig: go.Figure, values: Iterable[object], axis: str = "x", **where: object) -> None:
    """Whole-number ticks on `axis` ("x" or "y") of `fig` (`where`: row / col / secondary_y)."""
    ticks = integer_ticks(values)
    if ticks:
        (fig.update_xaxes if axis == "x" else fig.update_yaxes)(**ticks, **where)


def slo_line(fig: go.Figure, slo_ms: Any, label: str, *, yref: str | None = None, **where: Any) -> None:
    """The SLO as a dashed line across the plot, labelled (`label`, e.g. "p95 SLO"); nothing when no
    SLO was given. `yref` names a secondary axis ("y2") of a figure without subplots."""
    if is_missing(slo_ms):
        return
    text = f"{label} {compact(float(slo_ms))} ms"
    if yref:
        fig.add_shape(type="line", xref="paper", x0=0, x1=1, yref=yref, y0=slo_ms, y1=slo_ms,
                      line={"dash": "dash", "color": SLO_COLOR, "width": 1.5})
        fig.add_annotation(xref="paper", x=1, yref=yref, y=slo_ms, text=text, showarrow=False, xanchor="right",
                           yanchor="bottom", font={"color": SLO_COLOR})
        return
    fig.add_hline(y=slo_ms, line_dash="dash", line_color=SLO_COLOR, annotation_text=text,
                  annotation_position="top right", annotation_font_color=SLO_COLOR, **where)
