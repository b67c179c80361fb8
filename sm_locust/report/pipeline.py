"""The report pipeline: read -> compute -> render/write, for `sm-locust report`.

`build_report(run_dir, ReportOptions(...))` reads the run folder, fetches endpoint metrics, merges
them on UTC time and writes merged_timeseries.csv, steps.csv, hourly.csv, an offline report.html, and
summary.json's `cloudwatch`, `cost` and `report` keys (others untouched) (docs/report.md). It never
stops at missing data: each gap is a line in the report and `ReportResult.gaps`, and the exit code
is 1 when anything was missing. `resolve_defaults` and `cloudwatch_default` are pure. Only logical
invocations count (`invocation.is_invocation`): per second from timeline.jsonl when the run has one.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sm_locust.aws.clients import is_loopback
from sm_locust.aws.runtime_api import check_endpoint_name, check_header
from sm_locust.config.options import parse_specs
from sm_locust.mix.spec import TARGET_MODEL
from sm_locust.record.model import JsonObject, Summary, SustainablePoint, Totals
from sm_locust.record.runfolder import RunData, read_run
from sm_locust.record.summary import iso
from sm_locust.report import cost as cost_mod
from sm_locust.report import merge
from sm_locust.report import options as report_options
from sm_locust.report.asyncview import async_view
from sm_locust.report.autoscaling import autoscaling_view
from sm_locust.report.cost import Cost
from sm_locust.report.hourly import hourly_rows
from sm_locust.report.llm import llm_view, token_cost
from sm_locust.report.policy import is_rate_run, per_instance_point, policy_lines, rate_slo
from sm_locust.report.render import RateView, ReportModel, closing_rows, render_html
from sm_locust.report.slos import RunSlos
from sm_locust.report.sources import MetricRequest, MetricResult, create_source
from sm_locust.report.tables import write_table, write_timeseries
from sm_locust.report.targets import target_view
from sm_locust.util.outputs import write_atomic
from sm_locust.util.yamlsafe import load_json

Progress = Callable[[str], None]

OUTPUT_FILES = {"timeseries": "merged_timeseries.csv", "steps": "steps.csv", "hourly": "hourly.csv",
                "html": "report.html"}


def _default(dest: str) -> Any:
    return report_options.BY_DEST[dest].default


@dataclass(frozen=True)
class ReportOptions:
    """What `sm-locust report` was asked, frozen; None means "take it from the run folder". Defaults and
    ranges are the OptionSpecs' (sm_locust/report/options.py); `parse` is the one way in from text or keywords."""

    cloudwatch: bool | None = None  # None: decide with cloudwatch_default
    endpoint_name: str | None = None
    variant_name: str | None = None
    inference_component: str | None = None
    region: str | None = None
    profile: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    price_per_hour: float | None = None
    prices_file: str | None = None
    target_rps: float | None = None
    safety_factor: float = _default("safety_factor")
    serverless_memory_mb: int | None = None
    wait: bool = _default("wait")
    wait_timeout: float = _default("wait_timeout")
    period: int = _default("period")
    out_dir: str | None = None
    write_summary: bool = True

    @classmethod
    def parse(cls, source: Mapping[str, object] | None = None, *, cloudwatch: bool | None = None,
              write_summary: bool = True) -> ReportOptions:
        """From a mapping (a command's `vars(args)`, keywords): each option parsed by its spec (a one-line
        UsageError naming the flag), then the names checked as SageMaker allows them."""
        options = parse_specs(report_options.OPTIONS, source)
        values = cls(cloudwatch=cloudwatch, write_summary=write_summary,
                     **{f.name: options[f.name] for f in fields(cls) if f.name in options})
        check_report_names(values.endpoint_name, values.variant_name, values.inference_component)
        return values


def check_report_names(endpoint_name: str | None, variant_name: str | None, inference_component: str | None) -> None:
    """CloudWatch dimensions a report is asked for follow SageMaker's naming rules (sm_locust.aws.runtime_api)."""
    if endpoint_name:
        check_endpoint_name(endpoint_name)
    if variant_name:
        check_header("target_variant", variant_name, "--variant-name")
    if inference_component:
        check_header("inference_component", inference_component)


@dataclass
class ReportResult:
    outputs: dict[str, Path]
    gaps: list[str]
    notes: list[str]
    steps: pd.DataFrame
    point: SustainablePoint | None
    cost: Cost
    cloudwatch: dict[str, Any]
    answers: list[tuple[str, str]] = field(default_factory=list)  # render.closing_rows: the terminal's lines

    @property
    def exit_code(self) -> int:
        return 1 if self.gaps else 0


# ------------------------------------------------------------------------------------ defaults

_KEYS = {
    "endpoint_name": ("endpoint_name", "endpoint"),
    "variant_name": ("variant_name", "variant", "target_variant"),
    "profile": ("aws_profile", "profile"),
    "inference_component": ("inference_component", "inference_component_name"),
    "region": ("region", "region_name", "aws_region"),
    "instance_type": ("instance_type",),
    "instance_count": ("instance_count", "initial_instance_count"),
    "serverless_memory_mb": ("serverless_memory_mb", "memory_size_mb"),
}


def _lookup(sources: list[JsonObject], names: tuple[str, ...]) -> Any:
    for src in sources:
        for name in names:
            value = src.get(name)
            if isinstance(value, dict):  # e.g. summary["variant"] = {"name": ..., "instance_type": ...}
                value = value.get("name")
            if value not in (None, ""):
                return value
    return None


def _sources(summary: JsonObject, run_options: JsonObject) -> list[JsonObject]:
    """Where run facts may sit: summary.json, its `variant` object, options.json's `sm_locust`
    and `options` sections (written by `sm-locust run` / `demo`), options.json's top level."""
    variant = summary.get("variant") if isinstance(summary.get("variant"), dict) else {}
    nested = [run_options[k] for k in ("sm_locust", "options") if isinstance(run_options.get(k), dict)]
    return [summary, variant, *nested, run_options]


def resolve_defaults(options: ReportOptions, summary: JsonObject, run_options: JsonObject) -> ReportOptions:
    """Fill the options the user left out from summary.json, then options.json."""
    sources = _sources(summary, run_options)
    found = {attr: _lookup(sources, names) for attr, names in _KEYS.items() if getattr(options, attr) is None}
    resolved = replace(options, **found)
    if resolved.instance_count is not None:
        resolved = replace(resolved, instance_count=int(resolved.instance_count))
    if resolved.variant_name is None:
        resolved = replace(resolved, variant_name="AllTraffic")
    return resolved


def is_local_run(summary: JsonObject, run_options: JsonObject) -> bool:
    """The run targeted the local endpoint: a loopback URL among its options, or `local: true`."""
    for src in _sources(summary, run_options):
        if src.get("local") is True or str(src.get("target", "")).lower() == "local":
            return True
        for key, value in src.items():
            if "url" in key.lower() and "cloudwatch" not in key.lower() and is_loopback(value):
                return True
    return False


def cloudwatch_url(run_options: JsonObject, env: Mapping[str, str]) -> str | None:
    nested = run_options.get("sm_locust")
    if not isinstance(nested, dict):
        nested = {}
    return (env.get("AWS_ENDPOINT_URL_CLOUDWATCH") or env.get("AWS_ENDPOINT_URL") or run_options.get("cloudwatch_url")
            or nested.get("cloudwatch_url"))


def has_aws_config(env: Mapping[str, str]) -> bool:
    """AWS configuration visible without any network call (no instance-metadata probing)."""
    if any(env.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")):
        return True
    home = Path(env.get("HOME", "~")).expanduser()
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials",
             env.get("AWS_CONFIG_FILE") or home / ".aws" / "config"]
    return any(Path(f).is_file() for f in files)


def cloudwatch_default(
    options: ReportOptions, summary: JsonObject, run_options: JsonObject, env: Mapping[str, str]
) -> tuple[bool, str, bool]:
    """(on?, why, is_gap). The rule, in order:

    1. --cloudwatch / --no-cloudwatch win;
    2. no endpoint name: off;
    3. the local endpoint with no CloudWatch URL (AWS_ENDPOINT_URL_CLOUDWATCH): off, always;
    4. a CloudWatch URL or AWS configuration (env vars, ~/.aws files) present: on;
    5. otherwise off, and that is a gap (a real endpoint's metrics are missing).
    """
    if options.cloudwatch is True:
        return True, "--cloudwatch", False
    if options.cloudwatch is False:
        return False, "CloudWatch off (--no-cloudwatch)", False
    url = cloudwatch_url(run_options, env)
    if not options.endpoint_name:
        return False, "CloudWatch off: no endpoint name in summary.json/options.json (pass --endpoint-name)", False
    if is_local_run(summary, run_options) and not url:
        return False, "CloudWatch off: the run used the local endpoint and no CloudWatch URL is set", False
    if url:
        return True, f"CloudWatch on: {url}", False
    if has_aws_config(env):
        return True, "CloudWatch on: AWS configuration found", False
    return False, ("CloudWatch off: no AWS configuration found (environment or ~/.aws); the endpoint's metrics "
                   "are missing (configure AWS and rerun, or pass --cloudwatch / --no-cloudwatch)"), True


# ---------------------------------------------------------------------------------- the pipeline


def run_span(data: RunData) -> tuple[float | None, float | None]:
    start = merge.parse_time(data.record.started_at)
    end = merge.parse_time(data.record.ended_at)
    if data.history is not None and not data.history.empty:
        h0, h1 = float(data.history["epoch_s"].iloc[0]), float(data.history["epoch_s"].iloc[-1])
        start = h0 if start is None else start
        end = h1 if end is None else end
    return start, end


def fetch_metrics(data: RunData, opts: ReportOptions, *, cloudwatch=None, progress: Progress | None = None,
                  env: Mapping[str, str] | None = None, prices: cost_mod.PriceTable | None = None) -> MetricResult:
    env = os.environ if env is None else env
    on, why, is_gap = cloudwatch_default(opts, data.summary, data.options, env)
    start, end = run_span(data)
    if not on or start is None or end is None or not opts.endpoint_name:
        result = create_source("none", reason=why).fetch(
            MetricRequest(opts.endpoint_name or "", start or 0, end or 0, period=opts.period))
        if on and (start is None or end is None):
            result.gaps.append("CloudWatch: the run's start and end times are unknown (no "
                               "summary.json times, no history)")
        elif on:
            result.gaps.append("CloudWatch: no endpoint name; pass --endpoint-name")
        if is_gap:
            result.gaps.append(why)
            result.notes.clear()
        return result
    priced = prices.lookup(opts.instance_type) if prices else None
    request = MetricRequest(
        opts.endpoint_name, start, end, variant_name=opts.variant_name or "AllTraffic",
        inference_component=opts.inference_component, period=opts.period,
        vcpus=priced.vcpus if priced else None, gpus=priced.gpus if priced else None,
        multi_model=data.record.mix is not None and data.record.mix.field == TARGET_MODEL,  # a model mix: the MME's
        async_inference=data.record.async_ is not None,  # a run that waited for async results: the queue's metrics
    )
    if progress:
        progress(f"fetching CloudWatch metrics for {request.describe()} "
                 f"{iso(start, 'seconds')} .. {iso(end, 'seconds')} (period {opts.period} s)")
    source = create_source("cloudwatch", cloudwatch=cloudwatch, region=opts.region, profile=opts.profile,
                           wait=opts.wait, wait_timeout=opts.wait_timeout, progress=progress)
    result = source.fetch(request)
    result.notes.insert(0, why)
    return result


def _json_safe(value: object) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, Path):
        return str(value)
    return value


def update_summary(path: Path, updates: dict[str, object]) -> bool:
    """Add/replace `updates` keys in summary.json, keeping every other key; atomic replace.

    Returns False (and leaves the file alone) when it is missing or not a JSON object.
    """
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    data.update(_json_safe(updates))
    write_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
    return True


def serverless_duration(point: SustainablePoint | None, steps: pd.DataFrame) -> float | None:
    """Billed duration estimate: ModelLatency avg at the sustainable step, else client p50."""
    if point is None:
        return None
    row = steps[steps["step"] == point.step] if point.step is not None and not steps.empty else None
    if row is not None and len(row):
        value = row.iloc[0].get("cw_ModelLatency_avg_ms")
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return point.p50_ms


def invocation_seconds(seconds: pd.DataFrame, timeline: pd.DataFrame | None) -> pd.DataFrame:
    """Per-second `requests`, `failures`, `rps`, `failures_per_s` and `goodput_rps` from the recorder's
    timeline (logical invocations; `RunData.timeline`: `t`, `requests`, `failures`) instead of
    Locust's Aggregated history row; seconds the timeline does not cover are NaN. Without a
    timeline: only `goodput_rps`, from the history's counts."""
    out = seconds.copy(deep=False)  # columns are replaced, not written into: `seconds` is left as it was
    if timeline is None or len(timeline) == 0 or out.empty:
        if "requests" in out.columns and "failures" in out.columns:
            out["goodput_rps"] = out["requests"] - out["failures"]
        return out
    # the second each sample's interval ends in, as Locust stamps a history row
    keys = np.floor(timeline["t"].to_numpy(dtype="float64")).astype("int64")
    counts = pd.DataFrame({"requests": timeline["requests"].to_numpy(), "failures": timeline["failures"].to_numpy()},
                          index=keys).groupby(level=0).sum()
    first, last = int(keys.min()), int(keys.max())
    epochs = out["epoch_s"].to_numpy()
    inside = (epochs >= first) & (epochs <= last)
    aligned = counts.reindex(epochs, fill_value=0)
    requests = aligned["requests"].to_numpy(dtype="float64")
    failures = aligned["failures"].to_numpy(dtype="float64")
    requests[~inside] = np.nan
    failures[~inside] = np.nan
    out["requests"], out["failures"] = requests, failures
    out["rps"], out["failures_per_s"] = requests, failures
    out["goodput_rps"] = requests - failures
    return out


def with_goodput(steps: pd.DataFrame) -> pd.DataFrame:
    """Steps with `successes` and `goodput_rps`: summary.json's when it has them, else from rps and the error rate."""
    if steps.empty or "rps" not in steps.columns:
        return steps
    out = steps.copy()
    derived = out["rps"] * (1.0 - out["error_rate"].fillna(0.0))
    if "goodput_rps" in out.columns:
        out["goodput_rps"] = out["goodput_rps"].fillna(derived)
    else:
        out["goodput_rps"] = derived
    out["successes"] = out["requests"] - out["failures"]
    return out


def compute(data: RunData, opts: ReportOptions, metrics: MetricResult, prices: cost_mod.PriceTable):
    """Pure part: (merged seconds, steps, point, cost, errors, gaps, notes)."""
    start, end = run_span(data)
    seconds = merge.per_second(data.history, start, end)
    seconds = invocation_seconds(seconds, data.timeline)
    seconds = merge.attach_metrics(seconds, metrics.frame, metrics.period)
    spans = merge.step_spans(data.record, seconds)
    steps = with_goodput(merge.step_records(seconds, spans, metrics.period))
    gaps: list[str] = []
    if steps.empty:
        gaps.append("steps: no steps in summary.json and none could be derived from the Locust history")
    point, instance_count = merge.sustainable_point(data.record, steps), opts.instance_count or 1
    if is_rate_run(data.record):  # rate phases: per instance only from a step that held the SLO (report/policy.py)
        point, _why = per_instance_point(data.record, rate_slo(data.record, run_slos(data.options)), instance_count)
        instance_count = point.instances if point is not None and point.instances is not None else instance_count
    cost, cost_gaps, cost_notes = cost_mod.cost_summary(
        point, prices=prices, instance_type=opts.instance_type, instance_count=instance_count,
        price_per_hour=opts.price_per_hour, target_rps=opts.target_rps, safety_factor=opts.safety_factor,
        serverless_memory_mb=opts.serverless_memory_mb, serverless_duration_ms=serverless_duration(point, steps),
        region=opts.region,
    )
    errors = merge.errors_by_code(data.record, data.failures)
    return seconds, steps, point, cost, errors, gaps + cost_gaps, cost_notes


def rate_view(summary: Summary | JsonObject, slos: RunSlos, instance_count: int,
              price_per_hour: float | None) -> RateView | None:
    """A traffic or watched run's verdict and why it has no per-instance figure (report/policy.py)."""
    record = Summary.of(summary)
    if not is_rate_run(record):
        return None
    slo = rate_slo(record, slos)
    _point, why = per_instance_point(record, slo, instance_count)
    block = record.autoscaling
    policy = policy_lines(block, slo, price_per_hour) if block is not None else []
    return RateView(slo=slo, policy=policy, no_point_reason=why)


SLO_OPTIONS = ("latency_slo_ms", "slo_percentile", "ttft_slo_ms", "itl_slo_ms")


def run_slos(options: JsonObject | None) -> RunSlos:
    """The SLOs the run was given (options.json's parsed options), for the lines the charts draw."""
    parsed = (options or {}).get("options") if isinstance(options, Mapping) else None
    if not isinstance(parsed, Mapping):
        return RunSlos()
    return RunSlos(**{k: parsed[k] for k in SLO_OPTIONS if parsed.get(k) is not None})


@dataclass
class PreparedReport:
    """Everything a report shows, computed and not yet written: the page's `model` (render.ReportModel),
    the options as resolved from the run folder, and the CloudWatch summary for summary.json."""

    run_dir: Path
    options: ReportOptions
    model: ReportModel
    cloudwatch: dict[str, Any]


def prepare_report(
    run_dir: str | os.PathLike[str],
    options: ReportOptions | None = None,
    *,
    cloudwatch=None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> PreparedReport:
    """Read the run folder, fetch metrics and compute what the report shows, writing nothing (the
    Python API's `RunResult.figures()` draws from it). Raises UsageError only for a folder that is not
    a run (or a CSV that is not Locust's)."""
    say = progress or (lambda _msg: None)
    say(f"reading {run_dir}")
    data = read_run(run_dir)
    opts = resolve_defaults(options or ReportOptions(), data.summary, data.options)
    prices = cost_mod.load_prices(opts.prices_file)
    metrics = fetch_metrics(data, opts, cloudwatch=cloudwatch, progress=say, env=env, prices=prices)
    say("merging and computing steps")
    seconds, steps, point, cost, errors, gaps, notes = compute(data, opts, metrics, prices)
    start, end = run_span(data)
    data.history = metrics.frame = None  # merged into `seconds`: let a week's worth of rows go now
    tokens = llm_view(data.record, point)  # LLM runs: tokens/s, TTFT, ITL, $ per 1M output tokens (report/llm.py)
    mix = target_view(data.record, seconds)  # a traffic mix: per target, cold vs warm, the cache (report/targets.py)
    cost = token_cost(cost, tokens)
    gaps = data.gaps + metrics.gaps + gaps
    notes = data.notes + metrics.notes + notes
    run_info = {
        "endpoint": opts.endpoint_name, "variant": opts.variant_name, "region": opts.region,
        "instances": f"{opts.instance_count or 1} x {opts.instance_type}" if opts.instance_type else None,
        "started": iso(start, "seconds") if start else None, "ended": iso(end, "seconds") if end else None,
        "run folder": str(data.run_dir),
    }
    model = ReportModel(
        title=f"sm-locust report: {opts.endpoint_name or data.folder.name}", run=run_info, steps=steps,
        seconds=seconds, point=point, cost=cost, errors=errors, gaps=gaps, notes=notes,
        generated_at=iso(time.time(), "seconds"),
        totals=data.record.totals or Totals(), llm=tokens,
        hours=hourly_rows(seconds, data.record), targets=mix,
        autoscaling=autoscaling_view(data.record, data.folder),  # report/autoscaling.py
        slos=run_slos(data.options),
        rate=rate_view(data.record, run_slos(data.options), opts.instance_count or 1, cost.get("price_per_hour_usd")),
        async_inference=async_view(data.summary, seconds, steps),  # report/asyncview.py
    )
    return PreparedReport(data.folder, opts, model, metrics.as_summary())


def build_report(
    run_dir: str | os.PathLike[str],
    options: ReportOptions | None = None,
    *,
    cloudwatch=None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ReportResult:
    """Read the run folder, fetch metrics, compute (`prepare_report`), write the outputs. Raises
    UsageError only for a folder that is not a run (or a CSV that is not Locust's)."""
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    prepared = prepare_report(run_dir, options, cloudwatch=cloudwatch, progress=say, env=env)
    model, opts = prepared.model, prepared.options
    out = Path(opts.out_dir) if opts.out_dir else prepared.run_dir
    out.mkdir(parents=True, exist_ok=True)
    outputs = {key: out / name for key, name in OUTPUT_FILES.items()}
    say(f"writing {outputs['timeseries']} ({len(model.seconds):,} rows)")
    write_timeseries(model.seconds, outputs["timeseries"], time=merge.iso_seconds)
    write_table(model.steps, outputs["steps"])
    if model.hours is not None:  # prepare_report always draws them; a model built elsewhere may not
        write_table(model.hours, outputs["hourly"])
    say(f"rendering {outputs['html']}")
    write_atomic(outputs["html"], render_html(model))
    summary_path = prepared.run_dir / "summary.json"
    if opts.write_summary:
        updated = update_summary(summary_path, {
            "cloudwatch": prepared.cloudwatch,
            "cost": model.cost,
            "report": {"generated_at": model.generated_at, "outputs": {k: str(v) for k, v in outputs.items()},
                       "gaps": model.gaps, "sustainable": None if model.point is None else model.point.to_json()},
        })
        if updated:
            outputs["summary"] = summary_path
        else:
            model.notes.append("summary.json not updated (missing or unreadable)")
    say(f"report done in {time.perf_counter() - t0:.1f} s")
    return ReportResult(outputs, model.gaps, model.notes, model.steps, model.point, model.cost, prepared.cloudwatch,
                        closing_rows(model))
