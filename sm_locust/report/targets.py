"""The report's traffic-mix part: per-target figures, cold vs warm, the cache over time.

Only for a run that named targets (summary.json `targets`): the 20 most requested targets then
`others` (requests, share, failures, p50/p95/p99, cold requests, and for streams TTFT p95 cold and
warm), cold vs warm for a multi-model mix or LoRA adapters (with where the split comes from, and
the streams' TTFT), and CloudWatch's ModelCacheHit and LoadedModelCount per minute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, TypeGuard

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sm_locust.mix.spec import INFERENCE_COMPONENT, TARGET_MODEL
from sm_locust.record.model import CacheSide, JsonObject, Mix, ModelCache, Record, Summary, Target
from sm_locust.report.metrics import METRICS_BY_NAME
from sm_locust.sanitize import page_text
from sm_locust.util.formatting import MISSING, number, percent, percent_interval

FIG_ID = "fig-model-cache"
HIT_COLUMN = METRICS_BY_NAME["ModelCacheHit"].columns()[0]  # cw_ModelCacheHit_avg_pct
LOADED_COLUMN = METRICS_BY_NAME["LoadedModelCount"].columns()[0]  # cw_LoadedModelCount_avg_count
SOURCES = {
    "endpoint": "the endpoint marked each request that waited for its model's load",
    "latency-modes": "the latency's two modes (SageMaker marks no request): requests from {threshold} ms on "
                     "are taken as cold",
}


class CacheMinute(TypedDict):
    """One CloudWatch minute of a model cache: its start, ModelCacheHit %, LoadedModelCount (None: not published)."""

    time: pd.Timestamp
    hit_pct: float | None
    loaded: float | None


@dataclass
class TargetView:
    """What the page shows of a run's traffic mix: summary.json's `targets`, `mix` and `model_cache` as
    typed records (given as JSON objects, they are read as records), and CloudWatch's cache minutes."""

    targets: Sequence[Target]
    requests: int
    mix: Mix | None = None  # None: no mix (one target per request)
    cache: ModelCache | None = None
    minutes: list[CacheMinute] = field(default_factory=list)  # CloudWatch's

    def __post_init__(self) -> None:
        targets: Sequence[Target | JsonObject] = self.targets
        self.targets = tuple(t if isinstance(t, Target) else Target.from_json(t, check=False) for t in targets)
        mix: Mix | JsonObject | None = self.mix
        if mix is not None and not isinstance(mix, Mix):
            mix = Mix.from_json(mix, check=False)
        self.mix = mix if mix is not None and mix.keys else None  # an empty object: no mix
        cache: ModelCache | JsonObject | None = self.cache
        if cache is not None and not isinstance(cache, ModelCache):
            self.cache = ModelCache.from_json(cache, check=False)


def target_view(summary: Summary | JsonObject, seconds: pd.DataFrame | None = None) -> TargetView | None:
    """The run's per-target figures, or None when no request named a target."""
    record = Summary.of(summary)
    if not record.targets:
        return None
    requests = record.totals.requests if record.totals is not None else 0
    return TargetView(record.targets, int(requests or 0), record.mix, record.model_cache, cache_minutes(seconds))


def cache_minutes(seconds: pd.DataFrame | None) -> list[CacheMinute]:
    """One point per CloudWatch minute with ModelCacheHit or LoadedModelCount (the per-second frame
    repeats each minute's value): {time, hit_pct, loaded}."""
    if seconds is None or len(seconds) == 0 or not ({HIT_COLUMN, LOADED_COLUMN} & set(seconds.columns)):
        return []
    out: list[CacheMinute] = []
    minute = (seconds["epoch_s"] // 60).astype("int64")
    for _, group in seconds.groupby(minute, sort=True):
        row = group.iloc[0]
        hit = row.get(HIT_COLUMN)
        loaded = row.get(LOADED_COLUMN)
        if _is_number(hit) or _is_number(loaded):
            out.append({"time": pd.to_datetime(row["epoch_s"], unit="s"), "hit_pct": hit if _is_number(hit) else None,
                        "loaded": loaded if _is_number(loaded) else None})
    return out


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and value == value  # not NaN


def _count(record: Record, value: int | None, key: str) -> int | None:
    """A count as the file holds it: None when the key is absent (the record's 0 is its default)."""
    return value if record.has(key) else None


def _ttft_cells(t: Target) -> list[str]:
    """A target's TTFT p95, cold then warm (a stream run to LoRA adapters)."""
    return [number(side.p95_ms if side is not None else None, 0) for side in (t.ttft_cold, t.ttft_warm)]


def targets_table(view: TargetView) -> str:
    cold = any(t.has("cold") for t in view.targets)
    ttft = any(t.has("ttft_cold") for t in view.targets)
    head = ["target", "requests", "share", "failures", "p50 ms", "p95 ms", "p99 ms", *(["cold"] if cold else []),
            *(["TTFT p95 cold ms", "TTFT p95 warm ms"] if ttft else [])]
    rows = []
    for t in view.targets:
        name = t.name if t.has("name") else ""
        if name == "others":
            name = f"others ({number(t.targets, 0)} targets)"
        share = t.requests / view.requests if view.requests else None
        cells = [name, number(_count(t, t.requests, "requests"), 0), percent(share),
                 number(_count(t, t.failures, "failures"), 0), number(t.p50_ms, 0), number(t.p95_ms, 0),
                 number(t.p99_ms, 0), *([number(t.cold, 0)] if cold else []), *(_ttft_cells(t) if ttft else [])]
        rows.append("<tr>" + "".join(f"<td>{page_text(c)}</td>" for c in cells) + "</tr>")
    return (f'<table id="targets"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def cache_table(cache: ModelCache) -> str:
    """Cold vs warm: requests and percentiles of each, and where the split comes from."""
    source = cache.source
    if cache.hit_rate is None:
        return ('<p id="model-cache">Cold vs warm: not split. The endpoint marked no request, and the successful '
                "requests' latencies have no two clearly separate modes (a cache that always hits, or always "
                "misses, looks like this too).</p>")
    why = SOURCES.get(str(source), str(source)).format(threshold=number(cache.threshold_ms, 0))
    rows = []
    for kind, side in (("cold", cache.cold or CacheSide()), ("warm", cache.warm or CacheSide())):
        waits = (f"{number(side.wait_p50_ms, 0)} / {number(side.wait_p95_ms, 0)}" if side.has("wait_p50_ms")
                 else MISSING)
        cells = [kind, number(side.requests, 0), number(side.p50_ms, 0), number(side.p95_ms, 0),
                 number(side.p99_ms, 0), waits]
        rows.append("<tr>" + "".join(f"<td>{page_text(c)}</td>" for c in cells) + "</tr>")
    for kind, ttft in (("cold", cache.ttft_cold), ("warm", cache.ttft_warm)):
        if cache.has("ttft_cold") or cache.has("ttft_warm"):
            first = ttft or CacheSide()
            cells = [f"{kind}: time to first token", number(first.requests, 0), number(first.p50_ms, 0),
                     number(first.p95_ms, 0), number(first.p99_ms, 0), MISSING]
            rows.append('<tr class="ttft">' + "".join(f"<td>{page_text(c)}</td>" for c in cells) + "</tr>")
    return (f"<p>Cache hit rate {page_text(percent_interval(cache.hit_rate, cache.hit_rate_ci95))} of "
            f"{page_text(number(_count(cache, cache.requests, 'requests'), 0))} successful requests; cold vs warm from "
            f"{page_text(why)}.</p>"
            '<table id="model-cache"><thead><tr><th>model was</th><th>requests</th><th>p50 ms</th><th>p95 ms</th>'
            f"<th>p99 ms</th><th>model wait p50 / p95 ms</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def distinct_targets(view: TargetView) -> int:
    """How many targets the run's requests named (the top ones by name, and those counted in `others`)."""
    named = [t for t in view.targets if t.name != "others"]
    others = next((t for t in view.targets if t.name == "others"), None)
    return len(named) + int((others.targets if others is not None else None) or 0)


def mix_rows(view: TargetView | None) -> list[tuple[str, str]]:
    """Summary-table rows, the page's lead for a multi-model run: the cache hit rate, cold vs warm
    latency and the models loaded ([] for a run without a model cache)."""
    if view is None or view.cache is None:
        return []
    cache = view.cache
    cold, warm = cache.cold or CacheSide(), cache.warm or CacheSide()
    if cache.hit_rate is None:
        hit = f"{MISSING} (cold and warm not told apart: see Cold vs warm)"
    else:
        rate = percent_interval(cache.hit_rate, cache.hit_rate_ci95)
        hit = (f"{rate} of {number(_count(cache, cache.requests, 'requests'), 0)} successful requests "
               f"({number(cold.requests, 0)} cold)")
    latencies = "; ".join(f"{kind} {number(side.p50_ms, 0)} / {number(side.p95_ms, 0)} ms"
                          for kind, side in (("cold", cold), ("warm", warm)))
    loaded = [count for p in view.minutes if (count := p.get("loaded")) is not None]
    models = (f"{number(loaded[-1], 0)} per instance at the end (CloudWatch LoadedModelCount), "
              f"most {number(max(loaded), 0)}" if loaded else
              f"{MISSING} (no CloudWatch LoadedModelCount: a SageMaker MME publishes it; the local emulation with "
              "`serve --multi-model --cloudwatch-url URL`)")
    mix = view.mix
    ttft = []
    if cache.ttft_cold is not None or cache.ttft_warm is not None:  # streams to LoRA adapters
        ttft = [("Cold vs warm TTFT p50 / p95", "; ".join(
            f"{kind} {number(side.p50_ms, 0)} / {number(side.p95_ms, 0)} ms ({number(side.requests or 0, 0)})"
            for kind, side in (("cold", cache.ttft_cold or CacheSide()), ("warm", cache.ttft_warm or CacheSide()))))]
    if mix is not None and mix.field == INFERENCE_COMPONENT:  # adapter components: no MME metrics to show
        return [("Adapter cache hit rate", hit), ("Cold vs warm latency p50 / p95", latencies), *ttft]
    named = f"{number(distinct_targets(view), 0)} models requested" + (
        f" of {number(mix.targets, 0)} in the mix ({mix.spec})" if mix is not None and mix.targets else "")
    return [("Model cache hit rate", hit), ("Cold vs warm latency p50 / p95", latencies), *ttft,
            ("Models loaded", models), ("Models requested", named)]


def fig_cache(view: TargetView, div: Callable[[go.Figure, str], str], missing: Callable[[str, str, str], str]) -> str:
    points = view.minutes
    if not points:
        return missing(FIG_ID, "Model cache over time", "no CloudWatch ModelCacheHit or LoadedModelCount for the run "
                       "(a SageMaker MME publishes them; the local emulation with `serve --multi-model "
                       "--cloudwatch-url URL`)")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    times = [p["time"] for p in points]
    fig.add_trace(go.Scatter(x=times, y=[p["hit_pct"] for p in points], name="cache hit % (ModelCacheHit)",
                             mode="lines+markers"), secondary_y=False)
    fig.add_trace(go.Scatter(x=times, y=[p["loaded"] for p in points], name="models loaded (LoadedModelCount)",
                             mode="lines+markers", line={"shape": "hv", "dash": "dot"}), secondary_y=True)
    fig.update_layout(title="Model cache over time (CloudWatch, per minute, UTC)")
    fig.update_yaxes(title_text="cache hit %", range=[0, 100], secondary_y=False)
    fig.update_yaxes(title_text="models loaded per instance", secondary_y=True)
    return div(fig, FIG_ID)


def targets_section(view: TargetView | None, div: Callable[[go.Figure, str], str],
                    missing: Callable[[str, str, str], str]) -> str:
    """The "Traffic mix" section, or '' for a run without targets."""
    if view is None:
        return ""
    mix = view.mix
    described = (f"{page_text(str(mix.spec))} ({number(mix.targets, 0)} "
                 f"{'models' if mix.field == TARGET_MODEL else 'components'}, seed {mix.seed})"
                 if mix is not None else "one target per request")
    parts = [f"<h2>Traffic mix</h2><p><small>Requests by the target they named: {described}. Locust keeps one "
             "entry for the endpoint; these figures are the recorder's (summary.json targets).</small></p>",
             targets_table(view)]
    if view.cache is not None:
        models = mix is None or mix.field != INFERENCE_COMPONENT  # adapters: CloudWatch has no cache minutes
        parts += ["<h3>Cold vs warm</h3>", cache_table(view.cache), fig_cache(view, div, missing) if models else ""]
    return "".join(parts)
