"""The load generator's own delay, measured on every Locust process: event-loop lag and CPU throttling.

`LoopLagMonitor` arms a repeating gevent timer on each process (local runner, master, workers) while
a test runs: every `SAMPLE_INTERVAL_S` its callback records how late it woke (`measure.looplag.LagCounts`). A loop
held up by other greenlets' work, by the OS giving the CPU to other processes, or by a cgroup CPU
quota wakes late by as long as every response in flight waited to be read. Beside it, where the
host has a cgroup CPU limit, `CgroupThrottling` reads the cgroup's `cpu.stat` (v2 `nr_periods`,
`nr_throttled`, `throttled_usec`; v1 `throttled_time` in ns) as deltas.

Where the figures go: a local runner's recorder takes this process's counts once a second into its
`Second`; workers ship theirs to the master with Locust's worker reports (`util.shipped`), where
the master's recorder takes the workers' merged counts into its seconds and keeps each worker's
own for summary.json (`loop_lag.processes`: every worker's figures and its share of the lag). The
master's own lag is shown there too, but judges nothing: the workers measure the latency.

Cost: one timer wake-up per interval, a clock read and a dict update: about 0.6 % of a core at 10 ms (1 % at 5 ms) on
the 2-core development machine (bench/looplag_cost.py; docs/facts.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
from locust.runners import MasterRunner, WorkerRunner

from sm_locust.measure.looplag import LagCounts, LoopLag, merge_counts
from sm_locust.util.shipped import WorkerShipped

SAMPLE_INTERVAL_S = 0.010  # 10 ms: 100 samples a second, about 0.6 % of a core (bench/looplag_cost.py)
REPORT_KEY = "sm_locust_loop_lag"
MASTER = "master"


@dataclass(frozen=True)
class CpuStat:
    """The throttling counters of one cgroup `cpu.stat` reading (cumulative)."""

    periods: int
    throttled: int
    throttled_us: float


def parse_cpu_stat(text: str) -> CpuStat | None:
    """A cgroup `cpu.stat` file's throttling counters; None when it has none (no CPU limit
    controller: a v2 root cgroup lists only usage)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            fields[parts[0]] = int(parts[1])
    if "nr_periods" not in fields or "nr_throttled" not in fields:
        return None
    if "throttled_usec" in fields:  # cgroup v2
        throttled_us = float(fields["throttled_usec"])
    elif "throttled_time" in fields:  # cgroup v1: nanoseconds
        throttled_us = fields["throttled_time"] / 1000.0
    else:
        return None
    return CpuStat(fields["nr_periods"], fields["nr_throttled"], throttled_us)


def cpu_stat_paths(proc_cgroup: str, root: Path = Path("/sys/fs/cgroup")) -> list[Path]:
    """Where this process's cgroup `cpu.stat` may be, from /proc/self/cgroup's lines, most specific
    first: v2 (`0::/path`), v1 (`N:cpu,cpuacct:/path`), then the mount's own (a container's view)."""
    paths: list[Path] = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, where = parts
        relative = where.strip().lstrip("/")
        if controllers == "":
            paths.append(root / relative / "cpu.stat")
        elif "cpu" in controllers.split(","):
            for mount in (controllers, "cpu", "cpu,cpuacct"):
                paths.append(root / mount / relative / "cpu.stat")
    paths += [root / "cpu.stat", root / "cpu" / "cpu.stat", root / "cpu,cpuacct" / "cpu.stat"]
    unique: list[Path] = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


class CgroupThrottling:
    """This process's cgroup CPU throttling as deltas between two `take()`s; nothing where the host
    has no cgroup CPU controller (not Linux, no limit controller)."""

    def __init__(self, paths: list[Path] | None = None) -> None:
        self._path: Path | None = None
        self._last: CpuStat | None = None
        if paths is None:
            try:
                paths = cpu_stat_paths(Path("/proc/self/cgroup").read_text(encoding="ascii", errors="replace"))
            except OSError:
                paths = []
        for path in paths:
            stat = self._read(path)
            if stat is not None:
                self._path, self._last = path, stat
                break

    @staticmethod
    def _read(path: Path) -> CpuStat | None:
        try:
            return parse_cpu_stat(path.read_text(encoding="ascii", errors="replace"))
        except OSError:
            return None

    @property
    def available(self) -> bool:
        return self._path is not None

    def take(self) -> CpuStat | None:
        """The periods, throttled periods and throttled time since the last take (None: not there)."""
        if self._path is None or self._last is None:
            return None
        now = self._read(self._path)
        if now is None:
            return None
        last, self._last = self._last, now
        return CpuStat(max(0, now.periods - last.periods), max(0, now.throttled - last.throttled),
                       max(0.0, now.throttled_us - last.throttled_us))


class LoopLagMonitor(WorkerShipped):
    """This process's loop lag (and, on a master, its workers'): see the module docstring."""

    ATTRIBUTE = "sm_locust_loop_lag"
    REPORT_KEY = REPORT_KEY

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S, throttling: CgroupThrottling | None = None) -> None:
        self.interval_s = interval_s
        self._throttling = throttling
        self._timer: Any = None
        self._last_wake = 0.0
        self._environment: Any = None
        self._clear()

    def _clear(self) -> None:
        self._fresh = LagCounts()  # the sampler's, not yet folded into the three below
        self._own = LagCounts()  # this process over the test
        self._pending = LagCounts()  # what the next recorded second carries (own, or on a master the workers')
        self._unshipped = LagCounts()  # a worker's, not yet sent to the master
        self.workers: dict[str, LagCounts] = {}  # master: each worker's over the test

    # -- WorkerShipped ---------------------------------------------------------------------------
    def listen(self, environment: Any) -> None:
        self._environment = environment
        environment.events.test_stop.add_listener(self._on_test_stop)
        environment.events.quitting.add_listener(self._on_test_stop)

    def reset(self) -> None:
        self.stop()
        if self._throttling is None:
            self._throttling = CgroupThrottling()
        self._throttling.take()  # the baseline
        self._clear()
        self.start()

    def take_delta(self) -> dict | None:
        self._fold()
        self._add_throttling()
        delta = self._unshipped.take()
        return delta.to_json() if delta else None

    def merge_delta(self, delta: object, client_id: str) -> None:
        if not isinstance(delta, Mapping):
            return
        try:
            counts = LagCounts.from_json(delta)
        except (TypeError, ValueError, AttributeError):  # not what a worker of this version sends: ignored
            return
        self._pending.merge(counts)
        self.workers.setdefault(str(client_id), LagCounts()).merge(counts)

    # -- sampling --------------------------------------------------------------------------------
    def start(self) -> None:
        """Arm the repeating timer on this thread's gevent loop (no greenlet: its callback runs in the
        hub, the cheapest wake-up gevent has)."""
        if self._timer is None:
            loop = gevent.get_hub().loop
            loop.update_now()
            self._timer = loop.timer(self.interval_s, self.interval_s, ref=False)  # never keeps a loop alive
            self._last_wake = time.perf_counter()
            self._timer.start(self._wake)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
            self._timer = None

    def _on_test_stop(self, **_kw: object) -> None:
        self.stop()

    def _wake(self) -> None:
        """The timer fired: the time since the last wake-up beyond the interval is this wake-up's lag."""
        now = time.perf_counter()
        slept, self._last_wake = now - self._last_wake, now
        self._fresh.add_sample(slept * 1e6, max(0.0, slept - self.interval_s) * 1e6)

    def _is_master(self) -> bool:
        return isinstance(getattr(self._environment, "runner", None), MasterRunner)

    def _is_worker(self) -> bool:
        return isinstance(getattr(self._environment, "runner", None), WorkerRunner)

    def _fold(self) -> None:
        """The sampler's new readings into this process's total and into what goes next."""
        fresh = self._fresh.take()
        if not fresh:
            return
        self._own.merge(fresh)
        if self._is_worker():
            self._unshipped.merge(fresh)
        elif not self._is_master():
            self._pending.merge(fresh)

    def _add_throttling(self) -> None:
        stat = self._throttling.take() if self._throttling is not None else None
        if stat is None or stat.periods == 0:  # no CFS period elapsed: no quota, or none since the last take
            return
        self._own.add_throttling(stat.periods, stat.throttled, stat.throttled_us)
        if self._is_worker():
            self._unshipped.add_throttling(stat.periods, stat.throttled, stat.throttled_us)
        elif not self._is_master():
            self._pending.add_throttling(stat.periods, stat.throttled, stat.throttled_us)

    # -- what the recorder reads -----------------------------------------------------------------
    def take_second(self) -> LagCounts | None:
        """What the second just recorded carries: this process's readings (a master: the workers'
        that arrived); None when nothing was sampled (the sampler not running)."""
        self._fold()
        self._add_throttling()
        taken = self._pending.take()
        return taken if taken else None

    def figures(self) -> dict | None:
        """summary.json's loop-lag figures: `totals` (the load generator: this process, or every worker
        merged on a master) and, on a master, `processes` (its own and each worker's, with the
        worker's share of the workers' lag). None when nothing was sampled."""
        self._fold()
        if not self._is_master():
            return {"totals": LoopLag.of(self._own).to_json(), "processes": None} if self._own else None
        merged = merge_counts(self.workers.values())
        total_lag = merged.lag_us if merged is not None else 0.0
        processes: dict[str, dict] = {MASTER: LoopLag.of(self._own).to_json()} if self._own else {}
        for worker_id, counts in sorted(self.workers.items()):
            processes[worker_id] = {**LoopLag.of(counts).to_json(),
                                    "share": round(counts.lag_us / total_lag, 4) if total_lag > 0 else None}
        if merged is None and not processes:
            return None
        return {"totals": LoopLag.of(merged).to_json() if merged is not None else None, "processes": processes}
