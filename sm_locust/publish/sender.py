"""`CloudWatchSender`: a bounded buffer of PutMetricData datums, sent in calls within the API's
limits, with back-off while CloudWatch throttles, and an account of everything (summary.json `publish`).

The load side only appends (`add`, no I/O); `drain` sends from a background greenlet. Every datum is
accounted for: sent; throttled or not reached, retried with jittered back-off up to `max_backoff_s`;
dropped oldest-first when the buffer is full; dropped under the error's code when refused; not
re-sent after a call with no answer (CloudWatch may have stored it); dropped when `close` runs out of
time. `report()` is summary.json's `publish`. Client, clock, `sleep` and `random` are injected.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from sm_locust.aws.clients import AwsClient
from sm_locust.publish.metric_data import ERROR_DIMENSION, calls

THROTTLE_ERRORS = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
                             "TooManyRequestsException", "RequestThrottled", "SlowDown"})
DEFAULT_CAPACITY = 20_000  # datums buffered at most
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 20.0
DEFAULT_CLOSE_TIMEOUT_S = 30.0
BUFFER_FULL = "buffer full (oldest dropped)"
NO_ANSWER = "no answer from CloudWatch (not re-sent: it may have stored them)"
UNSENT_AT_END = "still unsent when the run ended"

THROTTLE, RETRY, UNKNOWN, REJECT = "throttle", "retry", "unknown", "reject"


def classify(exc: BaseException) -> tuple[str, str]:
    """(what to do, reason) for a failed PutMetricData call: THROTTLE or RETRY (send again after a
    back-off), UNKNOWN (no answer: do not re-send), REJECT (drop, with the error's code as reason)."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        if code in THROTTLE_ERRORS or status == 429:
            return THROTTLE, code or "HTTP 429"
        if status >= 500:
            return RETRY, code or f"HTTP {status}"
        message = " ".join(str(error.get("Message") or "").split())[:160]
        return REJECT, f"{code or 'HTTP ' + str(status)}: {message}" if message else (code or f"HTTP {status}")
    name = type(exc).__name__
    if name in ("ReadTimeoutError", "ReadTimeout", "ResponseStreamingError"):
        return UNKNOWN, NO_ANSWER
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ConnectionRefusedError",
                "ConnectTimeout"):
        return RETRY, name
    return REJECT, f"{name}: {' '.join(str(exc).split())[:160]}"


def backoff_s(attempt: int, rand: Callable[[], float] = random.random, first: float = FIRST_BACKOFF_S,
              cap: float = MAX_BACKOFF_S) -> float:
    """The wait before retry `attempt` (1, 2, ...): first x 2^(attempt-1), capped, with equal jitter."""
    ceiling = min(cap, first * 2 ** max(0, attempt - 1))
    return ceiling / 2 + rand() * ceiling / 2


@dataclass
class PublishedCounts:
    """What the data points sent say, in the run's terms (summary.json `publish.cloudwatch.published`)."""

    requests: int = 0
    failures: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # Failures by error code
    latency_count: int = 0
    latency_sum_ms: float = 0.0
    latency_max_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"requests": self.requests, "failures": self.failures, "errors": dict(sorted(self.errors.items())),
                "latency_count": self.latency_count, "latency_sum_ms": round(self.latency_sum_ms, 3),
                "latency_max_ms": self.latency_max_ms}


class CloudWatchSender:
    """The buffer and its account (module docstring)."""

    def __init__(self, client: AwsClient, namespace: str, *, capacity: int = DEFAULT_CAPACITY,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random, max_backoff_s: float = MAX_BACKOFF_S):
        self.client = client
        self.namespace = namespace
        self.capacity = capacity
        self.sleep = sleep
        self.clock = clock
        self.rand = rand
        self.max_backoff_s = max_backoff_s
        self._buffer: deque[tuple[int, Mapping]] = deque()
        self._sending = 0  # buffered datums (at the left) in the call under way
        self._lock = threading.Lock()  # one drain at a time (gevent's lock under Locust)
        self._outstanding: dict[int, int] = {}  # period -> its datums not yet sent
        self._damaged: set[int] = set()  # periods with a datum dropped
        self._periods = 0
        self.calls = 0
        self.retries = 0
        self.data_points = 0
        self.periods_sent = 0
        self.dropped: dict[str, int] = {}
        self.published = PublishedCounts()

    # -- the load side: no I/O ---------------------------------------------------------------------
    def add(self, datums: Iterable[Mapping]) -> int:
        """Buffer one period's datums; returns the period's number. The oldest datums go when full."""
        period = self._periods
        self._periods += 1
        datums = list(datums)
        if not datums:
            self.periods_sent += 1
            return period
        self._outstanding[period] = len(datums)
        self._buffer.extend((period, datum) for datum in datums)
        overflow = min(len(self._buffer) - self.capacity, len(self._buffer) - self._sending)
        if overflow > 0:  # the oldest go, but not those of a call under way (they may be stored already)
            dropped = [self._buffer[self._sending + i] for i in range(overflow)]
            for _ in range(overflow):
                del self._buffer[self._sending]
            self._drop(dropped, BUFFER_FULL)
        return period

    @property
    def pending(self) -> int:
        return len(self._buffer)

    # -- the sending side --------------------------------------------------------------------------
    def drain(self, deadline: float | None = None, *, stop: Callable[[], bool] | None = None,
              sleep: Callable[[float], object] | None = None) -> None:
        """Send everything buffered, one call at a time; back off while throttled. With `deadline`
        (a `clock()` time) give up when it passes, with `stop` when it says so (what is left stays
        buffered); `sleep` overrides the back-off's wait (an interruptible one)."""
        with self._lock:
            self._drain(deadline, stop, sleep or self.sleep)

    def _drain(self, deadline: float | None, stop: Callable[[], bool] | None, sleep: Callable[[float], object]) -> None:
        attempt = 0
        while self._buffer:
            if (deadline is not None and self.clock() >= deadline) or (stop is not None and stop()):
                return
            batch = calls([datum for _, datum in itertools.islice(self._buffer, 1000)])[0]
            self._sending = len(batch)
            try:
                self.client.put_metric_data(Namespace=self.namespace, MetricData=list(batch))
            except Exception as exc:  # noqa: BLE001 - every failure is classified and counted
                self._sending = 0
                action, reason = classify(exc)
                if action in (THROTTLE, RETRY):
                    attempt += 1
                    self.retries += 1
                    wait = backoff_s(attempt, self.rand, cap=self.max_backoff_s)
                    if deadline is not None:
                        wait = min(wait, max(0.0, deadline - self.clock()))
                    sleep(wait)
                    continue
                attempt = 0
                self._drop([self._buffer.popleft() for _ in batch], reason)
                continue
            attempt = 0
            self._sending = 0
            self.calls += 1
            for _ in batch:
                period, datum = self._buffer.popleft()
                self._account(datum)
                self.data_points += 1
                self._outstanding[period] -= 1
                if not self._outstanding[period]:
                    del self._outstanding[period]
                    if period not in self._damaged:
                        self.periods_sent += 1

    def send_now(self, datums: list[Mapping]) -> None:
        """One PutMetricData call right away (the permission check before a run): counted when it
        succeeds, its exception raised to the caller when it fails."""
        self.client.put_metric_data(Namespace=self.namespace, MetricData=list(datums))
        self.calls += 1
        self.data_points += len(datums)
        for datum in datums:
            self._account(datum)

    def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT_S) -> None:
        """The run has ended: send what is buffered within `timeout` seconds; the rest is dropped, counted."""
        self.drain(deadline=self.clock() + timeout)
        if self._buffer:
            self._drop(list(self._buffer), UNSENT_AT_END)
            self._buffer.clear()

    def _drop(self, entries: list[tuple[int, Mapping]], reason: str) -> None:
        for period, _datum in entries:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            self._damaged.add(period)
            left = self._outstanding.get(period, 0) - 1
            if left > 0:
                self._outstanding[period] = left
            else:
                self._outstanding.pop(period, None)

    def _account(self, datum: Mapping) -> None:
        """What was published, in the run's terms (for comparing with summary.json)."""
        name = datum["MetricName"]
        published = self.published
        if name == "EndToEndLatency":
            for value, count in zip(datum["Values"], datum["Counts"], strict=True):
                published.latency_count += int(count)
                published.latency_sum_ms += value * count
                if published.latency_max_ms is None or value > published.latency_max_ms:
                    published.latency_max_ms = value
        elif name == "Requests":
            published.requests += int(datum["Value"])
        elif name == "Failures":
            code = next((d["Value"] for d in datum["Dimensions"] if d["Name"] == ERROR_DIMENSION), None)
            if code is None:
                published.failures += int(datum["Value"])
            else:
                published.errors[code] = published.errors.get(code, 0) + int(datum["Value"])

    def report(self) -> dict:
        """summary.json's `publish.cloudwatch` (docs/live-metrics.md)."""
        dropped = sum(self.dropped.values())
        published = self.published.as_dict()
        return {"namespace": self.namespace, "periods": self._periods, "periods_sent": self.periods_sent,
                "data_points": self.data_points, "calls": self.calls, "retries": self.retries,
                "pending": len(self._buffer), "dropped": dropped, "dropped_reasons": dict(self.dropped),
                "published": published}


def describe(report: Mapping) -> str:
    """One line for the end of a run: what was published, and what was not, with why."""
    text = (f"published to CloudWatch ({report.get('namespace')}): {report.get('data_points', 0)} data points of "
            f"{report.get('periods_sent', 0)}/{report.get('periods', 0)} periods in {report.get('calls', 0)} calls, "
            f"{report.get('retries', 0)} retries")
    dropped = report.get("dropped") or 0
    if not dropped:
        return text + ", nothing dropped"
    reasons = "; ".join(f"{n} {reason}" for reason, n in (report.get("dropped_reasons") or {}).items())
    return text + f", {dropped} DROPPED ({reasons})"


def closing_clause(report: Mapping) -> str:
    """The run's closing line's part: `CloudWatch: 84 data points published, nothing dropped`."""
    dropped = report.get("dropped") or 0
    text = f"CloudWatch: {report.get('data_points', 0)} data points published"
    return text + (f", {dropped} DROPPED (summary.json publish)" if dropped else ", nothing dropped")
