"""Serverless sweeps (issue 14): memory size x MaxConcurrency, three tests per configuration, cost
and the break-even against a real-time instance, on the sweep's machinery (docs/serverless.md).

A sweep file with a `serverless:` section (`serverless_spec.py`) is loaded here instead of by
`api.load_sweep`, into a `ServerlessSweep`: the same deploy / test / delete loop, cleanup, resume
and progress lines as every sweep (`runner.SweepRunner`), with these differences:

- **deployers**: `local` starts the embedded endpoint with its serverless emulation
  (`endpoint/serverless.py`: throttles above MaxConcurrency, cold starts after the idle timeout,
  compute scaled by the memory size); `sagemaker` creates an endpoint config with a
  `ServerlessConfig` (MemorySizeInMB, MaxConcurrency) instead of instances.
- **the tests** (`ServerlessRunner.run_configuration`): one Locust run, the configuration's run
  folder, holding the *stability* test (one caller at a time for `load.run_time`: latency with and
  without cold starts; the endpoint is fresh, so its first request is cold) and the *concurrency*
  test (`multiplier x MaxConcurrency` callers for `load.run_time` each, back to back: throttle
  rate, p50/p95, goodput) as consecutive phases of an Inference Recommender PHASES pattern; then
  the *cold-start* test, timed here request by request: wait longer than the idle timeout, fire
  the first requests together (each a new instance), repeat `cold_start.rounds` times. ModelSetupTime
  comes from the endpoint's own counters locally, from CloudWatch on AWS.
- **figures** (`serverless_measure.py`), **cost** (`serverless_cost.py`), **ranking**
  (`serverless_rank.py`) and **outputs** (`serverless_render.py`: sweep.json, sweep.csv, sweep.html
  with throttle rate vs multiplier, the cold-start histogram and cost vs traffic).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC
from pathlib import Path
from typing import Any, Self

from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.serverless import ServerlessConfig
from sm_locust.errors import UsageError
from sm_locust.payloads.options import prepare_payloads
from sm_locust.preflight import is_loopback, preflight
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.report.cost import load_prices
from sm_locust.launch import LoadSettings, execute
from sm_locust.shapes.settings import parse_seconds
from sm_locust.sweep import serverless_render
from sm_locust.sweep.api import DEFAULT_SWEEPS_DIR, Sweep, _estimate, _where
from sm_locust.sweep.costing import Estimate, Price
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.deployers.local import LocalDeployer
from sm_locust.sweep.deployers.sagemaker import KEYS as SAGEMAKER_KEYS
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer, environment_of
from sm_locust.sweep.grid import configuration_key, expand
from sm_locust.sweep.load import LoadPlan, check_payload, parse_load
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.progress import PREFIX
from sm_locust.sweep.runner import MARKER, SweepRunner, _StepEcho
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.serverless_cost import (
    ServerlessPrices,
    break_even_rps,
    load_serverless_prices,
    request_cost,
    requests_per_month,
)
from sm_locust.sweep.serverless_measure import Phase, cold_starts, load_figures
from sm_locust.sweep.serverless_rank import (
    WARM_KEYS,
    ServerlessCandidate,
    disqualification,
    recommend,
)
from sm_locust.sweep.serverless_spec import LOCAL_ONLY, CompareInstance, ServerlessSpec
from sm_locust.sweep.serverless_spec import PREFIX as KEY_PREFIX

RESULTS = "serverless.json"  # in each configuration's run folder: the phases and the cold-start requests
DEFAULT_PHASE_S = 30.0  # each test phase, when load.run_time is not given
DEFAULT_SERVICE_TIME_MS = 20.0  # local emulation: the model's time at 6144 MB unless endpoint.service_time_ms says
LOAD_KEYS_REFUSED = {
    "users": "the serverless tests decide the users (1 caller for stability, multiplier x MaxConcurrency for concurrency)",
    "shape": "the serverless tests decide the load (stability, then one phase per concurrency multiplier)",
    "spawn_rate": "callers start at once in each phase",
    "target_rps": "the serverless tests run callers back to back, not an open-loop rate",
    "traffic_pattern": "the serverless tests build their own phases",
}
SEARCH_OPTIONS_OFF = {"latency_slo_ms": None, "max_error_rate": None, "max_duration": None, "max_invocations": None}
COLD_READ_TIMEOUT_S = 120.0
STATS_PATH = "/_sm_locust/stats"
CLIENT_DURATION = "mean warm latency of the stability test, client side (ModelLatency unknown: an upper bound of the billed duration)"


# -- the load of one configuration -----------------------------------------------------------------


@dataclass
class ServerlessLoadPlan(LoadPlan):
    """`load:` of a serverless sweep: the run options every test shares, and the tests' shapes."""

    serverless: ServerlessSpec = None
    phase_s: float = DEFAULT_PHASE_S
    deploy: str = "local"

    def phases(self, max_concurrency: int) -> list[Phase]:
        out = []
        if "stability" in self.serverless.tests:
            out.append(Phase("stability", 1, self.phase_s))
        if "concurrency" in self.serverless.tests:
            for m in self.serverless.multipliers:
                out.append(Phase("concurrency", max(1, round(m * max_concurrency)), self.phase_s, m))
        return out

    @staticmethod
    def traffic_pattern(phases: list[Phase]) -> str:
        """The phases as an Inference Recommender PHASES pattern (shape `phases`), never stopped early."""
        return json.dumps({"TrafficPattern": {"TrafficType": "PHASES", "Phases": [
            {"InitialNumberOfUsers": p.users, "SpawnRate": 0, "DurationInSeconds": math.ceil(p.duration_s)}
            for p in phases]}, "StoppingConditions": {"FlatInvocations": "Continue"}})

    def gap_s(self, settings: Mapping[str, Any]) -> float:
        return self.serverless.cold_start.gap_for(self.deploy, self.serverless.idle_timeout_s(settings))

    def expected_test_s(self) -> float:
        phases = self.phases(1)
        seconds = sum(p.duration_s for p in phases) + (6.0 if phases else 0.0)  # Locust start and stop
        if "cold_start" in self.serverless.tests:
            gap = self.serverless.cold_start.gap_for(self.deploy, self.serverless.idle_timeout_s(self.serverless.shared))
            seconds += self.serverless.cold_start.rounds * (gap + 2.0)
        return seconds


def serverless_load_plan(spec: SweepSpec) -> ServerlessLoadPlan:
    for key, why in LOAD_KEYS_REFUSED.items():
        if key in spec.load:
            raise UsageError(f"{spec.source}: load.{key}: {why}; leave it out")
    load = dict(spec.load)
    run_time = load.pop("run_time", None)
    try:
        phase_s = parse_seconds(run_time, "run_time") if run_time is not None else DEFAULT_PHASE_S
    except UsageError as exc:
        raise UsageError(f"{spec.source}: load.run_time: {exc.message}") from None
    base = parse_load({**load, "users": 1}, Objective(), source=spec.source, base_dir=spec.base_dir)
    given = {k: v for k, v in base.given.items() if k != "users"}
    given["run_time"] = f"{phase_s:g}s"
    return ServerlessLoadPlan(base.options, given, base.load, "phases", base.shape_settings, spec.source,
                              serverless=spec.serverless, phase_s=phase_s, deploy=spec.deploy)


# -- deployers ---------------------------------------------------------------------------------------


def _serverless_part(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the serverless.* settings without the prefix, the rest)."""
    own = {k[len(KEY_PREFIX):]: v for k, v in settings.items() if k.startswith(KEY_PREFIX)}
    rest = {k: v for k, v in settings.items() if not k.startswith(KEY_PREFIX)}
    return own, rest


def _tests_text(plan: ServerlessLoadPlan | None, settings: Mapping[str, Any]) -> str:
    if plan is None:
        return ""
    mc = int(settings.get(f"{KEY_PREFIX}max_concurrency") or 1)
    parts = []
    for p in plan.phases(mc):
        parts.append(f"stability 1 caller {p.duration_s:g} s" if p.name == "stability" else
                     f"x{p.multiplier:g} {p.users} caller{'s' if p.users != 1 else ''}")
    if "cold_start" in plan.serverless.tests:
        cold = plan.serverless.cold_start
        parts.append(f"cold start {cold.rounds} x {cold.concurrency_for(mc)} after {plan.gap_s(settings):g} s idle")
    return "; tests: " + ", ".join(parts)


class LocalServerlessDeployer(LocalDeployer):
    """The embedded endpoint with the serverless emulation, one per configuration."""

    def __init__(self, plan: ServerlessLoadPlan | None = None):
        self.plan = plan

    def known_keys(self) -> list[str]:
        clash = ("max_concurrency", "max_batch_size", "max_batch_delay_ms", "batch_item_cost", "llm", "serverless",
                 "cold_start_ms")
        return [k for k in super().known_keys() if k not in clash] + [
            f"{KEY_PREFIX}{k}" for k in ("memory_size_mb", "max_concurrency", *LOCAL_ONLY)]

    @staticmethod
    def config(settings: Mapping[str, Any]) -> EndpointConfig:
        own, rest = _serverless_part(settings)
        rest.setdefault("service_time_ms", DEFAULT_SERVICE_TIME_MS)
        config = LocalDeployer.config(rest)
        config.cold_start_ms = float(own.get("cold_start_ms", 0.0))
        kwargs = {"memory_mb": int(own.get("memory_size_mb", 2048)), "max_concurrency": int(own.get("max_concurrency", 20))}
        for key in ("idle_timeout_s", "compute_share", "throttle_ms"):
            if key in own:
                kwargs[key] = float(own[key])
        config.serverless = ServerlessConfig(**kwargs)
        return config

    def describe(self, settings: Mapping[str, Any]) -> str:
        return super().describe(settings) + _tests_text(self.plan, settings)


class SageMakerServerlessDeployer(SageMakerDeployer):
    """A SageMaker serverless endpoint per configuration: the endpoint config's variant carries a
    ServerlessConfig (MemorySizeInMB, MaxConcurrency); everything else is the sagemaker deployer's."""

    expected_deploy_s = 240.0  # plan estimate: serverless endpoints start faster than instance-backed ones

    def __init__(self, client=None, *, plan: ServerlessLoadPlan | None = None, **kwargs):
        super().__init__(client, **kwargs)
        self.plan = plan

    def known_keys(self) -> list[str]:
        shared = [k for k in SAGEMAKER_KEYS if k not in ("instance_type", "instance_count", "price_per_hour")]
        return shared + [f"{KEY_PREFIX}{k}" for k in ("memory_size_mb", "max_concurrency", *LOCAL_ONLY)]

    def check(self, settings: Mapping[str, Any], where: Callable[[str], str]) -> None:
        for key in ("instance_type", "instance_count"):
            if key in settings:
                raise UsageError(f"{where(key)}: a serverless endpoint has no instances; compare_instance names the "
                                 "real-time instance to compare with")
        for key, value in settings.items():
            self.check_key(key, where, self.known_keys())
            if key.startswith("environment.") and (value is None or isinstance(value, (dict, list))):
                raise UsageError(f"{where(key)}: an environment value is text or a number, got {value!r}")
            if key in ("model_name", "image", "model_data_url", "role", "variant_name") and (
                    not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
        if not settings.get("model_name") and not (settings.get("image") and settings.get("role")):
            raise UsageError(f"{where('model_name')}: missing; give model_name (an existing Model to clone) or "
                             "image + role (+ model_data_url)")

    def describe(self, settings: Mapping[str, Any]) -> str:
        own, rest = _serverless_part(settings)
        source = f"clone of model {rest['model_name']}" if rest.get("model_name") else f"image {rest.get('image')}"
        ignored = [k for k in LOCAL_ONLY if k in own]
        return (f"serverless {own.get('memory_size_mb')} MB, MaxConcurrency {own.get('max_concurrency')}, {source}"
                + (f" ({', '.join(ignored)}: local emulation only, not sent)" if ignored else "")
                + _tests_text(self.plan, settings))

    def production_variant(self, deployment: Deployment) -> dict[str, Any]:
        own, rest = _serverless_part(deployment.settings)
        return {"VariantName": rest.get("variant_name") or "AllTraffic", "ModelName": deployment.resources["model"],
                "ServerlessConfig": {"MemorySizeInMB": int(own["memory_size_mb"]), "MaxConcurrency": int(own["max_concurrency"])}}

    def deployed_info(self, deployment: Deployment) -> dict[str, Any]:
        own, _ = _serverless_part(deployment.settings)
        return {"memory_size_mb": int(own["memory_size_mb"]), "max_concurrency": int(own["max_concurrency"]),
                "environment": environment_of(deployment.settings)}


# -- the cold-start test --------------------------------------------------------------------------------


def runtime_client(endpoint_url: str, region: str | None, profile: str | None, extra_env: Mapping[str, str], size: int):
    """A sagemaker-runtime client with retries off (a throttle or a timeout is a figure, not hidden)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(profile_name=profile or None,
                                    region_name=region or extra_env.get("AWS_DEFAULT_REGION") or None,
                                    aws_access_key_id=extra_env.get("AWS_ACCESS_KEY_ID"),
                                    aws_secret_access_key=extra_env.get("AWS_SECRET_ACCESS_KEY"))
    if session.region_name is None:
        session = boto3.session.Session(profile_name=profile or None, region_name="us-east-1",
                                        aws_access_key_id=extra_env.get("AWS_ACCESS_KEY_ID"),
                                        aws_secret_access_key=extra_env.get("AWS_SECRET_ACCESS_KEY"))
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5,
                    read_timeout=COLD_READ_TIMEOUT_S, max_pool_connections=max(10, size))
    return session.client("sagemaker-runtime", endpoint_url=endpoint_url or None, config=config)


def fire_round(client, endpoint_name: str, invocations: list, n: int, round_no: int) -> list[dict[str, Any]]:
    """`n` requests sent together (each needs an instance of its own); each one timed."""
    barrier = threading.Barrier(n)

    def one(k: int) -> dict[str, Any]:
        invocation = invocations[k % len(invocations)]
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=10)
        started = time.time()
        t0 = time.perf_counter()
        size = 0
        try:
            response = client.invoke_endpoint(EndpointName=endpoint_name, **invocation.boto3_kwargs())
            size = len(response["Body"].read())
            code = "ok"
        except Exception as exc:  # noqa: BLE001 - a throttle, a timeout, a dead endpoint: each is this request's result
            response = getattr(exc, "response", None) or {}
            code = (response.get("Error") or {}).get("Code") or type(exc).__name__
        return {"round": round_no, "ms": round((time.perf_counter() - t0) * 1000.0, 2), "code": code,
                "bytes_out": size, "t": round(started, 3)}

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="sm-locust-cold-start") as pool:
        return list(pool.map(one, range(n)))


def endpoint_counters(url: str) -> dict[str, float] | None:
    """The local endpoint's own counters (cold starts, ModelSetupTime sum), or None elsewhere."""
    if not url or not is_loopback(url):
        return None
    try:
        with urllib.request.urlopen(url.rstrip("/") + STATS_PATH, timeout=5) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


class CounterPoller:
    """Samples the local endpoint's counters every `every_s` while the load run goes on, so a phase's
    own ModelLatency and cold starts can be read (the counters are cumulative)."""

    FIELDS = ("successes", "model_latency_us_sum", "cold_starts", "ThrottlingException")

    def __init__(self, url: str, every_s: float = 0.5):
        self.url = url
        self.every_s = every_s
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sm-locust-endpoint-counters", daemon=True)

    def __enter__(self) -> Self:
        if endpoint_counters(self.url) is not None:  # a local endpoint: worth sampling
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            counters = endpoint_counters(self.url)
            if counters is not None:
                self.samples.append({"t": round(time.time(), 3), **{k: counters.get(k, 0) for k in self.FIELDS}})

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def counters_between(samples: list[Mapping[str, float]], start: float, end: float) -> dict[str, float] | None:
    """The counters' growth from the last sample at or before `start` to the last at or before `end`."""
    before = [s for s in samples if s["t"] <= start]
    until = [s for s in samples if s["t"] <= end]
    if not until:
        return None
    first = before[-1] if before else {k: 0 for k in CounterPoller.FIELDS}
    last = until[-1]
    return {k: last.get(k, 0) - first.get(k, 0) for k in CounterPoller.FIELDS}


def cloudwatch_ms(cloudwatch, metric: str, endpoint_name: str, variant: str, start: float, end: float) -> dict[str, Any]:
    """A microsecond metric of the endpoint (ModelSetupTime, ModelLatency) over the minutes of
    [start, end]: its count, average and maximum in ms (count 0 and a note when CloudWatch has none yet)."""
    from datetime import datetime

    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName=metric,
        Dimensions=[{"Name": "EndpointName", "Value": endpoint_name}, {"Name": "VariantName", "Value": variant}],
        StartTime=datetime.fromtimestamp(math.floor(start / 60) * 60, UTC),
        EndTime=datetime.fromtimestamp(math.ceil(end / 60) * 60, UTC),
        Period=60, Statistics=["Average", "Maximum", "SampleCount"]).get("Datapoints") or []
    count = sum(p.get("SampleCount", 0) for p in points)
    if not count:
        return {"source": "CloudWatch", "count": 0, "note": f"no {metric} in CloudWatch yet (it arrives a few minutes "
                "late); run the sweep again later to read it (measured configurations are not re-run)"}
    total = sum(p["Average"] * p["SampleCount"] for p in points)
    return {"source": "CloudWatch", "count": int(count), "average_ms": total / count / 1000.0,
            "maximum_ms": max(p["Maximum"] for p in points) / 1000.0}


# -- the runner --------------------------------------------------------------------------------------------


class ServerlessRunner(SweepRunner):
    """The sweep's runner with the serverless tests in place of the plateau search."""

    result_file = RESULTS  # also when only the cold-start test ran (no Locust run, no summary.json)

    def run_configuration(self, i: int, d: Deployment, run_dir: Path) -> None:
        sweep: ServerlessSweep = self.sweep
        plan: ServerlessLoadPlan = sweep.plan
        c = sweep.configuration(i)
        mc = int(c.settings[f"{KEY_PREFIX}max_concurrency"])
        region = d.region or self.spec.region
        phases = plan.phases(mc)
        results: dict[str, Any] = {"phases": [vars(p) for p in phases], "max_concurrency": mc,
                                   "memory_size_mb": int(c.settings[f"{KEY_PREFIX}memory_size_mb"])}
        namespace = plan.namespace(d.endpoint_name, d.endpoint_url, region)
        for key, value in SEARCH_OPTIONS_OFF.items():
            setattr(namespace, key, value)
        settings = plan.settings(d.endpoint_name, d.endpoint_url, region)
        with contextlib.redirect_stdout(_StepEcho(self.printer, f"{'':>4}[{i}/{self.total}] ")):
            extra_env = preflight(settings)
            if phases:
                namespace.traffic_pattern = plan.traffic_pattern(phases)
                load = LoadSettings(users=None, spawn_rate=None, run_time=None, shape="phases", processes=plan.load.processes,
                                    quiet=True, progress_every_s=0.0, locust_args=list(plan.load.locust_args))
                results["load_started"] = time.time()
                with CounterPoller(d.endpoint_url) as poller:  # local endpoint: ModelLatency and cold starts per phase
                    execute(settings, load, run_dir, extra_env, options=namespace)
                results["load_ended"] = time.time()
                results["endpoint_counters"] = poller.samples
        if "cold_start" in plan.serverless.tests:
            run_dir.mkdir(parents=True, exist_ok=True)
            results["cold_start"] = self.cold_start_test(i, d, c.settings, settings, namespace, extra_env, mc)
        (run_dir / RESULTS).write_text(json.dumps(results, indent=1))

    def cold_start_test(self, i: int, d: Deployment, config_settings: Mapping[str, Any], settings, namespace,
                        extra_env: Mapping[str, str], mc: int) -> dict[str, Any]:
        plan: ServerlessLoadPlan = self.sweep.plan
        cold = plan.serverless.cold_start
        gap = plan.gap_s(config_settings)
        n = cold.concurrency_for(mc)
        invocations = list(prepare_payloads(settings, namespace).pool.invocations)
        client = runtime_client(d.endpoint_url, d.region or self.spec.region, self.spec.aws_profile, extra_env, n)
        before = endpoint_counters(d.endpoint_url)
        requests: list[dict[str, Any]] = []
        start = time.time()
        for round_no in range(1, cold.rounds + 1):
            self.printer(f"{PREFIX} {'':>4}[{i}/{self.total}] cold start {round_no}/{cold.rounds}: {gap:g} s idle, "
                         f"then {n} first request{'s' if n != 1 else ''} together")
            time.sleep(gap)
            requests.extend(fire_round(client, d.endpoint_name, invocations, n, round_no))
        out: dict[str, Any] = {"gap_s": gap, "rounds": cold.rounds, "concurrency": n, "start": start, "end": time.time(),
                               "requests": requests}
        after = endpoint_counters(d.endpoint_url)
        if before is not None and after is not None:
            count = after.get("cold_starts", 0) - before.get("cold_starts", 0)
            setup_us = after.get("model_setup_time_us_sum", 0.0) - before.get("model_setup_time_us_sum", 0.0)
            out["model_setup_time"] = {"source": "the local endpoint's counters (its CloudWatch ModelSetupTime)",
                                       "count": int(count), "average_ms": setup_us / count / 1000.0 if count else None}
        return out

    def _measure(self, i: int, run_dir: Path) -> None:
        row = self.rows[i]
        try:
            self.sweep.measure_row(i, run_dir, row)
        except (OSError, ValueError, KeyError) as exc:
            row.update(status="failed", reason=f"cannot read the results in {run_dir}: {type(exc).__name__}: {exc}")

    def _line(self, i: int) -> None:
        c = self.sweep.configuration(i)
        self.printer(serverless_render.configuration_line(i, self.total, c.label, self.rows[i]))


# -- the sweep ---------------------------------------------------------------------------------------------


@dataclass
class ServerlessSweep(Sweep):
    """A checked serverless sweep (its spec's `serverless` holds the tests, multipliers, comparison)."""

    serverless_prices: ServerlessPrices = field(default_factory=ServerlessPrices)
    compare: CompareInstance | None = None
    cloudwatch: Any = None  # injected CloudWatch client (tests); default: made when needed on AWS

    runner_class = ServerlessRunner

    @property
    def serverless(self) -> ServerlessSpec:
        return self.spec.serverless

    def base_row(self, c) -> dict[str, Any]:
        row = super().base_row(c)
        for key in ("price_per_hour", "price_source", "instance_type", "instance_count"):
            row.pop(key, None)
        row["memory_size_mb"] = int(c.settings[f"{KEY_PREFIX}memory_size_mb"])
        row["max_concurrency"] = int(c.settings[f"{KEY_PREFIX}max_concurrency"])
        return row

    # -- figures of one configuration --------------------------------------------------------------
    def measure_row(self, i: int, run_dir: Path, row: dict[str, Any]) -> None:
        results = json.loads((run_dir / RESULTS).read_text())
        phases = [Phase(**p) for p in results.get("phases") or []]
        cold_data = results.get("cold_start") or {}
        cold = cold_starts(cold_data.get("requests") or [])
        stab, conc, bytes_in, bytes_out, stab_window = None, [], 0.0, None, None
        if phases:
            summary = json.loads((run_dir / "summary.json").read_text())
            path = timeline_path(run_dir)
            if path is None:
                raise FileNotFoundError(f"no timeline.jsonl in {run_dir}")
            seconds = read_seconds(path)
            figures = load_figures(seconds, phases, summary.get("totals") or {}, cold.p50_ms)
            stab, conc = figures.stability, figures.concurrency
            stab_window = figures.stability_window
            bytes_in = float((summary.get("payload") or {}).get("avg_bytes") or 0.0)
            bytes_out = average_response_bytes(run_dir / "locust_stats.csv")
        if bytes_out is None:
            sizes = [r["bytes_out"] for r in cold_data.get("requests") or [] if r.get("code") == "ok"]
            bytes_out = sum(sizes) / len(sizes) if sizes else 0.0
        row["stability"] = stab.as_dict() if stab else None
        row["concurrency"] = [f.as_dict() for f in conc]
        row["throttle_rate"] = {f"{f.multiplier:g}": f.throttle_rate for f in conc}
        row["goodput_rps"] = {f"{f.multiplier:g}": f.goodput_rps for f in conc}
        row["cold_start"] = {k: v for k, v in cold.as_dict().items() if k != "samples_ms"}
        row["cold_start_samples_ms"] = cold.samples_ms
        row["cold_start_p50_ms"], row["cold_start_p99_ms"] = cold.p50_ms, cold.p99_ms
        row["cold_start_gap_s"] = cold_data.get("gap_s")
        for key in ("warm_p50_ms", "warm_p95_ms", "warm_p99_ms", "warm_mean_ms"):
            row[key] = getattr(stab, key) if stab else None
        setup = cold_data.get("model_setup_time")
        if self.spec.deploy == "sagemaker" and cold_data.get("start"):
            setup = self.from_cloudwatch(run_dir, "ModelSetupTime", cold_data["start"], cold_data["end"]) or setup
        row["model_setup_time"] = setup
        row["model_latency"] = self.model_latency(run_dir, results, stab_window)
        goodputs = [f.goodput_rps for f in conc if f.goodput_rps is not None]
        row["capacity_rps"] = max(goodputs) if goodputs else None
        at_one = [f for f in conc if f.multiplier <= 1.0]
        row["throttle_at_max_concurrency"] = at_one[-1].throttle_rate if at_one else None
        row["latency_ms"] = row["warm_p95_ms"]
        row["error_rate"] = row["throttle_at_max_concurrency"]
        duration, source = row.get("warm_mean_ms"), CLIENT_DURATION
        if (row["model_latency"] or {}).get("average_ms") is not None:
            duration, source = row["model_latency"]["average_ms"], f"ModelLatency mean ({row['model_latency']['source']})"
        row.update(self.cost_row(row["memory_size_mb"], duration, source, bytes_in, bytes_out))

    def model_latency(self, run_dir: Path, results: Mapping[str, Any],
                      stability_window: tuple[float, float] | None) -> dict[str, Any] | None:
        """The container's mean time per successful request (what serverless bills): locally over the
        stability test (one caller: on this machine concurrent requests share its cores, on SageMaker each
        instance serves one request at a time), on AWS over the load run from CloudWatch."""
        samples = results.get("endpoint_counters") or []
        if samples and stability_window is not None:
            grown = counters_between(samples, *stability_window)
            if grown and grown["successes"]:
                return {"source": "the local endpoint's counters, stability test", "count": int(grown["successes"]),
                        "average_ms": grown["model_latency_us_sum"] / grown["successes"] / 1000.0,
                        "cold_starts": int(grown["cold_starts"])}
        if self.spec.deploy == "sagemaker" and results.get("load_started") and results.get("load_ended"):
            return self.from_cloudwatch(run_dir, "ModelLatency", results["load_started"], results["load_ended"])
        return None

    def cost_row(self, memory_mb: int, duration_ms: float | None, source: str, bytes_in: float, bytes_out: float) -> dict[str, Any]:
        out: dict[str, Any] = {"cost_per_1m": None, "break_even_rps": None, "break_even_requests_per_month": None, "cost": None}
        if duration_ms is None:
            return out
        cost = request_cost(memory_mb, duration_ms, self.serverless_prices, bytes_in, bytes_out)
        out["cost"] = {**cost.as_dict(), "bytes_in": bytes_in, "bytes_out": bytes_out, "duration_source": source,
                       "prices": self.serverless_prices.label()}
        out["cost_per_1m"] = cost.per_1m
        if self.compare is not None and self.compare.price_per_hour is not None:
            rate = break_even_rps(cost.usd, self.compare.price_per_hour, self.compare.capacity_rps)
            out["break_even_rps"] = rate
            out["break_even_requests_per_month"] = requests_per_month(rate) if rate is not None else None
        return out

    def from_cloudwatch(self, run_dir: Path, metric: str, start: float, end: float) -> dict[str, Any] | None:
        try:
            marker = json.loads((run_dir / MARKER).read_text())
        except (OSError, ValueError):
            marker = {}
        endpoint = marker.get("endpoint_name")
        if not endpoint:
            return None
        try:
            client = self.cloudwatch
            if client is None:
                from sm_locust.report.cloudwatch import make_client

                client = make_client(self.spec.region or self.deployer.client.meta.region_name, self.spec.aws_profile)
            variant = (marker.get("settings") or {}).get("variant_name") or "AllTraffic"
            return cloudwatch_ms(client, metric, endpoint, variant, start, end)
        except Exception as exc:  # noqa: BLE001 - the figure is optional; the sweep goes on
            return {"source": "CloudWatch", "count": 0, "note": f"not read: {type(exc).__name__}: {exc}"}

    # -- results -------------------------------------------------------------------------------------
    def candidates(self, rows: list[dict[str, Any]]) -> list[ServerlessCandidate]:
        out = []
        for r in rows:
            out.append(ServerlessCandidate(
                index=r["index"], label=r["label"], memory_mb=r["memory_size_mb"], max_concurrency=r["max_concurrency"],
                status=r["status"], reason=r.get("reason"),
                warm_ms={p: r.get(key) for p, key in WARM_KEYS.items()}, throttle_at_1=r.get("throttle_at_max_concurrency"),
                capacity_rps=r.get("capacity_rps"), cold_start_p50_ms=r.get("cold_start_p50_ms"),
                cost_per_1m=r.get("cost_per_1m"), break_even_rps=r.get("break_even_rps"),
                break_even_requests_per_month=r.get("break_even_requests_per_month")))
        return out

    def document(self, rows: Mapping[int, dict[str, Any]], outcome=None) -> dict[str, Any]:
        objective = self.spec.objective
        ordered = [rows[c.index] for c in self.configurations if c.index in rows]
        candidates = self.candidates(ordered)
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, objective, self.compare)
        self.mark_rows(candidates, ordered, rec.lost, disqualification)
        compare = None
        if self.compare is not None:
            compare = {"instance_type": self.compare.instance_type, "price_per_hour": self.compare.price_per_hour,
                       "price_source": self.compare.price_source, "capacity_rps": self.compare.capacity_rps}
        return {
            **self.document_head(serverless_render.SCHEMA, outcome, kind="serverless"),
            "serverless": self.serverless.as_dict(),
            "compare_instance": compare,
            "prices": {"serverless": self.serverless_prices.label(), "sources": self.serverless_prices.sources,
                       "usd_per_second_by_memory_mb": {str(k): v for k, v in self.serverless_prices.usd_per_second_by_memory_mb.items()},
                       "usd_per_gb_processed": self.serverless_prices.usd_per_gb_processed},
            "configurations": ordered,
            "recommendation": self.recommendation(rec),
            "why_not": self.why_not(rec),
        }

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        return serverless_render.write_all(self.out_dir, document, html_too)

    def write_progress(self, rows: Mapping[int, dict[str, Any]]) -> None:
        self.write_outputs(self.document(rows), html_too=False)


def average_response_bytes(path: Path) -> float | None:
    """Locust's Average Content Size of the run (its Aggregated row), or None."""
    import csv

    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("Name") == "Aggregated":
                    return float(row.get("Average Content Size") or 0.0)
    except (OSError, ValueError):
        return None
    return None


def _compare(spec: SweepSpec) -> CompareInstance | None:
    compare = spec.serverless.compare
    if compare is None or compare.price_per_hour is not None:
        return compare
    try:
        table = load_prices(spec.prices)
    except UsageError as exc:
        raise UsageError(f"{spec.source}: prices: {exc.message}") from None
    priced = table.lookup(compare.instance_type)
    if priced is None:
        raise UsageError(f"{spec.source}: compare_instance.instance_type: {compare.instance_type} is not in the price table "
                         f"({', '.join(table.sources)}); give compare_instance.price_per_hour")
    return replace(compare, price_per_hour=priced.usd_per_hour,
                   price_source=f"{priced.source} (approximate {table.region} on-demand price as of {table.as_of})")


def load(spec: SweepSpec, *, out: str | Path | None = None, client=None, poll_s: float | None = None,
         cloudwatch=None) -> ServerlessSweep:
    """A serverless sweep file, checked (UsageError naming the key), planned, nothing deployed."""
    sls = spec.serverless
    plan = serverless_load_plan(spec)
    if spec.deploy == "sagemaker":
        kwargs: dict[str, Any] = {"region": spec.region, "profile": spec.aws_profile,
                                  "timeout_s": spec.deploy_timeout_minutes * 60.0}
        if poll_s is not None:
            kwargs["poll_s"] = poll_s
        deployer = SageMakerServerlessDeployer(client, plan=plan, **kwargs)
    else:
        deployer = LocalServerlessDeployer(plan)
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    for c in configurations:
        deployer.check(c.settings, _where(spec, c))
    check_payload(plan)
    try:
        prices = load_serverless_prices(sls.prices_file)
        for memory in sls.memory_sizes:
            prices.per_second(memory)
    except UsageError as exc:
        raise UsageError(f"{spec.source}: serverless_prices: {exc.message}") from None
    compare = _compare(spec)
    keys = {c.index: configuration_key("serverless", spec.deploy, c.settings, plan.given, list(sls.tests), sls.multipliers,
                                       sls.cold_start.rounds, sls.cold_start.gap_s, sls.cold_start.concurrency)
            for c in configurations}
    out_dir = Path(out) if out else Path(DEFAULT_SWEEPS_DIR) / spec.sweep_id
    sweep = ServerlessSweep(spec, deployer, plan, configurations, keys, {c.index: Price(None, None, None) for c in configurations},
                            out_dir, serverless_prices=prices, compare=compare, cloudwatch=cloudwatch)
    _estimate(sweep)
    for i, e in list(sweep.estimates.items()):  # billed per use: at most every slot busy for the whole test
        settings = sweep.configuration(i).settings
        ceiling = (int(settings[f"{KEY_PREFIX}max_concurrency"]) * prices.per_second(int(settings[f"{KEY_PREFIX}memory_size_mb"]))
                   * e.test_s)
        sweep.estimates[i] = Estimate(e.deploy_s, e.test_s, e.delete_s, e.wait_s, 0.0, ceiling)
    return sweep
