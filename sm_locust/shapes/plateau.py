"""`PlateauShape`: find the plateau in as few steps as possible (adaptive `PlateauSearch`).

Doubles the load while throughput grows, then bisects the boundary until it is known to +-5 % (or
one user / one rate quantum): about 2 log2(k) steps of `--step-seconds` instead of k linear ones.
`--search-mode users` (default) steps closed-loop users; `--search-mode rate` steps the open-loop
arrival rate (`--start-rps` .. `--max-rps`, sent by `OpenLoopUser`s, see sm_locust.users.openloop), which
measures latency without coordinated omission and tells a generator that fell behind (late sends)
from a saturated endpoint. Constraints (`--latency-slo-ms` at `--slo-percentile`, `--max-error-rate`,
default 5 %) bound the plateau from above; budgets (`--max-users`/`--max-rps`, `--max-duration`,
`--max-invocations`) end the search early. A client-bound step (load generator CPU >= 90 %, or
> 10 % late sends) stops the search and is never reported as the plateau.
"""

from __future__ import annotations

from sm_locust.users.openloop import OpenLoopCounters
from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.steady import MODE_RATE
from sm_locust.shapes.base import SmLocustShape
from sm_locust.shapes.settings import ShapeSettings

DRAIN_TIMEOUT_S = 60.0  # longest pause for the endpoint to work off a backlog between open-loop steps
DRAINED_IN_FLIGHT = 1  # ... it is drained when at most this many requests are still outstanding


class PlateauShape(SmLocustShape):
    """Adaptive plateau search over users or arrival rate."""

    def start(self, settings: ShapeSettings) -> None:
        self.search = settings.plateau_search()
        self.driver = SearchDriver(self.search, step_s=settings.step_seconds, min_subwindow_s=self.report_period_s)
        self.measurements = self.driver.measurements
        self._drain_until: float | None = None

    def decide(self, now, seconds):
        if self.search.mode == MODE_RATE:
            return self._decide_rate(now, seconds)
        decision = self.driver.tick(now, seconds)
        return None if decision.stop else self.closed_loop(decision.users)

    def _decide_rate(self, now, seconds):
        """Open loop: an overloaded step leaves a queue behind; the next step starts once it is gone.

        Otherwise a lower rate tried next would be measured while the endpoint still completes the
        previous step's backlog (completions above the offer, latencies of the overload).
        """
        counters = OpenLoopCounters.for_environment(self.environment)
        if self._drain_until is not None:
            if counters.in_flight > DRAINED_IN_FLIGHT and now < self._drain_until:
                return self.open_loop_pause()
            self._drain_until = None
            self.driver.restart_step(now)
        measured = len(self.driver.measurements)
        decision = self.driver.tick(now, seconds)
        if decision.stop:
            return None
        if len(self.driver.measurements) > measured and counters.in_flight > DRAINED_IN_FLIGHT:
            last = self.driver.measurements[-1]
            if last.achieved_ratio is not None and last.achieved_ratio < 0.95:
                self._drain_until = now + DRAIN_TIMEOUT_S
                return self.open_loop_pause()
        return self.open_loop(decision.rate)
