"""The local endpoint's CloudWatch metrics: the same series a real SageMaker endpoint publishes.

With `sm-locust serve --cloudwatch-url URL` the gunicorn master publishes the series, names, units
and dimensions `report/metrics.py` reads (docs/facts.md, "CloudWatch metrics of a SageMaker
real-time endpoint"), as statistic sets, request metrics only for windows with requests. Windows
never straddle a minute and are stamped with their start, so a request lands in the minute it was
served in. With `serve --async` the async endpoint's own metrics instead of Invocations (`put_async`).
`build_datums` is pure; `MetricsPublisher` is a daemon thread that flushes once more on
`stop()`. Publishing failures never reach the endpoint: one warning per streak.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import psutil

from sm_locust.aws.clients import PLACEHOLDER_KEYS, Purpose, client, is_loopback
from sm_locust.report.metrics import METRICS_BY_NAME

DEFAULT_INTERVAL_S = 10.0
SAMPLE_EVERY_S = 1.0  # resource readings: about one a second
MINUTE_S = 60  # CloudWatch's standard resolution: a window never straddles a minute
DEFAULT_ENDPOINT_NAME = "sm-locust-local"  # EndpointName when neither name flag is given
MAX_METRICS_PER_CALL = 1000  # PutMetricData: at most 1,000 metrics (and 1 MB) per request
MICROSECONDS = "Microseconds"
MILLISECONDS = "Milliseconds"
SECONDS = "Seconds"
PERCENT = "Percent"
NONE = "None"
DEFAULT_REGION = "us-east-1"

log = logging.getLogger(__name__)


def endpoint_name_for(config) -> str:
    """The EndpointName dimension: --metrics-endpoint-name, else --endpoint-name, else the default."""
    return config.metrics_endpoint_name or config.endpoint_name or DEFAULT_ENDPOINT_NAME


# ------------------------------------------------------------------------------------------ pure


@dataclass(frozen=True)
class ResourceUsage:
    """One reading of the endpoint's resources, in percent (CPU summed over cores: 2 cores -> 0-200)."""

    cpu_pct: float | None = None
    memory_pct: float | None = None
    disk_pct: float | None = None
    loaded_models: int | None = None  # multi-model emulation: LoadedModelCount (endpoint/multimodel.py)
    async_backlog: float | None = None  # serve --async: requests queued or being processed (ApproximateBacklogSize)
    async_oldest_age_s: float | None = None  # ... the oldest still queued (ApproximateAgeOfOldestRequest)


def dimensions(endpoint_name: str, variant_name: str) -> list[dict[str, str]]:
    return [{"Name": "EndpointName", "Value": endpoint_name}, {"Name": "VariantName", "Value": variant_name}]


def _statistic_set(name: str, dims, timestamp, unit: str, count: float, total: float, low: float, high: float) -> dict:
    return {"MetricName": name, "Dimensions": dims, "Timestamp": timestamp, "Unit": unit,
            "StatisticValues": {"SampleCount": float(count), "Sum": float(total),
                                "Minimum": float(low), "Maximum": float(high)}}


def _delta(previous: Mapping[str, float], current: Mapping[str, float], name: str) -> float:
    return max(0.0, float(current.get(name, 0)) - float(previous.get(name, 0)))


def async_gauges(counters, clock: Callable[[], float] = time.time) -> tuple[float, float]:
    """(backlog, age of the oldest queued request in s) of `serve --async` from its shared counters."""
    now = counters.snapshot()
    backlog = max(0.0, float(now["async_accepted"]) - now["async_results"] - now["async_failures"])
    since = float(now["async_oldest_waiting_since"])
    return backlog, (max(0.0, clock() - since) if since > 0 else 0.0)


def put_async(out: dict[str, list[dict]], previous: Mapping[str, float], current: Mapping[str, float],
              endpoint_name: str, dims: list[dict[str, str]], timestamp: datetime, usage: Sequence[ResourceUsage],
              instance_count: int) -> None:
    """An async endpoint's metrics (docs/facts.md, "Asynchronous inference"): the backlog, its share per
    instance, the oldest request's age and HasBacklogWithoutCapacity from the window's readings, with
    EndpointName alone; processed requests, failures, TimeInBacklog and TotalProcessingTime from the
    counters, with EndpointName and VariantName. Nothing without `serve --async`'s readings or counts."""
    endpoint_dims = [d for d in dims if d["Name"] == "EndpointName"]

    def put(name: str, dimensions, count: float, total: float, low: float, high: float, unit: str) -> None:
        datum = _statistic_set(name, dimensions, timestamp, unit, count, total, low, high)
        out.setdefault(METRICS_BY_NAME[name].namespace, []).append(datum)

    backlogs = [r.async_backlog for r in usage if r.async_backlog is not None]
    if backlogs:
        per = 1.0 / max(1, instance_count)
        put("ApproximateBacklogSize", endpoint_dims, len(backlogs), sum(backlogs), min(backlogs), max(backlogs), NONE)
        put("ApproximateBacklogSizePerInstance", endpoint_dims, len(backlogs), sum(backlogs) * per,
            min(backlogs) * per, max(backlogs) * per, NONE)
        without = [1.0 if b > 0 and instance_count == 0 else 0.0 for b in backlogs]
        put("HasBacklogWithoutCapacity", endpoint_dims, len(without), sum(without), min(without), max(without), NONE)
    ages = [r.async_oldest_age_s for r in usage if r.async_oldest_age_s is not None]
    if ages:
        put("ApproximateAgeOfOldestRequest", endpoint_dims, len(ages), sum(ages), min(ages), max(ages), SECONDS)
    failures = _delta(previous, current, "async_failures")
    processed = _delta(previous, current, "async_results") + failures
    if processed:
        put("InvocationsProcessed", dims, 1, processed, processed, processed, NONE)
        put("InvocationFailures", dims, 1, failures, failures, failures, NONE)
    for name, base, unit in (("TimeInBacklog", "async_time_in_backlog_us", MICROSECONDS),
                             ("TotalProcessingTime", "async_total_processing_time_ms", MILLISECONDS)):
        samples = float(current.get(f"{base}_window_count", 0))
        if samples:
            put(name, dims, samples, current[f"{base}_window_sum"], current[f"{base}_window_min"],
                current[f"{base}_window_max"], unit)


def build_datums(
    previous: Mapping[str, float],
    current: Mapping[str, float],
    *,
    endpoint_name: str,
    variant_name: str = "AllTraffic",
    timestamp: datetime,
    usage: Sequence[ResourceUsage] = (),
    instance_count: int = 1,
    invocation_counts: bool = True,
) -> dict[str, list[dict]]:
    """Counter snapshots and resource readings -> {namespace: [PutMetricData datum, ...]}.

    `previous`/`current` are `SharedCounters` snapshots; `current` carries the window fields
    (`model_latency_us_window_*`, from `take_window`) for the requests since `previous`.
    Cumulative counters give this window's invocations, answers and errors as differences.
    `usage` holds the window's resource readings (each metric's None values are left out).
    """
    dims = dimensions(endpoint_name, variant_name)
    out: dict[str, list[dict]] = {}

    def put(name: str, count: float, total: float, low: float, high: float, unit: str) -> None:
        datum = _statistic_set(name, dims, timestamp, unit, count, total, low, high)
        out.setdefault(METRICS_BY_NAME[name].namespace, []).append(datum)

    put_async(out, previous, current, endpoint_name, dims, timestamp, usage, instance_count)
    invocations = _delta(previous, current, "invocations")
    if invocations and invocation_counts:  # the fleet emulation sends its own, per emulated minute (fleet_control.py)
        put("Invocations", invocations, invocations, 1, 1, NONE)
        per = 1.0 / max(1, instance_count)
        put("InvocationsPerInstance", invocations, invocations * per, per, per, NONE)
    errors = {"Invocation4XXErrors": _delta(previous, current, "errors_4xx"),
              "Invocation5XXErrors": _delta(previous, current, "errors_5xx")}
    answered = max(_delta(previous, current, "requests"), sum(errors.values()))
    if answered:
        for name, count in errors.items():
            put(name, answered, count, 0 if count < answered else 1, 1 if count else 0, NONE)
    lookups = _delta(previous, current, "model_cache_lookups")  # multi-model emulation: 1 per hit, 0 per miss
    if lookups:
        hits = _delta(previous, current, "model_cache_hits")
        put("ModelCacheHit", lookups, hits, 0 if hits < lookups else 1, 1 if hits else 0, NONE)
    for name, base in (("ModelLatency", "model_latency_us"), ("OverheadLatency", "overhead_latency_us"),
                       ("ModelSetupTime", "model_setup_time_us"),  # ModelSetupTime: serverless cold starts
                       ("ModelLoadingWaitTime", "model_loading_wait_time_us"),  # the rest: multi-model emulation
                       ("ModelDownloadingTime", "model_downloading_time_us"),
                       ("ModelLoadingTime", "model_loading_time_us"),
                       ("ModelUnloadingTime", "model_unloading_time_us")):
        samples = float(current.get(f"{base}_window_count", 0))
        if samples:
            put(name, samples, current[f"{base}_window_sum"], current[f"{base}_window_min"],
                current[f"{base}_window_max"], MICROSECONDS)
    for name, attr, unit in (("CPUUtilization", "cpu_pct", PERCENT), ("MemoryUtilization", "memory_pct", PERCENT),
                             ("DiskUtilization", "disk_pct", PERCENT), ("LoadedModelCount", "loaded_models", NONE)):
        values = [v for v in (getattr(r, attr) for r in usage) if v is not None]
        if values:
            put(name, len(values), sum(values), min(values), max(values), unit)
    return out


def next_boundary(now: float, interval_s: float) -> float:
    """When the window open at `now` closes: the next multiple of the interval, or the next
    minute if that comes first (so a window never straddles two CloudWatch minutes)."""
    grid = (math.floor(now / interval_s) + 1) * interval_s
    minute = (math.floor(now / MINUTE_S) + 1) * MINUTE_S
    return min(grid, minute)


def batches(datums: list[dict], size: int = MAX_METRICS_PER_CALL) -> Iterator[list[dict]]:
    """Split one namespace's datums into PutMetricData-sized calls."""
    for i in range(0, len(datums), size):
        yield datums[i : i + size]


def cpu_percent(previous: tuple[float, float] | None, current: tuple[float, float]) -> float | None:
    """CPU percent summed over cores between two readings of (time, cumulative CPU seconds).

    The CPU seconds are those of the process tree including its reaped children (see
    `ProcessSampler`), so a worker that exits or restarts between readings is still counted.
    None for the first reading or when no time passed; never negative (a zombie not yet reaped
    can make the total dip for a moment).
    """
    if previous is None:
        return None
    elapsed = current[0] - previous[0]
    if elapsed <= 0:
        return None
    return max(0.0, 100.0 * (current[1] - previous[1]) / elapsed)


# ------------------------------------------------------------------------------------------- I/O


class ProcessSampler:
    """Reads CPU and memory of a process and its descendants (gunicorn master + workers) and the
    disk usage of a directory, with psutil.

    CPU: the tree's cumulative CPU seconds, each process's own plus its reaped children's
    (`children_user`/`children_system`). When the master reaps a worker, that worker's time moves
    into the master's children fields, so the total stays continuous across worker exits and
    restarts, and at shutdown (workers gone) the last window still shows their work.
    Memory: proportional set size (shared pages split among the forked workers; RSS if PSS is
    unreadable) as a percent of the machine's memory.
    """

    def __init__(self, pid: int | None = None, disk_path: str | os.PathLike[str] = ".",
                 clock: Callable[[], float] = time.time):
        self._psutil = psutil
        self.root = psutil.Process(pid or os.getpid())
        self.disk_path = str(Path(disk_path).resolve())
        self.clock = clock
        self._last: tuple[float, float] | None = (clock(), self._cpu_seconds(self._processes()))

    def _processes(self) -> list:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except self._psutil.Error:
            return [self.root]

    def _cpu_seconds(self, processes: list) -> float:
        total = 0.0
        for proc in processes:
            try:
                t = proc.cpu_times()
            except self._psutil.Error:  # exited between listing and reading
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def _memory_pct(self, processes: list) -> float:
        used = 0.0
        for proc in processes:
            try:
                info = proc.memory_full_info()
                used += getattr(info, "pss", None) or info.rss
            except self._psutil.AccessDenied:
                with contextlib.suppress(self._psutil.Error):
                    used += proc.memory_info().rss
            except self._psutil.Error:
                continue
        return 100.0 * used / self._psutil.virtual_memory().total

    def sample(self, cpu_only: bool = False) -> ResourceUsage:
        """CPU since the previous call; memory and disk now (skipped with cpu_only: at shutdown the
        workers are already gone and memory would read too low)."""
        processes = self._processes()
        reading = (self.clock(), self._cpu_seconds(processes))
        cpu = cpu_percent(self._last, reading)
        self._last = reading
        if cpu_only:
            return ResourceUsage(cpu_pct=cpu)
        try:
            disk = self._psutil.disk_usage(self.disk_path).percent
        except OSError:
            disk = None
        return ResourceUsage(cpu_pct=cpu, memory_pct=self._memory_pct(processes), disk_pct=disk)


def make_client(url: str):
    """A CloudWatch client aimed at `url`. A loopback URL is a stand-in (moto and the like
    check no credentials): it gets placeholder credentials, never the user's. Any other URL gets the
    usual credential chain (placeholders when it finds none, so the failure is CloudWatch's answer).
    Short timeouts and one attempt: a slow stand-in never holds the publisher or shutdown for long."""
    return client("cloudwatch", Purpose.PUBLISH, endpoint_url=url, default_region=DEFAULT_REGION,
                  keys=PLACEHOLDER_KEYS if is_loopback(url) else None, when_none="placeholders",
                  connect_timeout=2, read_timeout=5)


class MetricsPublisher:
    """Publishes the endpoint's metrics from a daemon thread: a resource reading about once a
    second, a publication at each window's end (`next_boundary`).

    `publish_once()` closes the open window and publishes it (tests call it directly); `start()`
    runs the timer; `stop()` ends it and publishes the last partial window (the final flush), so
    the totals in CloudWatch equal what the endpoint served. Never raises out of a publication.
    """

    def __init__(self, counters, *, endpoint_name: str, variant_name: str = "AllTraffic",
                 url: str | None = None, cloudwatch=None, interval_s: float = DEFAULT_INTERVAL_S,
                 sampler: ProcessSampler | None = None, sample_every_s: float = SAMPLE_EVERY_S,
                 clock: Callable[[], float] = time.time, logger: logging.Logger = log,
                 loaded_models: Callable[[], int] | None = None, invocation_counts: bool = True,
                 async_gauges: Callable[[], tuple[float, float]] | None = None, async_scaled: bool = False):
        if cloudwatch is None and not url:
            raise ValueError("MetricsPublisher needs a CloudWatch url or client")
        self.counters = counters
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.url = url
        self._client = cloudwatch
        self.interval_s = interval_s
        self.sampler = sampler
        self.loaded_models = loaded_models  # multi-model emulation: LoadedModelCount, read with each sample
        self.sample_every_s = min(sample_every_s, interval_s)
        self.clock = clock
        self.log = logger
        self.invocation_counts = invocation_counts
        self.async_gauges = async_gauges  # serve --async: (backlog, oldest age s), read with each sample
        self.async_scaled = async_scaled  # --async-max-instances: the instances in service are the counters' gauge
        self._previous = counters.take_window()  # start clean: earlier requests are not this run's
        self._window_start = clock()
        self._readings: list[ResourceUsage] = []
        self._last_full: ResourceUsage | None = None  # the last reading with memory (see `sample`)
        self._lock = threading.Lock()  # one publication at a time (timer vs final flush)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self.published = 0  # datums sent so far
        self.failures = 0

    @property
    def client(self):
        if self._client is None:
            assert self.url, "__init__ refuses a publisher with neither a url nor a client"
            self._client = make_client(self.url)
        return self._client

    def sample(self, cpu_only: bool = False) -> None:
        """Add one resource reading to the open window. A CPU-only reading (at shutdown, when the
        workers are gone and memory would read too low) carries the last full reading's memory,
        disk and loaded models into a window that has none of its own: an instance that served into
        that minute had its memory all along, and on AWS that minute has its MemoryUtilization (a run
        that ended seconds into a minute left it missing from the report)."""
        if self.sampler is None and self.loaded_models is None and self.async_gauges is None:
            return
        try:
            reading = self.sampler.sample(cpu_only=cpu_only) if self.sampler is not None else ResourceUsage()
            if self.loaded_models is not None and not cpu_only:
                reading = replace(reading, loaded_models=self.loaded_models())
            if self.async_gauges is not None:
                backlog, age = self.async_gauges()
                reading = replace(reading, async_backlog=backlog, async_oldest_age_s=age)
        except Exception:  # noqa: BLE001 - a failed reading only costs one sample
            return
        with self._lock:
            if not cpu_only:
                self._last_full = reading
            elif self._last_full is not None and not any(r.memory_pct is not None for r in self._readings):
                last = self._last_full
                reading = replace(reading, memory_pct=last.memory_pct, disk_pct=last.disk_pct,
                                  loaded_models=last.loaded_models)
            self._readings.append(reading)

    def publish_once(self) -> int:
        """Close the open window and publish it; returns the datums sent (0 on failure)."""
        with self._lock:
            current = self.counters.take_window()
            previous, self._previous = self._previous, current
            readings, self._readings = self._readings, []
            start, self._window_start = self._window_start, self.clock()
            sent = 0
            try:
                stamp = datetime.fromtimestamp(start, UTC)
                by_namespace = build_datums(previous, current, endpoint_name=self.endpoint_name,
                                            variant_name=self.variant_name, timestamp=stamp, usage=readings,
                                            invocation_counts=self.invocation_counts,
                                            instance_count=(int(current.get("async_instances", 0))
                                                            if self.async_scaled else 1))
                for namespace, datums in by_namespace.items():
                    for batch in batches(datums):
                        self.client.put_metric_data(Namespace=namespace, MetricData=batch)
                        sent += len(batch)
            except Exception as exc:  # noqa: BLE001 - a metrics failure must never stop the endpoint
                self.failures += 1
                if not self._failing:
                    self._failing = True
                    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
                    self.log.warning("sm-locust endpoint: CloudWatch metrics not published to %s (%s: %s); "
                                     "serving goes on, later failures are not logged until it works again",
                                     self.url or "the CloudWatch client", type(exc).__name__, detail)
                return 0
            if self._failing:
                self._failing = False
                self.log.warning("sm-locust endpoint: CloudWatch metrics published again")
            self.published += sent
            return sent

    def _loop(self) -> None:
        # The open window's boundary, from when it opened: a thread started after a minute had turned
        # (a busy machine between the publisher's construction and `start`) would otherwise keep that
        # window open across the minute, stamped with the minute before, where a report's aligned
        # query never looks (CI saw a run's every metric "no data").
        closes = next_boundary(self._window_start, self.interval_s)
        while True:
            wait = max(0.0, min(self.sample_every_s, closes - self.clock()))
            if self._stop.wait(wait):
                return
            self.sample()
            if self.clock() >= closes:
                self.publish_once()
                closes = next_boundary(self.clock(), self.interval_s)

    def start(self) -> MetricsPublisher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="sm-locust-metrics", daemon=True)
            self._thread.start()
        return self

    def stop(self, flush: bool = True) -> None:
        """Stop the timer and (by default) publish the last partial window. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if flush:
            self.sample(cpu_only=True)
            self.publish_once()


def publisher_for(config, counters, loaded_models: Callable[[], int] | None = None) -> MetricsPublisher | None:
    """The publisher `serve_forever` starts when `config.cloudwatch_url` is set, else None
    (`loaded_models`: the multi-model emulation's LoadedModelCount reader)."""
    if not config.cloudwatch_url:
        return None
    queued = getattr(config, "async_inference", None) is not None  # serve --async: Invocations is not published
    return MetricsPublisher(counters, endpoint_name=endpoint_name_for(config), variant_name=config.variant_name,
                            url=config.cloudwatch_url, interval_s=config.metrics_interval_s,
                            sampler=ProcessSampler(os.getpid(), disk_path="."), loaded_models=loaded_models,
                            invocation_counts=getattr(config, "fleet", None) is None and not queued,
                            async_gauges=(lambda: async_gauges(counters)) if queued else None,
                            async_scaled=queued and config.async_inference.scaling is not None)
