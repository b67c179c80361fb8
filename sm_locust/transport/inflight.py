"""Requests in flight when the test stopped: counted, because Locust records nothing for them.

Why: Locust stops a test by killing its users' greenlets; a request under way then ends with
GreenletExit and no `request` event, so it appears nowhere. A run against an endpoint slower than
the run (every request still waiting at the stop) reported "0 requests, 0 failures" and exited 0.
`Measurement` (transport/contract.py) calls `StoppedRequests.stopped()` when its block ends that way;
the count of logical invocations (`sm_locust.invocation.is_invocation`: not a stream's TTFT, not a
fan-out part) goes into summary.json's `totals.in_flight_at_stop` and the verdict line. One per
Locust environment; in distributed runs workers report theirs to the master with Locust's worker
reports, as the back-off counts do (users/backoff.py).
"""

from __future__ import annotations

from sm_locust.invocation import is_invocation
from sm_locust.util.shipped import WorkerShipped

REPORT_KEY = "sm_locust_in_flight_at_stop"


class StoppedRequests(WorkerShipped):
    """The requests a stop cut short on this process (plus, on a master, its workers')."""

    ATTRIBUTE = "sm_locust_stopped_requests"
    REPORT_KEY = REPORT_KEY

    def __init__(self) -> None:
        self.count = 0
        self._reported = 0

    def stopped(self, request_type: str, name: str) -> None:
        """A request of `request_type` / `name` ended because its user was stopped."""
        if is_invocation(request_type, name):
            self.count += 1

    def reset(self) -> None:
        self.count = self._reported = 0

    def take_delta(self) -> int | None:
        if self.count == self._reported:
            return None
        delta, self._reported = self.count - self._reported, self.count
        return delta

    def merge_delta(self, delta: int, client_id: str) -> None:
        self.count += int(delta or 0)
