"""Trace replay in Locust terms (`--trace FILE`): each traced request sent at its own time, whatever the answers.

One `TraceReplay` per process sends the pool's rows (`sm_locust.payloads.trace.TracePool`) open-loop:
row i leaves at start + its trace offset / `--time-scale`, through a pool of `--max-in-flight`
greenlets, its response time counted from that intended time. Each row's body is built before it is
due. Sends are counted as the open-loop users' are (`OpenLoopCounters`: sent, late, dropped: summary.json
`totals.open_loop`), and each send's lateness is kept for summary.json `trace`. `TraceReplayUser` is
the one user the trace shape starts; the default locustfile's subclass adds token accounting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
from gevent.pool import Pool
from locust import task

from sm_locust.config.openloop import OpenLoopSettings
from sm_locust.config.options import environment_options
from sm_locust.errors import SmLocustError
from sm_locust.llm.trace import lateness
from sm_locust.transport.options import operation
from sm_locust.users.openloop import IDLE_WAIT_S, SEND_LATE_TOLERANCE_S, OpenLoopCounters
from sm_locust.users.sagemaker import SageMakerUser

ATTRIBUTE = "sm_locust_trace_replay"
log = logging.getLogger(__name__)


class TraceReplay:
    """Sends one trace's rows at their times (`run`, in its own greenlet); `done` once every answer is in."""

    def __init__(self, pool: Any, call: Callable, counters: OpenLoopCounters, *, time_scale: float = 1.0,
                 max_in_flight: int = 1000, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], object] = gevent.sleep):
        self.pool = pool
        self.call = call
        self.counters = counters
        self.time_scale = time_scale
        self.clock = clock
        self.sleep = sleep
        self.in_flight = Pool(max_in_flight)
        counters._pools.append(self.in_flight)
        self.lags_s: list[float] = []
        self.dropped = 0
        self.unbuilt = 0
        """Rows whose prompt could not be written (the tokenizer): skipped."""
        self.started: float | None = None
        self.done = False
        self.stopped = False
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> TraceReplay:
        self._greenlet = gevent.spawn(self.run)
        return self

    def run(self) -> None:
        try:
            self._send_all()
            self.in_flight.join()
        finally:
            self.done = True  # the shape ends the run: never left waiting on a replay that died

    def _send_all(self) -> None:
        offsets = self.pool.trace.offsets_s(self.time_scale)
        start = self.started = self.clock()
        for index, offset in enumerate(offsets):
            if self.stopped:
                break
            try:
                invocation = self.pool.invocation(index)  # before it is due
            except SmLocustError as exc:  # a row the tokenizer cannot write: said, counted, skipped
                self.unbuilt += 1
                log.error("sm-locust: %s", exc)
                continue
            intended = start + offset
            delay = intended - self.clock()
            if delay > 0:
                self.sleep(delay)
            if self.stopped:
                break
            if self.in_flight.full():
                self.dropped += 1
                self.counters.add(dropped=1)
                continue
            lag = max(0.0, self.clock() - intended)
            self.lags_s.append(lag)
            self.counters.add(sent=1, late=int(lag > SEND_LATE_TOLERANCE_S))
            self.in_flight.spawn(self.call, invocation, started=intended)

    def stop(self) -> None:
        self.stopped = True
        self.in_flight.kill(block=False)
        if self._greenlet is not None:
            self._greenlet.kill(block=False)

    def describe(self) -> dict:
        """summary.json's `trace`: the trace replayed, and how the sends kept its times."""
        rows = len(self.pool)
        return {**self.pool.trace.describe(self.time_scale), "sent": len(self.lags_s), "dropped": self.dropped,
                "unbuilt": self.unbuilt, "not_sent": rows - len(self.lags_s) - self.dropped - self.unbuilt,
                "late_after_ms": SEND_LATE_TOLERANCE_S * 1000, "send_lag_ms": lateness(self.lags_s)}


def replay_of(environment: object) -> TraceReplay | None:
    return getattr(environment, ATTRIBUTE, None)


class TraceReplayUser(SageMakerUser):
    """Starts this process's trace replay (once per swarm) and then only waits: the replay sends."""

    abstract = True

    def wait_time(self) -> float:
        return IDLE_WAIT_S

    def make_call(self, options: Any) -> Callable:
        """The send of one invocation (`started=` passed on): the operation the options name."""
        return operation(self.client, options)

    def on_start(self) -> None:
        environment = self.environment
        if replay_of(environment) is not None:
            return
        pool = getattr(environment, "sm_locust_payloads", None)
        if pool is None or not hasattr(pool, "trace"):
            return  # the payloads failed to load (said so; the run quits)
        options = environment_options(environment)
        self.client.validator = getattr(environment, "sm_locust_validator", None)
        settings = OpenLoopSettings.from_options(options)
        replay = TraceReplay(pool, self.make_call(options), OpenLoopCounters.for_environment(environment),
                             time_scale=options.time_scale or 1.0, max_in_flight=settings.max_in_flight)
        setattr(environment, ATTRIBUTE, replay)
        environment.events.test_stop.add_listener(lambda **_kw: _forget(environment, replay))
        replay.start()

    @task
    def hold(self) -> None:
        """Nothing to do: the replay sends."""


def _forget(environment: object, replay: TraceReplay) -> None:
    replay.stop()
    if replay_of(environment) is replay:
        setattr(environment, ATTRIBUTE, None)
