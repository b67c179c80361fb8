"""The load generator's wait for a CPU (Linux schedstat), on every Locust process.

`SchedWait` reads this process's shares of wall time spent running and runnable but waiting on a
run queue. A local runner's recorder takes the wait once a second; `WorkerWaits` ships each worker's
pair (run and wait over the same interval) to the master with Locust's worker reports
(`util.shipped`, every second: `record.watermark`), where the recorder judges each worker on its own pair
(`measure.workercpu`): the master's own figures say nothing about the workers that measure, and one
worker's wait beside another's CPU judges neither.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from sm_locust.measure.workercpu import WorkerCpu
from sm_locust.util.shipped import WorkerShipped


class SchedWait:
    """The shares of wall time this process ran on a CPU and spent runnable but waiting for one, between
    two calls, from Linux's /proc/self/schedstat (its first two fields: nanoseconds the main thread,
    where gevent runs every greenlet, ran and waited on a run queue). A load generator that the
    machine starves reads low on its own CPU yet sends and reads late: this is how it shows. None
    where the file is not there (not Linux, or a kernel without schedstats)."""

    PATH = "/proc/self/schedstat"

    def __init__(self, path: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path or self.PATH
        self._clock = clock
        self._last: tuple[float, int, int] | None = None
        self._available = True

    def _read(self) -> tuple[int, int] | None:
        try:
            with open(self._path, encoding="ascii") as fh:
                fields = fh.read().split()
            return int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):
            self._available = False
            return None

    def shares(self) -> tuple[float, float] | None:
        """(ran, waited) in % of the wall time since the last call; None at the first call (the baseline)."""
        if not self._available:
            return None
        now = self._clock()
        read = self._read()
        if read is None:
            return None
        last, self._last = self._last, (now, *read)
        if last is None or now <= last[0]:
            return None
        wall_ns = (now - last[0]) * 1e9

        def share(ns: int) -> float:
            return round(min(100.0, max(0.0, ns / wall_ns * 100.0)), 1)

        return share(read[0] - last[1]), share(read[1] - last[2])

    def percent(self) -> float | None:
        """The wait alone (`shares`' second)."""
        shares = self.shares()
        return None if shares is None else shares[1]


def _share(value: object) -> float | None:
    """A shipped share (%), clamped; None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(100.0, max(0.0, float(value)))


class WorkerWaits(WorkerShipped):
    """Each worker's CPU and CPU-wait shares since its last report, kept on the master (module docstring).

    A worker ships {"run": %, "wait": %}."""

    ATTRIBUTE = "sm_locust_worker_waits"
    REPORT_KEY = "sm_locust_sched_wait"

    def __init__(self, sched: SchedWait | None = None) -> None:
        self._sched = sched or SchedWait()
        self.workers: dict[str, WorkerCpu] = {}  # master: each worker's last reported pair

    def reset(self) -> None:
        self._sched.shares()  # a worker's baseline: its first report covers the test from here
        self.workers = {}

    def take_delta(self) -> dict[str, float] | None:
        shares = self._sched.shares()
        return None if shares is None else {"run": shares[0], "wait": shares[1]}

    def merge_delta(self, delta: object, client_id: str) -> None:
        if not isinstance(delta, dict):
            return  # not what a worker of this version sends: ignored
        run, wait = _share(delta.get("run")), _share(delta.get("wait"))
        if run is None or wait is None:
            return
        self.workers[str(client_id)] = WorkerCpu(str(client_id), run, wait)

    def pairs(self, connected: Iterable[str]) -> tuple[WorkerCpu, ...] | None:
        """The last pair of each worker still connected; None before any reported."""
        pairs = tuple(self.workers[c] for c in map(str, connected) if c in self.workers)
        return pairs or None
