"""N runs of the same test: the run-to-run spread of each headline figure beside the within-run
interval (pure: fed the runs' summary.json contents), written as `repeat.json` in the parent folder.

A within-run interval says how precisely one run measured; `--repeat N` says how much runs differ
(Kalibera & Jones, docs/facts.md). Per figure (`rps`, `goodput_rps`, p50/p95/p99, `capacity_rps`):
values, mean, sd, min, max, `ci95` of the mean (t, N >= 2), `within_run_half_width` and
`spread_ratio` (about 1 when runs differ as one run's interval says; well above 1: trust the
run-to-run interval). `median_run` names a real run to quote (keys: docs/summary.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sm_locust.measure.looplag import BOTTLENECK
from sm_locust.measure.uncertainty import t_quantile

REPEAT_JSON = "repeat.json"
SCHEMA = 1
# figure -> (summary.json block, key, unit, its name in a line); the interval is the block's
# `ci95[key]`, or the plateau's `capacity_ci95`
FIGURES: dict[str, tuple[str, str, str, str]] = {
    "rps": ("totals", "rps", "req/s", "throughput"),
    "goodput_rps": ("totals", "goodput_rps", "req/s", "goodput"),
    "p50_ms": ("totals", "p50_ms", "ms", "p50"),
    "p95_ms": ("totals", "p95_ms", "ms", "p95"),
    "p99_ms": ("totals", "p99_ms", "ms", "p99"),
    "capacity_rps": ("plateau", "capacity_rps", "req/s", "capacity"),
}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def figure_of(summary: Mapping[str, object], figure: str) -> tuple[float | None, list[float] | None]:
    """(the run's figure, its recorded 95 % interval or None)."""
    block_name, key, _, _ = FIGURES[figure]
    block = summary.get(block_name)
    if not isinstance(block, Mapping):
        return None, None
    value = _number(block.get(key))
    if figure == "capacity_rps":
        interval = block.get("capacity_ci95")
    else:
        ci95 = block.get("ci95")
        interval = ci95.get(key) if isinstance(ci95, Mapping) else None
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and all(_number(v) is not None for v in interval):
        return value, [float(interval[0]), float(interval[1])]
    return value, None


def spread(values: Sequence[float], half_widths: Sequence[float]) -> dict[str, object]:
    """The run-to-run statistics of one figure (module docstring)."""
    n = len(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if n >= 2 else None
    ci95 = None
    if sd is not None:
        half = t_quantile(n - 1) * sd / math.sqrt(n)
        ci95 = [mean - half, mean + half]
    within = statistics.median(half_widths) if half_widths else None
    ratio = sd / (within / 1.959964) if sd is not None and within else None
    return {"values": list(values), "mean": mean, "sd": sd, "min": min(values), "max": max(values), "ci95": ci95,
            "within_run_half_width": within, "spread_ratio": ratio}


def repeat_document(summaries: Sequence[Mapping[str, Any]], folders: Sequence[str]) -> dict[str, Any]:
    """repeat.json: the runs, and each figure's spread (figures no run recorded are left out)."""
    figures: dict[str, object] = {}
    for figure in FIGURES:
        pairs = [figure_of(s, figure) for s in summaries]
        values = [v for v, _ in pairs if v is not None]
        if not values:
            continue
        halves = [(ci[1] - ci[0]) / 2.0 for v, ci in pairs if v is not None and ci is not None]
        figures[figure] = {"unit": FIGURES[figure][2], **spread(values, halves)}
    verdicts = [(s.get("verdict") or {}).get("status") for s in summaries]
    return {"schema": SCHEMA, "runs": len(summaries), "folders": list(folders), "figures": figures,
            "inconclusive_runs": [f for f, v in zip(folders, verdicts, strict=True) if v == "inconclusive"]}


def median_run(document: Mapping[str, Any], figure: str = "capacity_rps") -> int | None:
    """The index of the run whose `figure` is the median of the runs' (the lower middle one for an even
    count); falls back on goodput when the runs have no such figure."""
    figures = document.get("figures") or {}
    chosen = figures.get(figure) or figures.get("goodput_rps")
    if not chosen:
        return None
    values = chosen["values"]
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(order) - 1) // 2]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    digits = 1 if unit == "req/s" else 0
    return f"{value:.{digits}f}"


def repeat_lines(document: Mapping[str, Any]) -> list[str]:
    """One line per figure: 'p95 over 5 runs: 48 ms (run to run 45..52, sd 2.6; mean's 95 % interval
    [45, 51]); within a run +-3 ms (typical): the runs differ 1.7x as much as one run's interval says'."""
    lines = []
    runs = document.get("runs") or 0
    for figure, s in (document.get("figures") or {}).items():
        unit = s["unit"]
        name = FIGURES[figure][3] if figure in FIGURES else figure
        text = f"{name} over {runs} runs: {_fmt(s['mean'], unit)} {unit}"
        spread_text = f"run to run {_fmt(s['min'], unit)}..{_fmt(s['max'], unit)}"
        if s.get("sd") is not None:
            spread_text += f", sd {s['sd']:.2g}"
        if s.get("ci95"):
            spread_text += f"; the mean's 95 % interval [{_fmt(s['ci95'][0], unit)}, {_fmt(s['ci95'][1], unit)}]"
        text += f" ({spread_text})"
        if s.get("within_run_half_width") is not None:
            text += f"; within a run \u00b1{_fmt(s['within_run_half_width'], unit)} {unit} (median)"
            if s.get("spread_ratio") is not None:
                text += f": the runs differ {s['spread_ratio']:.1f}x as much as one run's interval says"
        lines.append(text)
    if document.get("inconclusive_runs"):
        lines.append(f"INCONCLUSIVE runs ({BOTTLENECK}): "
                     f"{', '.join(document['inconclusive_runs'])}")
    return lines
