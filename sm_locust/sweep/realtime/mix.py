"""A real-time sweep under a traffic mix: the grid may vary the mix, and each row says what the cache did.

Why: on a multi-model endpoint the capacity and latency depend on how many models the traffic
names, how skewed it is and how many fit in memory; a sweep answers "how many models does one
instance hold at the SLO" by varying them (docs/multi-model.md, "Sweeps"). Pure: fed settings,
summary.json and the endpoint's samples.

- **The mix per configuration.** `zipf_s` and `model_count` in the grid (or `endpoint:`) vary the
  run's `--target-models`: the `load:` section's `zipf:S:N` (or `uniform:N`) with the configuration's
  S and N put in, or `zipf:<zipf_s>:<model_count>` when `load:` names no mix. `model_count` is also
  the local emulation's model count (`sm-locust serve --model-count`); the deployer is given only the
  settings it knows (`deployer_settings`).
- **The figures** (`mix_figures`): `cache_hit_rate` and `cold_p95_ms` from summary.json's
  `model_cache`; `models_loaded`, the models in memory over the knee step (the local emulation's
  `loaded_models` samples, or CloudWatch's LoadedModelCount in the report's steps.csv);
  `cost_per_model_month`, what hosting one of the mix's models costs a month:
  `$/h of the fleet for the target (or of the configuration's instances) x 730 h / models in the mix`
  (730 hours per month, the AWS Pricing Calculator's month).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

from sm_locust.errors import UsageError
from sm_locust.mix.spec import parse_mix
from sm_locust.record.model import JsonObject, Summary
from sm_locust.report.metrics import METRICS_BY_NAME

ZIPF_S = "zipf_s"
MODEL_COUNT = "model_count"
MIX_KEYS = (ZIPF_S, MODEL_COUNT)
HOURS_PER_MONTH = 730.0
LOADED_MODELS = "loaded_models"  # the local deployer's endpoint_usage.csv column
CW_LOADED_MODELS = METRICS_BY_NAME["LoadedModelCount"].columns()[0]  # steps.csv: CloudWatch's average, per instance


def deployer_settings(settings: Mapping[str, object], known: Callable[[], Iterable[str]]) -> dict[str, object]:
    """A configuration's settings minus the mix keys the deployer does not know (they shape the test);
    `known`: the deployer's `known_keys`, asked only when a mix key is there."""
    if not any(key in settings for key in MIX_KEYS):
        return dict(settings)
    keys = set(known())
    return {k: v for k, v in settings.items() if k not in MIX_KEYS or k in keys}


def configuration_mix(settings: Mapping[str, object], load_mix: str | None, where: Callable[[str], str]) -> str | None:
    """The `--target-models` of one configuration (None: the `load:` section's, unchanged); a one-line
    UsageError naming the key when the configuration's mix settings cannot make one."""
    s, n = settings.get(ZIPF_S), settings.get(MODEL_COUNT)
    if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0):
        raise UsageError(f"{where(ZIPF_S)}: expected a number >= 0 (0 = uniform), got {s!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, float)) or not float(n).is_integer() or n < 1):
        raise UsageError(f"{where(MODEL_COUNT)}: expected a whole number of models (1 or more), got {n!r}")
    if s is None and n is None:
        return None
    if not load_mix:
        if s is None:
            return None  # model_count alone: how many models the endpoint hosts, the load names its own
        if n is None:
            raise UsageError(f"{where(ZIPF_S)}: needs the number of models: add model_count (grid or endpoint), "
                             "or load.target_models: zipf:S:N")
        return f"zipf:{s:g}:{int(n)}"
    try:
        base = parse_mix(load_mix)
    except UsageError as exc:
        key = ZIPF_S if s is not None else MODEL_COUNT
        raise UsageError(f"{where(key)}: load.target_models: {exc.message}") from None
    count = int(n) if n is not None else len(base.names)
    if base.kind == "zipf":
        return f"zipf:{(s if s is not None else base.zipf_s):g}:{count}"
    if base.kind == "uniform" and s is None:
        return f"uniform:{count}"
    key = ZIPF_S if s is not None else MODEL_COUNT
    raise UsageError(f"{where(key)}: varies a generated mix, but load.target_models is {load_mix!r}; write it as "
                     "zipf:S:N (or uniform:N for model_count alone)")


def mix_size(mix: str | None) -> int | None:
    """How many models a mix names (None without one)."""
    return len(parse_mix(mix).names) if mix else None


def models_loaded(samples: Iterable[Mapping[str, str]], start: float | None, end: float | None) -> float | None:
    """The mean of the `loaded_models` samples taken in [start, end] (the knee step), or None."""
    if start is None or end is None:
        return None
    values = [float(s[LOADED_MODELS]) for s in samples
              if s.get(LOADED_MODELS) not in (None, "") and start <= float(s["t"]) <= end]
    return round(sum(values) / len(values), 1) if values else None


def models_loaded_from_steps(rows: Iterable[Mapping[str, str]], users: float | None) -> float | None:
    """CloudWatch's LoadedModelCount (average, per instance) in the knee's row of the report's steps.csv."""
    found = None
    for row in rows:
        try:
            if users is not None and float(row.get("users") or "nan") == float(users) and row.get(CW_LOADED_MODELS):
                found = round(float(row[CW_LOADED_MODELS]), 1)
        except ValueError:
            continue
    return found


def cost_per_model_month(usd_per_hour: float | None, models: int | None) -> float | None:
    """$ a month per model of the mix: `usd_per_hour` (the fleet for the target, or the instances) x 730 / models."""
    if usd_per_hour is None or not models:
        return None
    return round(usd_per_hour * HOURS_PER_MONTH / models, 6)


class CacheFigures(TypedDict):
    """A model mix's cache figures as sweep.json holds them (None without a `model_cache`)."""

    cache_hit_rate: float | None
    cache_hit_rate_ci95: list[float] | None
    cold_p95_ms: float | None


def mix_figures(summary: Summary | JsonObject) -> CacheFigures:
    """`cache_hit_rate` (and its 95 % interval) and `cold_p95_ms` from summary.json's `model_cache` (None
    without one)."""
    cache = Summary.of(summary).model_cache
    if cache is None:
        return {"cache_hit_rate": None, "cache_hit_rate_ci95": None, "cold_p95_ms": None}
    interval = cache.hit_rate_ci95
    return {"cache_hit_rate": cache.hit_rate, "cache_hit_rate_ci95": None if interval is None else list(interval),
            "cold_p95_ms": None if cache.cold is None else cache.cold.p95_ms}
