"""Open-loop load in Locust terms: send at a target arrival rate, whatever the response times.

`OpenLoopUser` is a rate token: each running user adds `--rate-per-user` req/s to its process's
arrival stream and only sleeps, so Locust's dispatcher, web UI and shapes work unchanged. One
`OpenLoopScheduler` per process turns the rate into intended send times (`--arrival constant` or
`poisson`) and hands each invocation to a pool of `--max-in-flight` greenlets; response time runs
from the intended send time. Every intended send is counted as `sent`, `late` (more than
`SEND_LATE_TOLERANCE_S` behind) or `dropped` (the in-flight cap), shipped to the master into
`OpenLoopCounters` keyed by the second they were scheduled in (as Locust ships its requests by
completion second), so a master's timeline holds each second's sends; they are not Locust request
entries (summary.json `totals.open_loop`).
"""

from __future__ import annotations

import logging
import time

import gevent
from gevent.event import Event
from gevent.pool import Pool
from locust import task

from sm_locust.config.openloop import DEFAULT_MAX_IN_FLIGHT, DEFAULT_RATE_PER_USER, OpenLoopSettings
from sm_locust.config.options import environment_options
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.llm.conversation import OpenConversations
from sm_locust.llm.tokenizer import text_counter
from sm_locust.plateau.arrival import ARRIVALS
from sm_locust.transport.options import operation
from sm_locust.users.sagemaker import SageMakerUser
from sm_locust.util.shipped import WorkerShipped

log = logging.getLogger(__name__)

REPORT_KEY = "sm_locust_open_loop"
# A send is late when it leaves more than this after its intended time. Wider than the pure
# module's 10 ms default (arrival.LATE_TOLERANCE_S): on a busy host the OS alone delays a runnable
# process by ~10 ms now and then; 25 ms still catches a generator that is really behind.
SEND_LATE_TOLERANCE_S = 0.025
KEEP_SECONDS = 120  # seconds of per-second send counts kept unshipped (a local runner never ships them)
IDLE_WAIT_S = 3600.0  # a rate token sleeps; Locust kills a waiting user at once when it stops it


class OpenLoopCounters(WorkerShipped):
    """Cumulative open-loop send counts of this process, plus what workers reported to the master.

    One per environment (`for_environment`). A process counts its sends by the second they were
    scheduled in; each Locust report of a worker carries the counts not yet reported, by second (and
    its requests in flight). The master adds them up and keeps each second's counts until its
    timeline takes them (`take_seconds`); a worker that ships only totals (no seconds) is counted in
    `unkeyed`, attached to the timeline when it arrives. On a local runner the timeline samples the
    totals every second.
    """

    ATTRIBUTE = "sm_locust_open_loop"
    REPORT_KEY = REPORT_KEY

    def __init__(self, clock=time.time):
        self.sent = 0
        self.late = 0
        self.dropped = 0
        self.active = False  # any open-loop send scheduled (here or on a worker)
        self._clock = clock
        self._reported = (0, 0, 0)
        self._pools: list[Pool] = []  # this process's in-flight pools
        self._worker_in_flight: dict[str, int] = {}  # master: latest in-flight count per worker
        self._by_second: dict[int, list[int]] = {}  # this process's sends by second, not yet shipped
        self._arrived: dict[int, list[int]] = {}  # master: workers' sends by second, not yet in the timeline
        self.unkeyed = (0, 0, 0)  # master: sends workers shipped without their seconds

    def add(self, sent: int = 0, late: int = 0, dropped: int = 0) -> None:
        """Sends this process scheduled now."""
        self.sent += sent
        self.late += late
        self.dropped += dropped
        self.active = True
        second = int(self._clock())
        counts = self._by_second.get(second)
        if counts is None:
            counts = self._by_second[second] = [0, 0, 0]
            if len(self._by_second) > KEEP_SECONDS:
                del self._by_second[min(self._by_second)]
        counts[0] += sent
        counts[1] += late
        counts[2] += dropped

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered: this process's, plus each worker's at its last report."""
        return sum(len(p) for p in self._pools) + sum(self._worker_in_flight.values())

    def snapshot(self) -> tuple[int, int, int]:
        return self.sent, self.late, self.dropped

    def as_dict(self) -> dict:
        scheduled = self.sent + self.dropped
        return {
            "scheduled": scheduled, "sent": self.sent, "late": self.late, "dropped": self.dropped,
            "late_fraction": round(self.late / scheduled, 6) if scheduled else 0.0,
            "dropped_fraction": round(self.dropped / scheduled, 6) if scheduled else 0.0,
        }

    def reset(self) -> None:
        self.sent = self.late = self.dropped = 0
        self._reported = (0, 0, 0)
        self._by_second = {}
        self._arrived = {}
        self.unkeyed = (0, 0, 0)
        self.active = False

    def take_delta(self) -> tuple | None:
        """(sent, late, dropped, in flight, [[second, sent, late, dropped], ...]): a master that reads
        only the first four fields still adds the totals."""
        now = self.snapshot()
        delta = tuple(a - b for a, b in zip(now, self._reported, strict=True))
        self._reported = now
        if any(delta) or self._pools:  # the in-flight count too, while there are pools
            seconds = [[s, *counts] for s, counts in sorted(self._by_second.items())]
            self._by_second = {}
            return (*delta, sum(len(p) for p in self._pools), seconds)
        return None

    def merge_delta(self, delta, client_id: str) -> None:
        if not delta:
            return
        totals = [int(n) for n in delta[:3]]
        if any(totals):
            self.sent += totals[0]
            self.late += totals[1]
            self.dropped += totals[2]
            self.active = True
        if len(delta) > 3:
            self._worker_in_flight[client_id] = int(delta[3])
        keyed = [0, 0, 0]
        for row in (delta[4] if len(delta) > 4 and isinstance(delta[4], list | tuple) else ()):
            counts = self._arrived.setdefault(int(row[0]), [0, 0, 0])
            for i in range(3):
                counts[i] += int(row[i + 1])
                keyed[i] += int(row[i + 1])
        # what the seconds do not hold (a worker that ships totals only): attached where it arrives
        u = self.unkeyed
        self.unkeyed = (u[0] + max(0, totals[0] - keyed[0]), u[1] + max(0, totals[1] - keyed[1]),
                        u[2] + max(0, totals[2] - keyed[2]))

    def take_seconds(self, upto: int | None = None) -> dict[int, tuple[int, int, int]]:
        """Master: the workers' sends by second, up to `upto` (None: all), now taken."""
        taken = {s: (c[0], c[1], c[2]) for s, c in self._arrived.items() if upto is None or s <= upto}
        for s in taken:
            del self._arrived[s]
        return taken


def invoke_from_intended(client, invocation: Invocation, intended: float, lag_s: float, call=None) -> None:
    """One invocation whose response time runs from `intended` (a perf_counter time): `call` (the
    options' operation, `transport.options.operation`: InvokeEndpoint, a stream, or InvokeEndpointAsync
    with its waiter), else InvokeEndpoint.

    Both transports' clients take `started=`; `lag_s` (how late the send was) is counted by the
    scheduler, not here.
    """
    (call or client.invoke)(invocation, started=intended)


class OpenLoopScheduler:
    """Sends this process's share of the target rate at intended times, through a greenlet pool."""

    def __init__(self, environment, client, *, arrival: str = "constant", rate_per_user: float = DEFAULT_RATE_PER_USER,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT):
        self.environment = environment
        self.client = client
        self.arrivals = ARRIVALS.get(arrival)
        self.arrival = ARRIVALS.canonical(arrival)
        self.rate_per_user = float(rate_per_user)
        self.pool = Pool(max_in_flight)
        self.counters = OpenLoopCounters.for_environment(environment)
        self.counters._pools.append(self.pool)
        options = environment_options(environment)
        self.call = operation(client, options)  # --stream, --async-input-location
        if options.turns > 1:  # --turns: each arrival is a conversation's next turn (sm_locust.llm.conversation)
            self.call = OpenConversations(self.call, options.turns, text_counter(options.tokenizer))
        self.users: set[int] = set()
        self._wake = Event()
        self._generation = 0
        self._greenlet = gevent.spawn(self._loop)
        environment.events.test_stop.add_listener(self._on_test_stop)

    @classmethod
    def for_user(cls, user) -> OpenLoopScheduler:
        env = user.environment
        scheduler = getattr(env, "sm_locust_open_loop_scheduler", None)
        if scheduler is None:
            arrival, per_user, in_flight = OpenLoopSettings.from_options(environment_options(env))
            scheduler = env.sm_locust_open_loop_scheduler = cls(
                env, user.client, arrival=arrival, rate_per_user=per_user, max_in_flight=in_flight)
        return scheduler

    @property
    def rate(self) -> float:
        return len(self.users) * self.rate_per_user

    def add_user(self, user) -> None:
        self.users.add(id(user))
        self._changed()

    def remove_user(self, user) -> None:
        self.users.discard(id(user))
        self._changed()

    def _changed(self) -> None:
        self._generation += 1
        self._wake.set()

    def _on_test_stop(self, **_kw) -> None:
        self.users.clear()
        self._changed()
        self.pool.kill(block=False)

    def _send(self, intended: float, lag_s: float) -> None:
        pool = getattr(self.environment, "sm_locust_payloads", None)
        if pool is not None:
            invoke_from_intended(self.client, pool.next(), intended, lag_s, self.call)

    def _loop(self) -> None:
        while True:
            self._wake.clear()
            rate, generation = self.rate, self._generation
            if rate <= 0:
                self._wake.wait()
                continue
            for intended in self.arrivals(rate, time.perf_counter()):
                delay = intended - time.perf_counter()
                if delay > 0:
                    self._wake.wait(timeout=delay)
                if self._generation != generation:
                    break  # the rate changed: a new stream from now
                if self.pool.full():
                    self.counters.add(dropped=1)
                    continue
                lag = max(0.0, time.perf_counter() - intended)
                self.counters.add(sent=1, late=int(lag > SEND_LATE_TOLERANCE_S))
                self.pool.spawn(self._send, intended, lag)


class OpenLoopUser(SageMakerUser):
    """A rate token: adds `--rate-per-user` req/s to this process's open-loop arrival stream."""

    def wait_time(self) -> float:
        return IDLE_WAIT_S

    def on_start(self) -> None:
        self._scheduler = OpenLoopScheduler.for_user(self)
        self._scheduler.add_user(self)

    def on_stop(self) -> None:
        scheduler = getattr(self, "_scheduler", None)
        if scheduler is not None:
            scheduler.remove_user(self)

    @task
    def hold(self) -> None:
        """Nothing to do: the process's scheduler sends; this user only counts towards the rate."""


def offered_rate(runner) -> float | None:
    """The open-loop rate the running OpenLoopUsers offer (req/s), or None without any."""
    env = runner.environment
    by_name = env.user_classes_by_name
    count = sum(n for name, n in (runner.user_classes_count or {}).items()
                if name in by_name and issubclass(by_name[name], OpenLoopUser))
    if not count:
        return None
    try:
        _, per_user, _ = OpenLoopSettings.from_options(environment_options(env))
    except UsageError:
        return None
    return count * per_user
