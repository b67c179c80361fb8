"""`PlateauShape`: find the plateau in as few steps as possible (adaptive `PlateauSearch`).

Doubles the load while throughput grows, places the knee by Little's law and confirms it; each step
is held from `--min-step-seconds` until stable, at most `--step-seconds`. `--search-mode users`
steps closed-loop users, `rate` the open-loop arrival rate. SLO and error-rate constraints bound the
plateau; budgets end the search early. A client-bound step (generator CPU >= 90 % or > 10 % late
sends) is measured once more, then stops the search; it is never the plateau (docs/plateau.md).
"""

from __future__ import annotations

from sm_locust.measure.steady import MODE_RATE
from sm_locust.plateau.search import PlateauSearch
from sm_locust.record.llm import LlmStats
from sm_locust.shapes.base import SmLocustShape
from sm_locust.shapes.settings import ShapeSettings
from sm_locust.users.openloop import OpenLoopCounters

DRAIN_TIMEOUT_S = 60.0  # longest pause for the endpoint to work off a backlog between open-loop steps
DRAINED_IN_FLIGHT = 1  # ... it is drained when at most this many requests are still outstanding


class PlateauShape(SmLocustShape):
    """Adaptive plateau search over users or arrival rate."""

    shape_name = "plateau"  # its name in SHAPES, and the web UI form group of its own options

    search: PlateauSearch

    def start(self, settings: ShapeSettings) -> None:
        self.search = settings.plateau_search()
        self.driver = settings.plateau_driver(self.search, self.report_period_s,
                                              tokens=LlmStats.for_environment(self.environment).over)
        self.measurements = self.driver.measurements
        self._drain_until: float | None = None

    def stop(self, now, seconds, reason):
        super().stop(now, seconds, self.driver.finish(now, seconds, reason).reason)

    def decide(self, now, seconds):
        if self.search.mode == MODE_RATE:
            return self._decide_rate(now, seconds)
        decision = self.driver.tick(now, seconds)
        if decision.users is None:  # stop
            self.stop_reason = decision.reason
            return None
        return self.closed_loop(decision.users, self.driver.spawn_rate)

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
        if decision.rate is None:  # stop
            self.stop_reason = decision.reason
            return None
        if len(self.driver.measurements) > measured and counters.in_flight > DRAINED_IN_FLIGHT:
            last = self.driver.measurements[-1]
            ratio = self.search.served_ratio(last)
            if ratio is not None and ratio < 0.95:
                self._drain_until = now + DRAIN_TIMEOUT_S
                return self.open_loop_pause()
        return self.open_loop(decision.rate)
