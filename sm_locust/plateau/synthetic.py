"""A closed-form endpoint model that produces `Second`s, to exercise the searches without Locust.

`concurrency` slots of `service_ms` each give capacity C; closed-loop `users` with `overhead_ms`
outside the slot get min(users / (service + overhead), C), latency by Little's law. `contention_ms`
grows each cycle per other user, `smoothness` k bends the corner (linear / (1 + (linear / C)^k)^(1/k)),
open loop completes min(rate, C). Optional noise, errors and client CPU build the awkward cases.
Deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from sm_locust.measure.steady import MODE_RATE, MODE_USERS, StepMeasurement
from sm_locust.measure.timeline import Second

# Shape of the per-second latency distribution around its centre (fraction of requests, factor).
LATENCY_SHAPE: tuple[tuple[float, float], ...] = ((0.5, 0.9), (0.3, 1.0), (0.15, 1.3), (0.04, 1.8), (0.01, 3.0))


def locust_bucket(ms: float) -> int:
    """Round a response time the way Locust buckets it (~2 significant digits)."""
    if ms < 100:
        return int(round(ms))
    if ms < 1000:
        return int(round(ms, -1))
    if ms < 10000:
        return int(round(ms, -2))
    return int(round(ms, -3))


@dataclass
class SyntheticEndpoint:
    concurrency: int = 8
    service_ms: float = 40.0
    noise: float = 0.0  # +- relative noise on each second's throughput
    seed: int = 1
    error_rate: Callable[[float], float] = field(default=lambda load: 0.0)  # load -> failure fraction
    client_cpu: Callable[[float], float | None] = field(default=lambda rps: None)  # rps -> client CPU %
    clock: float = 1_700_000_000.0
    overhead_ms: float = 0.0  # per request, outside the slot: the unqueued cycle is service + overhead
    smoothness: float | None = None  # None: a sharp knee; k: a bend that starts below it (smaller k, softer)
    contention_ms: float = 0.0  # added to the cycle per other user

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def capacity(self) -> float:
        return self.concurrency / (self.service_ms / 1000.0)

    def knee_users(self) -> float:
        """Where the bounds meet: capacity x unqueued cycle (the slot count without overhead)."""
        return self.capacity * (self.service_ms + self.overhead_ms) / 1000.0

    def throughput(self, users: float) -> float:
        """Closed-loop throughput at `users` (no noise)."""
        cycle_ms = self.service_ms + self.overhead_ms + self.contention_ms * max(0.0, users - 1)
        linear = users / (cycle_ms / 1000.0)
        if self.smoothness is None:
            return min(linear, self.capacity)
        k = self.smoothness
        return linear / (1.0 + (linear / self.capacity) ** k) ** (1.0 / k)

    def _seconds(self, load: float, rps: float, latency_ms: float, seconds: int, users: int,
                 target_rate: float | None) -> list[Second]:
        out = []
        for _ in range(seconds):
            jitter = 1.0 + (self._rng.uniform(-self.noise, self.noise) if self.noise else 0.0)
            count = max(0, int(round(rps * jitter)))
            hist: dict[int, int] = {}
            left = count
            for share, factor in LATENCY_SHAPE:
                n = min(left, int(round(count * share)))
                if n:
                    bucket = locust_bucket(latency_ms * factor)
                    hist[bucket] = hist.get(bucket, 0) + n
                    left -= n
            if left:
                bucket = locust_bucket(latency_ms)
                hist[bucket] = hist.get(bucket, 0) + left
            self.clock += 1.0
            out.append(Second(
                t=self.clock, users=users, spawning=False, requests=count,
                failures=int(round(count * self.error_rate(load))), hist=hist,
                client_cpu_pct=self.client_cpu(rps), target_rate=target_rate,
            ))
        return out

    def users_step(self, users: int, seconds: int = 30, ramp_s: int = 1) -> list[Second]:
        """`seconds` of `users` closed-loop users, preceded by `ramp_s` spawning seconds."""
        rps = self.throughput(users)
        latency = users / rps * 1000.0  # Little's law over the whole cycle
        ramp = [Second(t=self.clock + i + 1, users=users, spawning=True, requests=0, failures=0)
                for i in range(ramp_s)]
        self.clock += ramp_s
        return ramp + self._seconds(users, rps, latency, seconds, users, None)

    def rate_step(self, rate: float, seconds: int = 30, users: int = 100,
                  generator_limit: float | None = None) -> list[Second]:
        """`seconds` of an open-loop offer of `rate` req/s (the generator can send at most `generator_limit`)."""
        offered = min(rate, generator_limit) if generator_limit else rate
        rps = min(offered, self.capacity)
        utilisation = min(offered / self.capacity, 0.99)
        latency = self.service_ms / (1.0 - utilisation) if offered < self.capacity else self.service_ms * 20
        return self._seconds(rate, rps, latency, seconds, users, rate)


def synthetic_step(
    load: float,
    rps: float,
    *,
    p50_ms: float = 10.0,
    p95_ms: float = 20.0,
    p99_ms: float | None = None,
    error_rate: float = 0.0,
    duration_s: float = 20.0,
    mode: str = MODE_USERS,
    client_cpu_pct: float | None = None,
    intended_rps: float | None = None,
    sent_rps: float | None = None,
    stable: bool = True,
    t_start: float = 0.0,
) -> StepMeasurement:
    """A ready-made `StepMeasurement` with the given figures (for series like [100, 200, 400, ...])."""
    requests = int(round(rps * duration_s))
    p99 = p99_ms if p99_ms is not None else p95_ms * 1.5
    return StepMeasurement(
        load=float(load), rps=float(rps), requests=requests, failures=int(round(requests * error_rate)),
        duration_s=duration_s, mode=mode, users=int(load) if mode == MODE_USERS else 0, stable=stable,
        unstable_reason=None if stable else "synthetic: marked unstable",
        client_cpu_pct=client_cpu_pct, client_cpu_max=client_cpu_pct,
        intended_rps=intended_rps if intended_rps is not None else (float(load) if mode == MODE_RATE else None),
        sent_rps=sent_rps, total_requests=requests, t_start=t_start, t_end=t_start + duration_s,
        percentiles={50.0: p50_ms, 90.0: p95_ms, 95.0: p95_ms, 99.0: p99, 99.9: p99},
    )
