"""The load generator's wait for a CPU (Linux schedstat), on every Locust process.

`SchedWait` reads this process's share of wall time spent runnable but waiting on a run queue. A
local runner's recorder takes it once a second; `WorkerWaits` ships each worker's share to the master
with Locust's worker reports (`util.shipped`, every 3 s), where the recorder takes the share of the
worker that waited most: the master's own wait says nothing about the workers that measure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from sm_locust.util.shipped import WorkerShipped


class SchedWait:
    """The share of wall time this process spent runnable but waiting for a CPU, between two calls,
    from Linux's /proc/self/schedstat (its second field: nanoseconds the main thread, where gevent
    runs every greenlet, waited on a run queue). A load generator that the machine starves reads
    low on its own CPU yet sends and reads late: this is how it shows. None where the file is not
    there (not Linux, or a kernel without schedstats)."""

    PATH = "/proc/self/schedstat"

    def __init__(self, path: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path or self.PATH
        self._clock = clock
        self._last: tuple[float, int] | None = None
        self._available = True

    def _read(self) -> int | None:
        try:
            with open(self._path, encoding="ascii") as fh:
                return int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            self._available = False
            return None

    def percent(self) -> float | None:
        if not self._available:
            return None
        now = self._clock()
        waited = self._read()
        if waited is None:
            return None
        last, self._last = self._last, (now, waited)
        if last is None or now <= last[0]:
            return None
        return round(min(100.0, max(0.0, (waited - last[1]) / 1e9 / (now - last[0]) * 100.0)), 1)


class WorkerWaits(WorkerShipped):
    """Each worker's CPU-wait share since its last report, kept on the master (see the module docstring)."""

    ATTRIBUTE = "sm_locust_worker_waits"
    REPORT_KEY = "sm_locust_sched_wait"

    def __init__(self, sched: SchedWait | None = None) -> None:
        self._sched = sched or SchedWait()
        self.workers: dict[str, float] = {}  # master: each worker's last reported share, %

    def reset(self) -> None:
        self._sched.percent()  # a worker's baseline: its first report covers the test from here
        self.workers = {}

    def take_delta(self) -> float | None:
        return self._sched.percent()

    def merge_delta(self, delta: object, client_id: str) -> None:
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not math.isfinite(delta):
            return  # not what a worker of this version sends: ignored
        self.workers[str(client_id)] = min(100.0, max(0.0, float(delta)))

    def most(self, connected: Iterable[str]) -> float | None:
        """The largest last share among the workers still connected; None before any reported."""
        shares = [self.workers[c] for c in map(str, connected) if c in self.workers]
        return max(shares) if shares else None
