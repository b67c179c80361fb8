"""The local async endpoint's instances and their autoscaling (`serve --async --async-max-instances N`;
docs/async.md, "Scaling on the backlog").

Each instance runs `--async-max-concurrent` workers (MaxConcurrentInvocationsPerInstance); a worker
takes a queued request only while its instance serves, so with no instance in service requests wait
in the queue, as SageMaker queues them for an endpoint scaled to zero. A control thread samples the
backlog (requests queued or being processed) once an emulated second and gives each one-minute
period's average to the pure policies (`scaling.asyncpolicy`): target tracking on
ApproximateBacklogSizePerInstance (`--async-target-backlog`) and/or the step policy on
HasBacklogWithoutCapacity (`--async-scale-from-zero`). A scale-out's instances serve
`--async-instance-start-s` after the decision; a scale-in is immediate (a worker of a removed
instance finishes the request it holds). `--async-time-scale S` runs the control clock S times
faster (requests stay real); every time it reports is emulated. Counters: the instances in service
and desired, the instance-seconds billed, the scale events; each event is printed. `log()` is its
record in the fleet emulation's format (`GET /_sm_locust/scaling`, and DescribeEndpoint's counts:
endpoint/control.py), so `run --watch-scaling` watches it as it watches a real-time fleet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sm_locust.scaling.asyncpolicy import (
    AsyncAutoscaler,
    BacklogPolicy,
    InstanceClock,
    StepFromZero,
    backlog_per_instance,
)
from sm_locust.scaling.policy import DEFAULT_COOLDOWN_S, IN, MAX_INSTANCES, ScaleDecision
from sm_locust.scaling.timeline import MAX_TIME_SCALE, InstanceSample, MetricPeriod

DEFAULT_INSTANCE_START_S = 240.0  # as the real-time fleet's (endpoint/fleet.py): AWS publishes no figure
POLL_S = 0.02  # how often an idle worker of an instance out of service looks again (real seconds)
MAX_LOG = 8192  # instance changes and metric periods kept for the log (the oldest dropped past it)


@dataclass(frozen=True)
class AsyncScalingConfig:
    """The async variant's instances and policies (module doc)."""

    max_instances: int
    instances: int = 1  # in service at the start
    min_instances: int = 0
    target_backlog: float | None = None  # TargetValue of ApproximateBacklogSizePerInstance; None: no target tracking
    scale_from_zero: bool = False
    instance_start_s: float = DEFAULT_INSTANCE_START_S
    time_scale: float = 1.0
    scale_out_cooldown_s: float = DEFAULT_COOLDOWN_S  # the target tracking's, and the step policy's Cooldown
    scale_in_cooldown_s: float = DEFAULT_COOLDOWN_S

    def validate(self) -> AsyncScalingConfig:
        if not 1 <= self.max_instances <= MAX_INSTANCES:
            raise ValueError(f"--async-max-instances must be 1-{MAX_INSTANCES:,}, got {self.max_instances}")
        if not 0 <= self.min_instances <= self.instances <= self.max_instances:
            raise ValueError(f"--async-min-instances ({self.min_instances}) <= --async-instances ({self.instances}) "
                             f"<= --async-max-instances ({self.max_instances}) does not hold")
        if not (0 <= self.instance_start_s < float("inf")):
            raise ValueError(f"--async-instance-start-s must be 0 or more seconds, got {self.instance_start_s:g}")
        if not 0 < self.time_scale <= MAX_TIME_SCALE:
            raise ValueError(f"--async-time-scale must be above 0 and at most {MAX_TIME_SCALE:g}, "
                             f"got {self.time_scale:g}")
        self.policy()  # a policy it cannot run is refused now
        return self

    def policy(self) -> BacklogPolicy | None:
        if self.target_backlog is None:
            return None
        return BacklogPolicy(self.min_instances, self.max_instances, self.target_backlog,
                             scale_out_cooldown_s=self.scale_out_cooldown_s,
                             scale_in_cooldown_s=self.scale_in_cooldown_s).check("--async-target-backlog")

    def autoscaler(self) -> AsyncAutoscaler | None:
        """The policies given (None: a fixed number of instances)."""
        tracking = self.policy()
        from_zero = StepFromZero(self.max_instances, self.scale_out_cooldown_s) if self.scale_from_zero else None
        if tracking is None and from_zero is None:
            return None
        return AsyncAutoscaler(self.instances, tracking, from_zero, self.instance_start_s)

    def flags(self) -> list[str]:
        args = ["--async-max-instances", str(self.max_instances), "--async-instances", str(self.instances),
                "--async-min-instances", str(self.min_instances),
                "--async-instance-start-s", f"{self.instance_start_s:g}", "--async-time-scale", f"{self.time_scale:g}",
                "--async-scale-out-cooldown-s", f"{self.scale_out_cooldown_s:g}",
                "--async-scale-in-cooldown-s", f"{self.scale_in_cooldown_s:g}"]
        if self.target_backlog is not None:
            args += ["--async-target-backlog", f"{self.target_backlog:g}"]
        if self.scale_from_zero:
            args.append("--async-scale-from-zero")
        return args

    def describe(self, max_concurrent: int) -> str:
        policies = [p for p in (
            f"target tracking ApproximateBacklogSizePerInstance = {self.target_backlog:g}"
            if self.target_backlog is not None else "",
            "scale from zero on HasBacklogWithoutCapacity (step +1)" if self.scale_from_zero else "") if p]
        return (f"async instances: {self.instances} of {self.min_instances}-{self.max_instances}, {max_concurrent} "
                f"worker(s) each; {'; '.join(policies) or 'no scaling policy'}; instances serve "
                f"{self.instance_start_s:g} s after a scale-out; time x{self.time_scale:g}")


class AsyncCapacity:
    """The instances in service and the control loop (module doc). `backlog` reads the requests queued
    or being processed; `counters` are the server's shared counters (None in pure tests)."""

    def __init__(self, config: AsyncScalingConfig, backlog: Callable[[], float], counters: Any = None,
                 say: Callable[[str], None] = lambda line: print(line, flush=True),
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        self.config = config
        self.backlog = backlog
        self.counters = counters
        self.say = say
        self.clock = clock
        self.scaler = config.autoscaler()
        self.in_service = config.instances
        self.desired = config.instances
        self.billed = InstanceClock(0.0, config.instances)
        self._pending: list[ScaleDecision] = []
        self._started: float | None = None
        self.started_epoch = wall()  # emulated second 0 on the wall clock (reset when the loop starts)
        self._wall = wall
        self.events: list[InstanceSample] = [InstanceSample(0.0, self.desired, self.in_service)]
        self.periods: list[MetricPeriod] = []
        self._lock = threading.Lock()
        self._publish(0.0)

    def now_s(self) -> float:
        """Emulated seconds since the control loop started."""
        return 0.0 if self._started is None else (self.clock() - self._started) * self.config.time_scale

    def serves(self, instance: int) -> bool:
        """Whether instance number `instance` (from 0) is in service."""
        return instance < self.in_service

    def start(self) -> None:
        with self._lock:
            if self._started is not None:
                return
            self._started = self.clock()
            self.started_epoch = self._wall()
        if self.scaler is not None:
            threading.Thread(target=self._loop, name="async-scaling", daemon=True).start()

    def _loop(self) -> None:
        period = self.scaler.period_s if self.scaler is not None else 60.0
        samples: list[float] = []
        next_sample, period_start = 1.0, 0.0
        while True:
            wait = (next_sample - self.now_s()) / self.config.time_scale
            if wait > 0:
                time.sleep(wait)
            t = self.now_s()
            self._serve_ready(t)
            samples.append(float(self.backlog()))
            next_sample += 1.0
            if t >= period_start + period - 1e-6:
                self.step(period_start, sum(samples) / len(samples))
                samples, period_start = [], period_start + period
            self._publish(t)

    def step(self, period_start: float, backlog: float) -> ScaleDecision | None:
        """One period's average backlog to the policies; the decision applied (pure of threads: tests call it)."""
        if self.scaler is None:
            return None
        self._keep(self.periods, MetricPeriod(period_start, backlog_per_instance(backlog, self.in_service)))
        decision = self.scaler.observe(period_start, backlog, self.in_service)
        if decision is None:
            return None
        self.desired = decision.to_count
        if decision.direction != IN:
            self._keep(self.events, InstanceSample(decision.t_s, self.desired, self.in_service))
        cause = self.scaler.cause
        if decision.direction == IN:
            self._set_in_service(decision.t_s, decision.to_count)
            self.say(f"sm-locust endpoint: async scale in {decision.from_count} -> {decision.to_count} at "
                     f"{decision.t_s:.0f} s ({cause} {decision.metric:.3g})")
        else:
            self._pending.append(decision)
            self.say(f"sm-locust endpoint: async scale out {decision.from_count} -> {decision.to_count} at "
                     f"{decision.t_s:.0f} s ({cause} {decision.metric:.3g}), serving at {decision.ready_s:.0f} s")
        if self.counters is not None:
            self.counters.add(async_scale_events=1)
        return decision

    def _serve_ready(self, t: float) -> None:
        for decision in [d for d in self._pending if d.ready_s <= t + 1e-9]:
            self._pending.remove(decision)
            if decision.to_count > self.in_service:
                self._set_in_service(decision.ready_s, decision.to_count)
                self.say(f"sm-locust endpoint: async {decision.to_count} instance(s) in service at "
                         f"{decision.ready_s:.0f} s")

    def _set_in_service(self, t: float, count: int) -> None:
        self.billed.at(t, count)
        self.in_service = count
        self._keep(self.events, InstanceSample(t, self.desired, count))

    @staticmethod
    def _keep(log: list, item: Any) -> None:
        log.append(item)
        if len(log) > MAX_LOG:
            del log[: len(log) - MAX_LOG]

    def log(self, max_concurrent: int) -> dict[str, Any]:
        """The record `GET /_sm_locust/scaling` answers, in the fleet emulation's format (emulated seconds).
        `policy` is None: the real-time fleet's ScalingPolicy cannot hold MinCapacity 0; `async_policy` says it."""
        config = self.config
        return {
            "fleet": {"instances": config.instances, "slots": max_concurrent, "routing": "queue"},
            "time_scale": config.time_scale,
            "started_at": self.started_epoch,
            "now_s": self.now_s(),
            "instance_start_s": config.instance_start_s,
            "policy": None,
            "async_policy": config.describe(max_concurrent),
            "desired": self.desired,
            "in_service": self.in_service,
            "instances": [s.as_dict() for s in self.events],
            "periods": [p.as_dict() for p in self.periods],
        }

    def _publish(self, t: float) -> None:
        if self.counters is None:
            return
        self.counters.set_value("async_instances", float(self.in_service))
        self.counters.set_value("async_desired_instances", float(self.desired))
        self.counters.set_value("async_instance_seconds_sum", self.billed.total(t))
        self.counters.set_value("async_emulated_s_sum", t)
