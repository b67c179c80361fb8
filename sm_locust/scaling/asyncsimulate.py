"""The async autoscaling policies' answer for a given arrival series, offline (pure, deterministic).

A FIFO queue in front of `workers` per instance in service, each request holding a worker for
`service_s`; the backlog (queued or being processed) sampled at the end of each second and averaged
per one-minute period for `scaling.asyncpolicy.AsyncAutoscaler`, whose scale-outs serve after its
activity (the instance start) and whose scale-ins remove idle capacity at once (a busy worker
finishes its request). What comes out is what a policy comparison needs: each request's time to
result (None: not answered by `until_s`), the first request's (the cold start from zero when the
fleet starts empty), the instance-seconds in service and the decisions. docs/async.md, "Scaling on
the backlog", compares the two policies with it beside the local endpoint's measurement.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from sm_locust.scaling.asyncpolicy import AsyncAutoscaler, InstanceClock
from sm_locust.scaling.policy import OUT, ScaleDecision


@dataclass(frozen=True)
class AsyncSimulation:
    """What the policies did to the arrivals (module doc); times in seconds."""

    times_to_result: tuple[float | None, ...]  # per arrival, in arrival order
    instance_seconds: float
    decisions: tuple[ScaleDecision, ...]
    backlog_max: int

    @property
    def first_time_to_result_s(self) -> float | None:
        return self.times_to_result[0] if self.times_to_result else None

    @property
    def answered(self) -> int:
        return sum(1 for t in self.times_to_result if t is not None)

    def percentile_s(self, pct: float) -> float | None:
        """The `pct` percentile of the times to result, an unanswered request counted as never (None
        when the percentile falls among them)."""
        n = len(self.times_to_result)
        if not n:
            return None
        ordered = sorted(self.times_to_result, key=lambda t: math.inf if t is None else t)
        value = ordered[min(n - 1, max(0, math.ceil(pct / 100.0 * n) - 1))]
        return value


def simulate_async(arrivals_s: Sequence[float], scaler: AsyncAutoscaler, *, service_s: float, workers: int,
                   until_s: float) -> AsyncSimulation:
    """Run `arrivals_s` (sorted, seconds from 0) through the queue and `scaler` up to `until_s`."""
    arrivals = sorted(float(a) for a in arrivals_s)
    done_at: list[float | None] = [None] * len(arrivals)
    queue: deque[int] = deque()
    running: list[tuple[float, int]] = []  # (ends, request)
    in_service = scaler.desired
    pending: list[ScaleDecision] = []
    clock = InstanceClock(0.0, in_service)
    samples: list[float] = []
    period = scaler.period_s
    next_arrival, period_start, backlog_max = 0, 0.0, 0
    second = 0
    while second < until_s:
        end = float(second + 1)
        t = float(second)
        while True:  # the events of [t, end), in time order
            candidates = []
            if next_arrival < len(arrivals) and arrivals[next_arrival] < end:
                candidates.append(arrivals[next_arrival])
            if running and running[0][0] < end:
                candidates.append(running[0][0])
            if not candidates:
                break
            t = min(candidates)
            while running and running[0][0] <= t:
                ends, request = heapq.heappop(running)
                done_at[request] = ends
            while next_arrival < len(arrivals) and arrivals[next_arrival] <= t:
                queue.append(next_arrival)
                next_arrival += 1
            while queue and len(running) < in_service * workers:
                request = queue.popleft()
                heapq.heappush(running, (max(t, arrivals[request]) + service_s, request))
        backlog = len(queue) + len(running)
        backlog_max = max(backlog_max, backlog)
        samples.append(float(backlog))
        if end >= period_start + period - 1e-9:
            decision = scaler.observe(period_start, sum(samples) / len(samples), in_service)
            samples, period_start = [], period_start + period
            if decision is not None:
                if decision.direction == OUT:
                    pending.append(decision)
                else:
                    in_service = decision.to_count
                    clock.at(decision.t_s, in_service)
        for decision in [d for d in pending if d.ready_s <= end + 1e-9]:
            pending.remove(decision)
            if decision.to_count > in_service:
                in_service = decision.to_count
                clock.at(decision.ready_s, in_service)
        while queue and len(running) < in_service * workers:  # new capacity takes the queue at once
            request = queue.popleft()
            heapq.heappush(running, (end + service_s, request))
        second += 1
    times = tuple(None if d is None or d > until_s else d - a for a, d in zip(arrivals, done_at, strict=True))
    return AsyncSimulation(times, clock.total(until_s), tuple(scaler.decisions), backlog_max)
