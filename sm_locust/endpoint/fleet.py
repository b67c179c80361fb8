"""Local emulation of a real-time variant of several instances that autoscales (`serve --instances N`).

Up to `max_instances` instances, each with `--max-concurrency` slots and its own FIFO queue, routed
`random` or `least-outstanding`, in one shared-memory table made before gunicorn forks, so all
workers see the same instances. With a policy, the gunicorn master runs target tracking
(`fleet_control.FleetController`); a new instance serves `--instance-start-s` after the decision, a
scale-in is immediate. `--time-scale S` speeds the control clock only: requests stay real, and every
time the emulation reports is emulated. `SharedFleet` and `FleetRouter` take a clock and a sleep
(docs/autoscaling.md; facts: docs/facts.md, "Autoscaling").
"""

from __future__ import annotations

import math
import multiprocessing
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from sm_locust.errors import UsageError
from sm_locust.scaling.policy import MAX_INSTANCES, ScalingPolicy
from sm_locust.scaling.timeline import MAX_TIME_SCALE, InstanceSample, MetricPeriod
from sm_locust.util.registry import Registry

DEFAULT_INSTANCE_START_S = 240.0  # the example: AWS publishes no figure (docs/facts.md)
EVENT_CAPACITY = 4096  # instance-count changes kept in the shared log
PERIOD_CAPACITY = 8192  # metric datapoints kept in the shared log
NOT_SERVING = math.inf  # ready_at of an instance that is not provisioned (never started, or removed)
MAX_WAIT_S = 0.05  # a queued request looks at its instance's queue at least this often

# the `sm-locust serve` flag of each policy setting, for the policy's one-line errors
POLICY_FLAGS = {"min_instances": "--min-instances", "max_instances": "--max-instances",
                "target_value": "--target-value", "metric": "--scaling-metric",
                "scale_out_cooldown_s": "--scale-out-cooldown-s", "scale_in_cooldown_s": "--scale-in-cooldown-s"}

ROUTINGS: Registry[str] = Registry("routing strategy")
ROUTINGS.add("random", "random", "RANDOM")
ROUTINGS.add("least-outstanding", "least-outstanding", "LEAST_OUTSTANDING_REQUESTS", "least_outstanding_requests")


@dataclass
class FleetConfig:
    """`sm-locust serve --instances N` and its autoscaling flags (the slots are `--max-concurrency`)."""

    instances: int = 1
    """Instances serving when the endpoint starts."""
    policy: ScalingPolicy | None = None
    """The target-tracking policy (min/max instances, metric, target, cooldowns); None: a fixed fleet."""
    instance_start_s: float = DEFAULT_INSTANCE_START_S
    """Emulated seconds from a scale-out decision until its instances serve."""
    time_scale: float = 1.0
    """Emulated seconds per real second (the control loop, its periods and the instance starts)."""
    routing: str = "random"
    """How requests are spread over the instances in service: random or least-outstanding."""

    def validate(self) -> FleetConfig:
        if isinstance(self.instances, bool) or not isinstance(self.instances, int) or self.instances < 1:
            raise UsageError(f"--instances must be a whole number of instances, at least 1, got {self.instances!r}")
        if self.instances > MAX_INSTANCES:
            raise UsageError(f"--instances must be at most {MAX_INSTANCES:,} instances, got {self.instances:,}")
        if not (math.isfinite(self.instance_start_s) and self.instance_start_s >= 0):
            raise UsageError(f"--instance-start-s must be 0 or more seconds, got {self.instance_start_s:g}")
        if not (math.isfinite(self.time_scale) and 0 < self.time_scale <= MAX_TIME_SCALE):
            raise UsageError(f"--time-scale must be a number above 0 and at most {MAX_TIME_SCALE:g} (emulated seconds "
                             f"per real second), got {self.time_scale:g}")
        self.routing = ROUTINGS.canonical(self.routing)
        if self.policy is not None:
            self.policy = self.policy.check(POLICY_FLAGS)
        return self

    @property
    def capacity(self) -> int:
        """Instances the shared table holds: the most the fleet can grow to."""
        return max(self.instances, self.policy.max_instances if self.policy else 0)

    def flags(self) -> list[str]:
        """The `sm-locust serve` flags that give this fleet (LocalEndpoint's command line)."""
        args = ["--instances", str(self.instances)]
        defaults = {f.name: f.default for f in fields(self)}
        for name in ("instance_start_s", "time_scale", "routing"):
            if getattr(self, name) != defaults[name]:
                value = getattr(self, name)
                args += [f"--{name.replace('_', '-')}", value if isinstance(value, str) else f"{value:g}"]
        policy = self.policy
        if policy is not None:
            for key, flag in POLICY_FLAGS.items():
                value = getattr(policy, key)
                args += [flag, value if isinstance(value, str) else f"{value:g}"]
        return args

    def describe(self, service_time_ms: float, slots: int) -> str:
        """One line for `sm-locust serve`: what the variant is and what scales it."""
        each = f"{slots} slots each" if slots else "no slot limit"
        if slots and service_time_ms:
            each += f" (~{slots / (service_time_ms / 1000):.0f} req/s)"
        plural = "s" if self.instances != 1 else ""
        text = f"fleet emulation: {self.instances} instance{plural}, {each}, {self.routing} routing"
        if self.policy is not None:
            text += (f"; {self.policy.describe()}; a new instance serves after {self.instance_start_s:g} s")
        if self.time_scale != 1:
            text += f"; time runs x{self.time_scale:g} (emulated seconds)"
        return text


# ------------------------------------------------------------------------------------------ pure


def choose_instance(serving: Sequence[int], outstanding: Sequence[float], routing: str, rng: random.Random) -> int:
    """The instance a new request goes to: one of `serving` (indexes), at random or the least busy."""
    if routing == "least-outstanding":
        fewest = min(outstanding[i] for i in serving)
        return rng.choice([i for i in serving if outstanding[i] == fewest])
    return rng.choice(list(serving))


def queue_wait_s(ahead: float, service_s: float, slots: int) -> float:
    """How long a queued request sleeps before looking again: 1 ms when it is next (a slot frees at any
    moment; a longer nap would leave the slot idle and lower the instance's capacity), else about half
    the time the `ahead` requests in front of it need to clear `slots` slots, at most MAX_WAIT_S."""
    if ahead <= 1:
        return 0.001
    return max(0.001, min(MAX_WAIT_S, 0.5 * ahead * service_s / max(1, slots)))


# ------------------------------------------------------------------------------------ shared state

# header fields of the shared table, then per instance (ready_at, issued, done), then the logs
_HEADER = ("start", "started_epoch", "desired", "arrivals", "weight", "events", "periods")
_H = {name: i for i, name in enumerate(_HEADER)}


class SharedFleet:
    """The instances' state in shared memory, made before gunicorn forks: every worker routes to
    and queues at the same instances; the master's controller scales them and keeps the log.

    Per instance: `ready_at` (the emulated second it serves from; inf when not provisioned),
    `issued` (requests routed to it) and `done` (finished): outstanding = issued - done, and a
    request holding ticket n may run once fewer than `slots` earlier tickets are unfinished.
    """

    def __init__(self, config: FleetConfig, slots: int, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self.config = config
        self.slots = slots
        self.clock = clock
        self.wall = wall
        self.size = config.capacity
        self._base = len(_HEADER)
        self._events_at = self._base + 3 * self.size
        self._periods_at = self._events_at + 3 * EVENT_CAPACITY
        total = self._periods_at + 2 * PERIOD_CAPACITY
        self._array = multiprocessing.get_context("fork").Array("d", total, lock=True)
        self.reset()

    # -- clock ------------------------------------------------------------------------------
    def reset(self) -> None:
        """Emulated second 0 is now; the initial instances serve; the log starts over."""
        a = self._array
        with a.get_lock():
            for i in range(len(a)):
                a[i] = 0.0
            a[_H["start"]] = self.clock()
            a[_H["started_epoch"]] = self.wall()
            a[_H["desired"]] = self.config.instances
            for i in range(self.size):
                a[self._base + 3 * i] = 0.0 if i < self.config.instances else NOT_SERVING
        self.log_event(InstanceSample(0.0, self.config.instances, self.config.instances))

    def now_s(self) -> float:
        """Emulated seconds since the start."""
        return (self.clock() - self._array[_H["start"]]) * self.config.time_scale

    @property
    def started_epoch(self) -> float:
        return self._array[_H["started_epoch"]]

    # -- instances ----------------------------------------------------------------------------
    def _ready(self, i: int) -> float:
        return self._array[self._base + 3 * i]

    def serving(self, now_s: float) -> list[int]:
        """Indexes of the instances in service at emulated second `now_s`."""
        return [i for i in range(self.size) if self._ready(i) <= now_s + 1e-9]

    def desired(self) -> int:
        return int(self._array[_H["desired"]])

    def counts(self, now_s: float) -> tuple[int, int]:
        """(desired, in service) at `now_s`."""
        return self.desired(), len(self.serving(now_s))

    def outstanding(self) -> list[float]:
        a = self._array
        with a.get_lock():
            return [a[self._base + 3 * i + 1] - a[self._base + 3 * i + 2] for i in range(self.size)]

    def in_flight(self) -> float:
        return sum(self.outstanding())

    def arrivals(self) -> tuple[float, float]:
        """(requests received, sum of 1 / instances in service at each arrival), cumulative."""
        a = self._array
        with a.get_lock():
            return a[_H["arrivals"]], a[_H["weight"]]

    def set_desired(self, desired: int, ready_at: float) -> None:
        """Scale to `desired` instances: new ones serve from emulated second `ready_at`; a scale-in
        removes the most recently started instances at once."""
        a = self._array
        with a.get_lock():
            provisioned = [i for i in range(self.size) if a[self._base + 3 * i] != NOT_SERVING]
            if desired > len(provisioned):
                free = [i for i in range(self.size) if a[self._base + 3 * i] == NOT_SERVING]
                for i in free[: desired - len(provisioned)]:
                    a[self._base + 3 * i] = ready_at
            else:
                newest = sorted(provisioned, key=lambda i: (a[self._base + 3 * i], i), reverse=True)
                for i in newest[: len(provisioned) - desired]:
                    a[self._base + 3 * i] = NOT_SERVING
            a[_H["desired"]] = desired

    # -- one request ---------------------------------------------------------------------------
    def admit(self, rng: random.Random) -> tuple[int, float]:
        """Route an arriving request: (instance, its ticket). Counts it for the metrics (1 / in service)."""
        a = self._array
        now = self.now_s()
        with a.get_lock():
            serving = [i for i in range(self.size) if a[self._base + 3 * i] <= now + 1e-9]
            if not serving:  # cannot happen with at least one instance; serve on the first rather than fail
                serving = [0]
            outstanding = [a[self._base + 3 * i + 1] - a[self._base + 3 * i + 2] for i in range(self.size)]
            instance = choose_instance(serving, outstanding, self.config.routing, rng)
            ticket = a[self._base + 3 * instance + 1]
            a[self._base + 3 * instance + 1] = ticket + 1
            a[_H["arrivals"]] += 1
            a[_H["weight"]] += 1.0 / len(serving)
        return instance, ticket

    def ahead(self, instance: int, ticket: float) -> float:
        """Unfinished requests before `ticket` at `instance` beyond its slots (> 0: keep waiting)."""
        done = self._array[self._base + 3 * instance + 2]
        return ticket - done - self.slots + 1

    def finish(self, instance: int) -> None:
        a = self._array
        with a.get_lock():
            a[self._base + 3 * instance + 2] += 1

    # -- the log ---------------------------------------------------------------------------------
    def log_event(self, sample: InstanceSample) -> None:
        self._append(_H["events"], self._events_at, EVENT_CAPACITY, (sample.t_s, sample.desired, sample.in_service))

    def log_period(self, period: MetricPeriod) -> None:
        value = math.nan if period.value is None else period.value
        self._append(_H["periods"], self._periods_at, PERIOD_CAPACITY, (period.t_s, value))

    def _append(self, counter: int, at: int, capacity: int, values: tuple) -> None:
        a = self._array
        with a.get_lock():
            n = int(a[counter])
            slot = at + len(values) * (n % capacity)
            for k, v in enumerate(values):
                a[slot + k] = v
            a[counter] = n + 1

    def events(self) -> list[InstanceSample]:
        rows = self._read(_H["events"], self._events_at, EVENT_CAPACITY, 3)
        return [InstanceSample(t, int(d), int(s)) for t, d, s in rows]

    def periods(self) -> list[MetricPeriod]:
        rows = self._read(_H["periods"], self._periods_at, PERIOD_CAPACITY, 2)
        return [MetricPeriod(t, None if math.isnan(v) else v) for t, v in rows]

    def _read(self, counter: int, at: int, capacity: int, width: int) -> list[tuple]:
        a = self._array
        with a.get_lock():
            n = int(a[counter])
            first = max(0, n - capacity)
            return [tuple(a[at + width * (k % capacity) + j] for j in range(width)) for k in range(first, n)]


class FleetRouter:
    """A worker's side: route each invocation to an instance, queue for its slots, run it, free it."""

    def __init__(self, fleet: SharedFleet, service_s: float, seed: int | None = None,
                 sleep: Callable[[float], None] | None = None):
        self.fleet = fleet
        self.service_s = service_s
        self.rng = random.Random(seed)
        # time.sleep looked up when called: gunicorn's gevent worker patches it after this module is imported
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))

    def serve(self, answer: Callable[[], object]) -> object:
        instance, ticket = self.fleet.admit(self.rng)
        try:
            if self.fleet.slots:
                while (ahead := self.fleet.ahead(instance, ticket)) > 0:
                    self.sleep(queue_wait_s(ahead, self.service_s, self.fleet.slots))
            return answer()
        finally:
            self.fleet.finish(instance)


def shared_fleet(config: object) -> SharedFleet | None:
    """The table `serve_forever` makes before the fork when `config.fleet` is set, else None."""
    fleet = getattr(config, "fleet", None)
    return SharedFleet(fleet, int(getattr(config, "max_concurrency", 0) or 0)) if fleet is not None else None


def router_for(config: object, fleet: SharedFleet | None) -> FleetRouter | None:
    """What an endpoint worker runs when the fleet emulation is on, else None."""
    if fleet is None:
        return None
    service_s = float(getattr(config, "service_time_ms", 0.0) or 0.0) / 1000.0
    return FleetRouter(fleet, service_s, getattr(config, "seed", None))
