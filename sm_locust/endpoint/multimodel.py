"""Local emulation of a SageMaker multi-model endpoint (`sm-locust serve --multi-model`).

`--model-count` models of `--model-size-mb`, one `ModelCache` per instance (endpoint/modelcache.py)
in a shared-memory array made before gunicorn forks, so all workers share one memory. A request's
TargetModel is checked (ValidationError, as SageMaker); a model in memory is served at once, else
the request waits for download and load, answered `ModelNotReadyException` after
`--model-ready-timeout-s` while the load goes on. A request that waited carries
`X-Sm-Locust-Model-Wait-Ms`; the wait is outside ModelLatency. Per-model counts go to
`/_sm_locust/stats` and the CloudWatch counters. `MultiModelEmulator` takes a clock and a sleep, so
tests do not wait (docs/multi-model.md).
"""

from __future__ import annotations

import multiprocessing
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sm_locust.endpoint.modelcache import FULL, HIT, LOAD, CacheSpec, ModelCache, model_name, store_size
from sm_locust.invocation import MODEL_WAIT_HEADER
from sm_locust.mix.spec import MAX_TARGETS

TARGET_MODEL_ENVIRON = "HTTP_X_AMZN_SAGEMAKER_TARGET_MODEL"
WAIT_HEADER = MODEL_WAIT_HEADER  # the client reads it (transport/contract.py): one name in invocation.py
CACHE_SETTINGS = ("Enabled", "Disabled")  # MultiModelConfig.ModelCacheSetting
MODEL_BUCKET = "sm-locust-local-models"  # the S3 location a missing model's error names
FULL_POLL_S = 0.01  # how often a request waiting for room in memory looks again
SIZE_SEED = 0  # model sizes drawn from a range: the same sizes on every start


def parse_size(text: object) -> tuple[float, float]:
    """`100` or `50-200` (MB) -> (low, high); ValueError with a one-line reason otherwise."""
    raw = str(text).strip()
    low_text, sep, high_text = raw.partition("-")
    try:
        low = float(low_text)
        high = float(high_text) if sep else low
    except ValueError:
        raise ValueError(f"--model-size-mb {raw!r} is not a size in MB; use e.g. 100 or 50-200") from None
    if not 0 < low <= high:
        raise ValueError(f"--model-size-mb {raw!r}: sizes must be more than 0 and LO <= HI")
    return low, high


# MultiModelConfig field -> its `sm-locust serve` option (dest; the flag is `--` + dest with dashes): one
# table for serve's flags, the command line LocalEndpoint builds, and a local sweep's settings.
SERVE_OPTIONS = {"model_count": "model_count", "model_size_mb": "model_size_mb", "memory_mb": "instance_memory_mb",
                 "disk_mb": "instance_disk_mb", "download_ms": "model_download_ms", "load_ms": "model_load_ms",
                 "unload_ms": "model_unload_ms", "cache_setting": "model_cache_setting",
                 "ready_timeout_s": "model_ready_timeout_s"}


@dataclass
class MultiModelConfig:
    """`sm-locust serve --multi-model` settings (sizes in MB, times in ms)."""

    model_count: int = 100
    model_size_mb: str = "100"
    memory_mb: float = 4096.0
    disk_mb: float | None = None  # None: every model downloaded stays on disk
    download_ms: float = 500.0
    load_ms: float = 500.0
    unload_ms: float = 0.0
    cache_setting: str = "Enabled"
    ready_timeout_s: float = 60.0

    def validate(self) -> None:
        if isinstance(self.model_count, bool) or not isinstance(self.model_count, int) or self.model_count < 1:
            raise ValueError(f"--model-count must be a whole number of at least 1, got {self.model_count!r}")
        if self.model_count > MAX_TARGETS:  # the names a mix can send to; each model is a row of the shared store
            raise ValueError(f"--model-count must be at most {MAX_TARGETS:,}, got {self.model_count:,}")
        parse_size(self.model_size_mb)
        if self.cache_setting not in CACHE_SETTINGS:
            raise ValueError(f"--model-cache-setting {self.cache_setting!r}: use Enabled or Disabled")
        for name, flag in (("download_ms", "--model-download-ms"), ("load_ms", "--model-load-ms"),
                           ("unload_ms", "--model-unload-ms")):
            if getattr(self, name) < 0:
                raise ValueError(f"{flag} must not be negative")
        if not self.ready_timeout_s > 0:
            raise ValueError(f"--model-ready-timeout-s must be more than 0, got {self.ready_timeout_s:g}")
        problems = self.spec().problems()
        if problems:
            raise ValueError(f"--multi-model: {problems[0]} "
                             "(--model-size-mb, --instance-memory-mb, --instance-disk-mb)")

    def sizes(self) -> tuple[float, ...]:
        low, high = parse_size(self.model_size_mb)
        if low == high:
            return (low,) * self.model_count
        rng = random.Random(SIZE_SEED)
        return tuple(round(rng.uniform(low, high), 1) for _ in range(self.model_count))

    def spec(self) -> CacheSpec:
        return CacheSpec(self.sizes(), float(self.memory_mb), None if self.disk_mb is None else float(self.disk_mb),
                         self.cache_setting == "Enabled", self.download_ms / 1000.0, self.load_ms / 1000.0,
                         self.unload_ms / 1000.0)

    def names(self) -> list[str]:
        return [model_name(i, self.model_count) for i in range(self.model_count)]

    def flags(self) -> list[str]:
        """The `sm-locust serve` flags that give this configuration (LocalEndpoint's command line)."""
        args = ["--multi-model"]
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value != f.default:
                flag = "--" + SERVE_OPTIONS[f.name].replace("_", "-")
                args += [flag, str(value) if isinstance(value, (str, int)) else f"{value:g}"]
        return args

    def describe(self) -> str:
        """One line for `sm-locust serve`: what a request meets."""
        low, high = parse_size(self.model_size_mb)
        size = f"{low:g} MB" if low == high else f"{low:g}-{high:g} MB"
        fit = int(self.memory_mb // high) if low == high else None
        fits = f" ({fit} fit)" if fit is not None else ""
        disk = "unlimited disk" if self.disk_mb is None else f"{self.disk_mb:g} MB disk"
        return (f"multi-model emulation: {self.model_count} models of {size} ({self.names()[0]} ...), "
                f"{self.memory_mb:g} MB memory{fits}, {disk}; a miss waits {self.download_ms:g} ms download "
                f"(unless on disk) + {self.load_ms:g} ms load; ModelCacheSetting {self.cache_setting}")


def shared_store(config: MultiModelConfig) -> Any:
    """The cache's shared-memory array, made (and emptied) before gunicorn forks its workers."""
    array = multiprocessing.get_context("fork").Array("d", store_size(config.model_count), lock=True)
    values: Any = array.get_obj()  # a ctypes array of doubles: indexable like a list
    ModelCache(config.spec(), values)
    return array


class MultiModelEmulator:
    """TargetModel checks, the wait for a model's load, and the counting, around one invocation
    (one per worker; one shared store for all)."""

    def __init__(self, config: MultiModelConfig, counters, store: Any | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] | None = None):
        self.config = config
        self.counters = counters
        self.store = store if store is not None else shared_store(config)
        values: Any = self.store.get_obj()  # a ctypes array of doubles: indexable like a list
        self.cache = ModelCache(config.spec(), values, fresh=False)
        self.lock = self.store.get_lock()
        self.names = config.names()
        self.index = {name: i for i, name in enumerate(self.names)}
        self.clock = clock
        # time.sleep looked up when called: gunicorn's gevent worker patches it after this module is imported
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))
        spec = self.cache.spec
        self.unload_us = spec.unload_s * 1e6

    # -- the API's checks ----------------------------------------------------------------------
    def check(self, environ) -> tuple[str, str] | None:
        """(error code, message) for a request SageMaker refuses before any model work, else None."""
        target = environ.get(TARGET_MODEL_ENVIRON)
        if not target:
            return "ValidationError", f"Request {uuid.uuid4()} is missing a target model header."
        if target not in self.index:
            return "ValidationError", (f"Failed to download model data(bucket: {MODEL_BUCKET}, key: models/{target}). "
                                       "Please ensure that there is an object located at the URL and that the role "
                                       "passed to CreateModel has permissions to download the model.")
        return None

    # -- serving -------------------------------------------------------------------------------
    def serve(self, environ, start_response, answer: Callable[..., list], error: Callable[..., list]) -> list:
        """Wait for the request's model (a hit waits nothing), run `answer(start_response)`, release.
        `error(start_response, code, message)` renders an error answer (the app's)."""
        name = environ[TARGET_MODEL_ENVIRON]
        i = self.index[name]
        arrived = self.clock()
        deadline = arrived + self.config.ready_timeout_s
        while True:
            with self.lock:
                admission = self.cache.request(i, self.clock())
                expired = admission.kind == FULL and self.clock() >= deadline
                if expired:  # never admitted, but a request for the model all the same
                    self.cache.refuse(i)
            if admission.kind != FULL:
                break
            if expired:
                self.counters.add(model_cache_lookups=1, model_cache_hits=0)
                return self._not_ready(error, start_response, name, (self.clock() - arrived) * 1e6)
            self.sleep(FULL_POLL_S)
        try:
            self._count_admission(admission)
            if admission.kind == HIT:
                return answer(start_response)
            if admission.ready_at > deadline:  # SageMaker answers at 60 s; the load goes on
                self.sleep(max(0.0, deadline - self.clock()))
                return self._not_ready(error, start_response, name, (self.clock() - arrived) * 1e6)
            self.sleep(max(0.0, admission.ready_at - self.clock()))
            waited_ms = (self.clock() - arrived) * 1000.0
            self.counters.add(model_loading_wait_time_us_sum=waited_ms * 1000.0)

            def respond(status, headers, exc_info=None):
                return start_response(status, [*headers, (WAIT_HEADER, f"{waited_ms:.1f}")], exc_info)

            return answer(respond)
        finally:
            with self.lock:
                unloaded = self.cache.release(i, self.clock())
            if unloaded:  # ModelCacheSetting Disabled: unloaded after its last request, not on its time
                self.counters.add(model_unloading_time_us_sum=self.unload_us)

    def _count_admission(self, admission) -> None:
        self.counters.add(model_cache_lookups=1, model_cache_hits=1 if admission.kind == HIT else 0)
        if admission.kind != LOAD:
            return
        for _ in admission.unloaded:
            self.counters.add(model_unloading_time_us_sum=self.unload_us)
        if admission.download_s:
            self.counters.add(model_downloading_time_us_sum=admission.download_s * 1e6)
        self.counters.add(model_loading_time_us_sum=admission.load_s * 1e6)

    def _not_ready(self, error, start_response, name: str, waited_us: float) -> list:
        if waited_us:
            self.counters.add(model_loading_wait_time_us_sum=waited_us)
        self.counters.add(invocations=1)
        return error(start_response, "ModelNotReadyException",
                          f"Model {name} is not loaded after {self.config.ready_timeout_s:g} s; its download and "
                          "load go on: retry the request")

    # -- what the server saw -------------------------------------------------------------------
    def loaded_count(self) -> int:
        with self.lock:
            return self.cache.loaded_count(self.clock())

    def stats(self) -> dict:
        """Per-model counts (models with requests only) and the cache's totals, for /_sm_locust/stats."""
        with self.lock:
            counts = [self.cache.counts(i) for i in range(self.cache.n)]
            totals = self.cache.totals()
            loaded = self.cache.loaded_count(self.clock())
        models = {self.names[i]: {"requests": r, "cold": c, "hits": h} for i, (r, c, h) in enumerate(counts) if r}
        return {"models": models,
                "multi_model": {"models": self.cache.n, "loaded_models": loaded, **totals,
                                "memory_mb": self.cache.spec.memory_mb, "cache_setting": self.config.cache_setting}}
