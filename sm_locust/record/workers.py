"""Worker bookkeeping for distributed runs: who connected, who was lost, and a clear
`--expect-workers` timeout.

`WorkerTracker` (on the master) watches `runner.clients` and keeps summary.json's `workers` entry
(expected, connected, at_end, lost with "missing" or "quit"); `WorkerLedger` is the pure part, fed
snapshots. `wait_for_final_reports` makes the master wait, up to `FINAL_REPORTS_WAIT_S` past the stop
timeout, until every worker it still hears from has said quit: Locust's master waits a fixed 0.5 s
for the workers' final reports, and a busy worker's last report would miss the totals. It also takes
over `--expect-workers-max-wait`: workers missing in time is one line naming how many connected, exit 2.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field

import gevent
from locust.rpc import Message
from locust.runners import STATE_MISSING, MasterRunner

from sm_locust.record.recorder import recorder_of

log = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.5
FINAL_REPORTS_WAIT_S = 30.0  # at quit, the longest the master waits for the workers' last reports (module doc)
LOST_STATES = ("missing",)


@dataclass
class WorkerLedger:
    """Pure record of the workers seen during one test: feed it snapshots {id: state}."""

    expected: int = 0
    started_at: float | None = None
    seen: list[str] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)
    present: dict[str, str] = field(default_factory=dict)

    def start(self, now: float, snapshot: dict[str, str]) -> None:
        self.started_at = now
        self.lost = []
        self.seen = []
        self.present = {}
        self.observe(now, snapshot)

    def observe(self, now: float, snapshot: dict[str, str]) -> None:
        """A worker disappearing from the snapshot quit; one in a LOST_STATES state went missing."""
        after = round(now - (self.started_at or now), 1)
        lost_ids = {entry["id"] for entry in self.lost}
        for worker_id, state in snapshot.items():
            if worker_id not in self.seen:
                self.seen.append(worker_id)
            if state in LOST_STATES and worker_id not in lost_ids:
                self.lost.append({"id": worker_id, "reason": "missing", "after_s": after})
                lost_ids.add(worker_id)
        for worker_id in self.present:
            if worker_id not in snapshot and worker_id not in lost_ids:
                self.lost.append({"id": worker_id, "reason": "quit", "after_s": after})
                lost_ids.add(worker_id)
        self.present = dict(snapshot)

    def as_dict(self) -> dict:
        lost_ids = {entry["id"] for entry in self.lost}
        return {"expected": self.expected, "connected": len(self.seen),
                "at_end": sum(1 for w in self.present if w not in lost_ids), "lost": list(self.lost)}


def timeout_message(connected: int, expected: int, waited_s: float) -> str:
    return (f"sm-locust: error: only {connected} of {expected} workers connected within {waited_s:g} s "
            f"(--expect-workers {expected} --expect-workers-max-wait {waited_s:g}); start the workers with "
            "`locust -f ... --worker --master-host MASTER` or lower --expect-workers")


class WorkerTracker:
    """Listener on the master: tracks workers into the recorder's `extra["workers"]`."""

    def __init__(self, environment, *, poll_interval_s: float = POLL_INTERVAL_S):
        self.environment = environment
        self.poll_interval_s = poll_interval_s
        options = environment.parsed_options
        self.ledger = WorkerLedger(expected=int(getattr(options, "expect_workers", 0) or 0))
        self.entry: dict = self.ledger.as_dict()  # the dict summary.json shows; updated in place
        self._poller = None
        self._watchdog = None
        self._publish()
        events = environment.events
        events.test_start.add_listener(self.on_test_start)
        events.test_stop.add_listener(self.on_test_stop)
        events.worker_connect.add_listener(self.on_worker_connect)
        max_wait = float(getattr(options, "expect_workers_max_wait", 0) or 0)
        if max_wait > 0 and (getattr(options, "headless", False) or getattr(options, "autostart", False)):
            options.expect_workers_max_wait = 0  # we own the wait now (see the module docstring)
            self._watchdog = gevent.spawn(self._expect_workers, max_wait)

    def snapshot(self) -> dict[str, str]:
        return {worker_id: str(node.state) for worker_id, node in list(self.environment.runner.clients.items())}

    # -- listeners --------------------------------------------------------------------------
    def on_worker_connect(self, client_id: str = "", **_kw) -> None:
        if client_id and client_id not in self.ledger.seen and self.ledger.started_at is None:
            self.ledger.seen.append(client_id)
            self._publish()

    def on_test_start(self, environment, **_kw) -> None:
        if self._watchdog is not None:
            self._watchdog.kill(block=False)
            self._watchdog = None
        self.ledger.start(time.time(), self.snapshot())
        self._publish()
        if self._poller is None:
            self._poller = gevent.spawn(self._poll_forever)

    def on_test_stop(self, environment, **_kw) -> None:
        if self._poller is not None:
            self._poller.kill(block=False)
            self._poller = None
        self._observe()

    # -- work -------------------------------------------------------------------------------
    def _observe(self) -> None:
        if self.ledger.started_at is None:
            return
        before = len(self.ledger.lost)
        self.ledger.observe(time.time(), self.snapshot())
        for entry in self.ledger.lost[before:]:
            log.warning("sm-locust: worker %s lost (%s) %.1f s into the test; the run continues without its users",
                        entry["id"], entry["reason"], entry["after_s"])
        self._publish()

    def _poll_forever(self) -> None:
        while True:
            gevent.sleep(self.poll_interval_s)
            try:
                self._observe()
            except Exception:  # never let bookkeeping kill the test
                log.exception("sm-locust: worker tracking failed")

    def _publish(self) -> None:
        self.entry.clear()
        self.entry.update(self.ledger.as_dict())
        recorder = recorder_of(self.environment)
        if recorder is not None:
            recorder.extra["workers"] = self.entry

    def _expect_workers(self, max_wait: float) -> None:
        deadline = time.monotonic() + max_wait
        runner = self.environment.runner
        while time.monotonic() < deadline:
            if len(runner.clients.ready) >= self.ledger.expected:
                return
            gevent.sleep(0.1)
        if len(runner.clients.ready) >= self.ledger.expected:
            return
        print(timeout_message(len(runner.clients.ready), self.ledger.expected, max_wait), file=sys.stderr, flush=True)
        self.environment.process_exit_code = 2
        runner.quit()
        sys.exit(2)  # raised in the main greenlet, which is waiting in Locust's own loop


def wait_for_final_reports(runner, wait_s: float) -> None:
    """Make `runner.quit` (a MasterRunner's) wait for each worker's quit, and so its final report,
    for up to `wait_s` before Locust's own quit (module doc). A worker gone missing is not waited for."""
    locust_quit = runner.quit

    def quit() -> None:
        runner.stop(send_stop_to_client=False)
        for client in list(runner.clients.all):
            runner.server.send_to_client(Message("quit", None, client.id))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(c.state != STATE_MISSING for c in list(runner.clients.all)):
            gevent.sleep(0.05)
        locust_quit()  # the workers that answered are gone from runner.clients: nothing is sent twice

    runner.quit = quit


def attach(environment) -> WorkerTracker | None:
    """Attach a tracker on a master (no-op for local runners and workers)."""
    if not isinstance(environment.runner, MasterRunner) or environment.parsed_options is None:
        return None
    tracker = WorkerTracker(environment)
    environment.sm_locust_workers = tracker
    wait_for_final_reports(environment.runner, FINAL_REPORTS_WAIT_S + float(environment.stop_timeout or 0))
    return tracker
