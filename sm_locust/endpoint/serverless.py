"""Local emulation of SageMaker Serverless Inference in the embedded endpoint (`serve --serverless-*`).

`MaxConcurrency` slots in one shared-memory table made before gunicorn forks, so the limit holds for
the whole endpoint. With every slot busy a request is answered `ThrottlingException` (429) at once,
never queued. A slot unused for `--idle-timeout-s` starts cold (`--cold-start-ms`, counted in
`ModelSetupTime` and OverheadLatency); requests prefer the most recent warm slot. Service time
scales with memory: `service time x ((1 - s) + s x 6144 / memory_mb)`. Pure parts are tested
directly; `SlotTable` and `ServerlessEmulator` take a clock and a sleep (docs/serverless.md).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

MEMORY_SIZES_MB = (1024, 2048, 3072, 4096, 5120, 6144)  # ServerlessConfig.MemorySizeInMB's allowed values
REFERENCE_MEMORY_MB = 6144  # --service-time-ms is the model's time at this size (the largest CPU share)
MAX_CONCURRENCY_RANGE = (1, 200)  # ServerlessConfig.MaxConcurrency
NEVER = -1.0  # last_used of a slot that never served


def memory_error(memory_mb: object) -> str | None:
    """Why `memory_mb` is not a serverless memory size, or None when it is one."""
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, (int, float)) or memory_mb not in MEMORY_SIZES_MB:
        return (f"memory size {memory_mb!r} MB is not one SageMaker allows; use 1024-6144 in 1 GB steps "
                f"({', '.join(map(str, MEMORY_SIZES_MB))})")
    return None


def concurrency_error(max_concurrency: object) -> str | None:
    """Why `max_concurrency` is not a serverless MaxConcurrency, or None when it is one."""
    low, high = MAX_CONCURRENCY_RANGE
    if (isinstance(max_concurrency, bool) or not isinstance(max_concurrency, (int, float))
            or not float(max_concurrency).is_integer() or not low <= max_concurrency <= high):
        return f"MaxConcurrency {max_concurrency!r} is outside SageMaker's {low}-{high} (a whole number)"
    return None


def compute_factor(memory_mb: int, compute_share: float = 1.0) -> float:
    """How much longer the model takes at `memory_mb` than at 6144 MB (CPU share proportional to memory)."""
    return (1.0 - compute_share) + compute_share * REFERENCE_MEMORY_MB / memory_mb


@dataclass
class ServerlessConfig:
    """`sm-locust serve --serverless-*` settings (the cold start itself is `--cold-start-ms`)."""

    memory_mb: int = 2048
    """MemorySizeInMB: 1024-6144 in 1 GB steps; the model's compute scales with it."""
    max_concurrency: int = 20
    """MaxConcurrency: instances (slots) serving at once; a request beyond them is throttled."""
    idle_timeout_s: float = 60.0
    """An instance idle this long is reclaimed: its next request starts cold."""
    compute_share: float = 1.0
    """Share of --service-time-ms that is compute and scales with the memory size (the rest does not)."""
    throttle_ms: float = 10.0
    """Time before a throttled request is answered: the round trip a refusal still costs a caller in
    the region (without it, closed-loop callers beyond MaxConcurrency spin on instant 429s)."""

    def validate(self) -> None:
        for problem in (memory_error(self.memory_mb), concurrency_error(self.max_concurrency)):
            if problem:
                raise ValueError(f"--serverless-{'memory-mb' if 'memory' in problem else 'max-concurrency'}: {problem}")
        if not self.idle_timeout_s > 0:
            raise ValueError(f"--idle-timeout-s must be more than 0 seconds, got {self.idle_timeout_s:g}")
        if not 0.0 <= self.compute_share <= 1.0:
            raise ValueError(f"--serverless-compute-share is a share between 0 and 1, got {self.compute_share:g}")
        if self.throttle_ms < 0:
            raise ValueError(f"--serverless-throttle-ms must not be negative, got {self.throttle_ms:g}")

    @property
    def factor(self) -> float:
        return compute_factor(self.memory_mb, self.compute_share)

    def flags(self) -> list[str]:
        """The `sm-locust serve` flags that give this configuration (LocalEndpoint's command line)."""
        args = ["--serverless-memory-mb", str(self.memory_mb), "--serverless-max-concurrency",
                str(self.max_concurrency)]
        names = {"idle_timeout_s": "--idle-timeout-s", "compute_share": "--serverless-compute-share",
                 "throttle_ms": "--serverless-throttle-ms"}
        for f in fields(self):
            if f.name in names and getattr(self, f.name) != f.default:
                args += [names[f.name], f"{getattr(self, f.name):g}"]
        return args

    def describe(self, service_time_ms: float, cold_start_ms: float) -> str:
        """One line for `sm-locust serve`: what a request meets."""
        compute = service_time_ms * self.factor
        return (f"serverless emulation: {self.memory_mb} MB (model {compute:g} ms = {service_time_ms:g} ms at "
                f"{REFERENCE_MEMORY_MB} MB x {self.factor:.3g}), MaxConcurrency {self.max_concurrency} (throttled "
                f"above), cold start {cold_start_ms:g} ms for an instance idle {self.idle_timeout_s:g} s or new")


def service_s(config: object) -> float:
    """Seconds a request holds its slot for the model: --service-time-ms, scaled by the memory size
    when the serverless emulation is on."""
    base = float(getattr(config, "service_time_ms", 0.0) or 0.0) / 1000.0
    serverless = getattr(config, "serverless", None)
    return base * serverless.factor if serverless is not None else base


# -- the slots (instances) -------------------------------------------------------------------------


def choose_slot(busy: Sequence[float], last_used: Sequence[float], now: float,
                idle_timeout_s: float) -> tuple[int, bool] | None:
    """The slot a new request takes and whether it starts cold; None when every slot is busy.

    Warm slots (served within the idle timeout) come first, the most recently used of them;
    otherwise the first free slot, cold (never used, or reclaimed after the idle timeout).
    """
    warm, cold = None, None
    for i, (b, last) in enumerate(zip(busy, last_used, strict=True)):
        if b:
            continue
        if last != NEVER and now - last < idle_timeout_s:
            if warm is None or last > last_used[warm]:
                warm = i
        elif cold is None:
            cold = i
    if warm is not None:
        return warm, False
    if cold is not None:
        return cold, True
    return None


@dataclass(frozen=True)
class Lease:
    slot: int
    cold: bool


class SlotTable:
    """MaxConcurrency slots (busy flag, last release time) in shared memory, safe across forked
    workers: made before the fork, every worker takes and frees slots in the same table. The
    clock is `time.monotonic` (system-wide on Linux), the same in every worker."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic):
        self.size = size
        self.clock = clock
        self._array = multiprocessing.get_context("fork").Array("d", 2 * size, lock=True)
        for i in range(size):
            self._array[size + i] = NEVER

    def acquire(self, idle_timeout_s: float) -> Lease | None:
        """Take a slot (cold or warm), or None: all busy (throttle)."""
        n = self.size
        with self._array.get_lock():
            values = self._array[:]
            chosen = choose_slot(values[:n], values[n:], self.clock(), idle_timeout_s)
            if chosen is None:
                return None
            self._array[chosen[0]] = 1.0
        return Lease(*chosen)

    def release(self, lease: Lease) -> None:
        with self._array.get_lock():
            self._array[lease.slot] = 0.0
            self._array[self.size + lease.slot] = self.clock()

    def busy(self) -> int:
        with self._array.get_lock():
            return int(sum(self._array[: self.size]))


class ServerlessEmulator:
    """Admission, cold starts and their metrics around one invocation (one per worker, one table for all)."""

    def __init__(self, config: ServerlessConfig, cold_start_ms: float, counters, table: SlotTable | None = None,
                 sleep: Callable[[float], None] | None = None):
        self.config = config
        self.cold_start_ms = cold_start_ms
        self.counters = counters
        self.table = table or SlotTable(config.max_concurrency)
        # time.sleep looked up when called: gunicorn's gevent worker patches it after this module is imported
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))
        self.throttle_message = (f"Rate exceeded: the serverless endpoint serves at most {config.max_concurrency} "
                                 "concurrent invocations (MaxConcurrency)")

    def serve(self, app, start_response, answer: Callable[[], list]) -> list:
        """Throttle, or take an instance (starting it cold when new or reclaimed), run `answer()`
        (the model's part of the request), and free the instance."""
        lease = self.table.acquire(self.config.idle_timeout_s)
        if lease is None:
            if self.config.throttle_ms:
                self.sleep(self.config.throttle_ms / 1000.0)
            self.counters.add(invocations=1)
            return app._error(start_response, "ThrottlingException", self.throttle_message)
        try:
            if lease.cold:
                self.start_cold()
            return answer()
        finally:
            self.table.release(lease)

    def start_cold(self) -> None:
        """A new instance: wait its setup time, counted as ModelSetupTime."""
        if self.cold_start_ms:
            self.sleep(self.cold_start_ms / 1000.0)
        self.counters.add(cold_starts=1, model_setup_time_us_sum=self.cold_start_ms * 1000.0)


def shared_slots(config: object) -> SlotTable | None:
    """The slot table `serve_forever` makes before the fork when the emulation is on, else None."""
    serverless = getattr(config, "serverless", None)
    return SlotTable(serverless.max_concurrency) if serverless is not None else None


def emulator_for(config: object, counters, table: SlotTable | None = None) -> ServerlessEmulator | None:
    """What an endpoint worker runs when `config.serverless` is set (a ServerlessConfig), else None."""
    serverless = getattr(config, "serverless", None)
    if serverless is None:
        return None
    return ServerlessEmulator(serverless, float(getattr(config, "cold_start_ms", 0.0) or 0.0), counters, table)
