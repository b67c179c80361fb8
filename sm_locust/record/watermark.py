"""`ReportWatermarks`: how far each worker's reports are complete, by the worker's own clock.

A master's timeline counts second S's requests by when they completed on the workers (Locust keys
`num_reqs_per_sec` by the second a request was logged in, on the worker's clock, and merges every
worker's counts into its own entry). S may be appended once no worker can still send a request of
S. Building a worker's report empties its total entry, whose `start_time` becomes that moment: every
request logged before it is in this report or an earlier one, so the second before it is complete.
Each report carries that second (the worker's watermark); the master keeps each worker's highest and
appends S once every live worker's watermark has reached S (`appendable_through`), checked at each
sample and when a report moves a watermark (`on_advance`: the recorder appends at once). Both ends use
the worker's clock, so clocks that differ between hosts change nothing; the master's own lag
(`lag_s`, by its clock) stays the upper bound for a worker that sends no watermark (an older
release, one not yet reported, one stalled or being lost: a worker Locust has marked missing no
longer holds seconds back), and for one whose clock runs behind the master's by more than it: its
seconds are appended at the lag, before all of them arrived (docs/plateau.md, "Distributed runs").

Workers also report every `REPORT_INTERVAL_S` instead of Locust's 3 s (`report_every_second`, called
by the locustfile's init beside the watermark: Locust's `WORKER_REPORT_INTERVAL`, read by the worker's
`stats_reporter` loop before each sleep): the master then appends a second ~1 s after it ended rather
than ~3 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import locust.runners
from locust.runners import STATE_MISSING, WorkerRunner

from sm_locust.util.shipped import WorkerShipped

REPORT_INTERVAL_S = 1.0  # a worker's stats report interval (Locust's default: 3 s)


def appendable_through(master_second: int, marks: Mapping[str, int], live: Iterable[str], lag_s: int) -> int:
    """The last second a master may append to its timeline at `master_second` (its clock).

    Every live worker's watermark has reached it, or else it is `lag_s` seconds old; never a second that
    has not ended by the master's clock. A live worker without a watermark holds the master to the lag."""
    fallback = master_second - lag_s
    live = list(live)
    if not live or any(worker not in marks for worker in live):
        return fallback
    return min(master_second - 1, max(fallback, min(marks[worker] for worker in live)))


def report_every_second(environment: object) -> None:
    """On a worker, make Locust send its stats report every `REPORT_INTERVAL_S` (its module global
    `WORKER_REPORT_INTERVAL`, read before each sleep of the worker's report loop); a master or a local
    runner is left alone."""
    if isinstance(getattr(environment, "runner", None), WorkerRunner):
        locust.runners.WORKER_REPORT_INTERVAL = REPORT_INTERVAL_S


def live_workers(clients: Mapping[str, object]) -> list[str]:
    """The workers whose reports a master still waits for: every connected one Locust has not marked missing."""
    return [str(cid) for cid, node in clients.items() if getattr(node, "state", None) != STATE_MISSING]


class ReportWatermarks(WorkerShipped):
    """Worker side: ships the last second its reports hold whole. Master side: each worker's highest."""

    ATTRIBUTE = "sm_locust_report_watermarks"
    REPORT_KEY = "sm_locust_complete_through"

    def __init__(self) -> None:
        self._environment: object | None = None
        self.marks: dict[str, int] = {}  # master: each worker's watermark (its clock's second)
        self.on_advance: Callable[[], None] | None = None  # master: called when a watermark moves on

    def listen(self, environment: object) -> None:
        self._environment = environment

    def reset(self) -> None:
        self.marks = {}

    def take_delta(self) -> int | None:
        """The second before the total entry was last emptied: Locust's stats listener, registered with the
        runner and so before this one, has just done it for this report (were it after, the last report's
        moment would be read: an earlier second, complete as well)."""
        started = getattr(getattr(getattr(self._environment, "stats", None), "total", None), "start_time", None)
        if isinstance(started, bool) or not isinstance(started, int | float) or not math.isfinite(started):
            return None
        return int(started) - 1

    def merge_delta(self, delta: object, client_id: str) -> None:
        if isinstance(delta, bool) or not isinstance(delta, int):
            return  # not what a worker of this version sends: that worker holds the master to its lag
        worker = str(client_id)
        before = self.marks.get(worker)
        if before is not None and delta <= before:
            return
        self.marks[worker] = delta
        if self.on_advance is not None:
            self.on_advance()

    def through(self, master_second: int, clients: Mapping[str, object], lag_s: int) -> int:
        """`appendable_through` for this master's connected workers."""
        return appendable_through(master_second, self.marks, live_workers(clients), lag_s)
