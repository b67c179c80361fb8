"""Closed-loop back-off after connection errors, so a dead endpoint does not become a client busy loop.

Why: a closed-loop user sends its next request as soon as the last one ends. A refused connection
ends in microseconds, so with the endpoint down every user spins (measured: ~1,450 attempts/s
from a few users), burning the generator's CPU and filling the run with attempts that say nothing
about the endpoint. A user whose task met a connection error therefore waits before its next
task: 50 ms, doubling on each further such task up to 1 s, back to nothing after a task without
one (`Backoff`). Only failures to reach the endpoint count (`CONNECTION_ERRORS`: refused,
unreachable, reset or closed connections, timeouts opening one); an answer from the endpoint,
even an error (ModelError, ThrottlingException, 5xx), or a read timeout does not: those are the
endpoint's behaviour under load and are measured as they come.

How it sees the error without touching a transport: `ConnectionBackoff` (one per Locust
environment) listens to the `request` event and marks the greenlet that fired a connection
failure; a SageMakerUser's task runs in its own greenlet, so after the task the user asks
`after_task()` whether its greenlet was marked. The marks are weak (a greenlet that ends drops
its mark). Back-offs are counted (`count`, `seconds`) on each process and, in distributed runs,
reported to the master with Locust's worker reports; the recorder writes them into summary.json
(`totals.backoff`) and shows them on the progress line.
"""

from __future__ import annotations

import weakref

from gevent import getcurrent

from sm_locust.invocation import InvocationError
from sm_locust.util.shipped import WorkerShipped

FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
REPORT_KEY = "sm_locust_backoff"

CONNECTION_ERRORS = frozenset((
    "EndpointConnectionError",  # refused, unreachable, DNS (botocore's name; the fast transport's too)
    "ConnectTimeoutError",  # no connection within --connect-timeout
    "ConnectionClosedError",  # reset, broken pipe, closed before an answer
    "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError", "ConnectionError",  # other clients
))


def connection_error_code(exception: object) -> str | None:
    """The code of a failure to reach the endpoint, None for anything else (an answer, a read timeout)."""
    if exception is None:
        return None
    code = exception.code if isinstance(exception, InvocationError) else type(exception).__name__
    return code if code in CONNECTION_ERRORS else None


class Backoff:
    """One user's delay: `FIRST_BACKOFF_S` after a connection error, doubling to `MAX_BACKOFF_S`, reset on success."""

    __slots__ = ("delay_s",)

    def __init__(self) -> None:
        self.delay_s = 0.0

    def after(self, connection_failed: bool) -> float:
        """The back-off before the next task (0.0 after a task that reached the endpoint)."""
        if not connection_failed:
            self.delay_s = 0.0
        else:
            self.delay_s = FIRST_BACKOFF_S if self.delay_s <= 0.0 else min(MAX_BACKOFF_S, self.delay_s * 2.0)
        return self.delay_s


class ConnectionBackoff(WorkerShipped):
    """Connection-failure marks per greenlet and the back-off counts of this process (plus workers').

    One per environment (`for_environment`). `count` back-offs were taken, `seconds` is their sum.
    """

    ATTRIBUTE = "sm_locust_backoff"
    REPORT_KEY = REPORT_KEY

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._marks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._reported = (0, 0.0)

    def listen(self, environment) -> None:
        environment.events.request.add_listener(self._on_request)

    def after_task(self, backoff: Backoff) -> float:
        """Called from a user's greenlet after a task: its back-off (counted), 0.0 when none."""
        failed = self._marks.pop(getcurrent(), None) is not None
        if not failed and backoff.delay_s <= 0.0:
            return 0.0
        delay = backoff.after(failed)
        if delay:
            self.count += 1
            self.seconds += delay
        return delay

    def snapshot(self) -> tuple[int, float]:
        return self.count, self.seconds

    def as_dict(self) -> dict:
        return {"count": self.count, "seconds": round(self.seconds, 3), "first_s": FIRST_BACKOFF_S,
                "max_s": MAX_BACKOFF_S}

    def _on_request(self, exception=None, **_kw) -> None:
        if exception is not None and connection_error_code(exception) is not None:
            self._marks[getcurrent()] = True

    def reset(self) -> None:
        self.count, self.seconds = 0, 0.0
        self._reported = (0, 0.0)

    def take_delta(self) -> tuple[int, float] | None:
        now = self.snapshot()
        delta = (now[0] - self._reported[0], now[1] - self._reported[1])
        self._reported = now
        return delta if delta[0] else None

    def merge_delta(self, delta, client_id: str) -> None:
        if delta:
            self.count += int(delta[0])
            self.seconds += float(delta[1])
