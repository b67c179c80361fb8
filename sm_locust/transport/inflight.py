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

from typing import Any

from sm_locust.invocation import is_invocation

REPORT_KEY = "sm_locust_in_flight_at_stop"


class StoppedRequests:
    """The requests a stop cut short on this process (plus, on a master, its workers')."""

    def __init__(self) -> None:
        self.count = 0
        self._reported = 0

    @classmethod
    def for_environment(cls, environment: Any) -> StoppedRequests:
        state = getattr(environment, "sm_locust_stopped_requests", None)
        if state is None:
            state = environment.sm_locust_stopped_requests = cls()
            events = environment.events
            events.test_start.add_listener(state._on_test_start)
            events.report_to_master.add_listener(state._on_report_to_master)
            events.worker_report.add_listener(state._on_worker_report)
        return state

    def stopped(self, request_type: str, name: str) -> None:
        """A request of `request_type` / `name` ended because its user was stopped."""
        if is_invocation(request_type, name):
            self.count += 1

    def _on_test_start(self, **_kw) -> None:
        self.count = self._reported = 0

    def _on_report_to_master(self, client_id, data, **_kw) -> None:  # worker side
        if self.count != self._reported:
            data[REPORT_KEY] = self.count - self._reported
            self._reported = self.count

    def _on_worker_report(self, client_id, data, **_kw) -> None:  # master side
        self.count += int(data.get(REPORT_KEY) or 0)
