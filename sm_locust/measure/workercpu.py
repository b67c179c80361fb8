"""Each Locust worker's own CPU pair on a master: the share of an interval it ran and waited for a CPU.

The starved-generator rule (`looplag.starved_reason`) compares a generator's wait with its own run:
on a master the pair must be ONE worker's (a busy worker's CPU beside another's wait judges neither).
Each worker ships both shares from one source over one interval (`record.schedwait`); `judged` picks
the worker a second or a step is judged on: a worker whose own pair meets the starved rule (the one
that waited most), else the one that ran and waited most (the CPU and busy rules' worker: a worker
at `CLIENT_CPU_LIMIT_PCT` ran and waited at least as much). `window_pair` averages each worker over
a step's seconds first, so the step's `client_cpu_pct` / `client_wait_pct` are that worker's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sm_locust.measure.looplag import starved_reason


@dataclass(frozen=True)
class WorkerCpu:
    """One worker's CPU share and CPU-wait share (%) over the same interval; `cpu_pct` None when unknown."""

    worker: str
    cpu_pct: float | None
    wait_pct: float | None

    @property
    def busy_pct(self) -> float:
        """Ran or waited for a CPU: what the busy rule adds up."""
        return (self.cpu_pct or 0.0) + (self.wait_pct or 0.0)


def judged(workers: Iterable[WorkerCpu]) -> WorkerCpu | None:
    """The worker a second or a step is judged on (module doc); None when there is none."""
    pairs = list(workers)
    starved = [w for w in pairs if starved_reason(w.cpu_pct, w.wait_pct) is not None]
    if starved:
        return max(starved, key=lambda w: (w.wait_pct or 0.0, w.worker))
    return max(pairs, key=lambda w: (w.busy_pct, w.worker), default=None)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def window_pair(seconds: Iterable[Iterable[WorkerCpu]]) -> tuple[WorkerCpu, float | None] | None:
    """The worker a window of seconds is judged on, each worker averaged over the seconds that carried
    it, and that worker's largest CPU share in one second; None when no second carried a worker."""
    cpus: dict[str, list[float]] = {}
    waits: dict[str, list[float]] = {}
    for second in seconds:
        for w in second:
            cpus.setdefault(w.worker, [])
            waits.setdefault(w.worker, [])
            if w.cpu_pct is not None:
                cpus[w.worker].append(w.cpu_pct)
            if w.wait_pct is not None:
                waits[w.worker].append(w.wait_pct)
    chosen = judged(WorkerCpu(worker, _mean(cpus[worker]), _mean(waits[worker])) for worker in cpus)
    if chosen is None:
        return None
    return chosen, max(cpus[chosen.worker], default=None)


def workers_json(workers: Iterable[WorkerCpu]) -> dict[str, list[float | None]]:
    """timeline.jsonl's `client_workers`: {worker: [cpu %, wait %]}."""
    return {w.worker: [w.cpu_pct, w.wait_pct] for w in workers}


def workers_from_json(data: Mapping[str, Any] | None) -> tuple[WorkerCpu, ...] | None:
    """`workers_json` read back; entries not of that form are left out."""
    if not isinstance(data, Mapping):
        return None

    def share(value: object) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return tuple(WorkerCpu(str(worker), share(pair[0]), share(pair[1])) for worker, pair in data.items()
                 if isinstance(pair, (list, tuple)) and len(pair) == 2)
