"""`PhasesShape`: replay a SageMaker Inference Recommender TrafficPattern (PHASES or STAIRS) with Locust.

`--traffic-pattern` is parsed and checked by `sm_locust.plateau.traffic` (SpawnRate is users per
MINUTE). Each user level is judged when it ends against the pattern's StoppingConditions plus
`--latency-slo-ms`, `--max-error-rate`, `--max-duration` and `--max-invocations`; budgets are also
checked during a long level. The stop reason names the condition that fired.
"""

from __future__ import annotations

from sm_locust.plateau.driver import ScheduleDriver
from sm_locust.plateau.search import ScheduleSearch
from sm_locust.shapes.base import SmLocustShape, say
from sm_locust.shapes.settings import ShapeSettings


class PhasesShape(SmLocustShape):
    """Inference Recommender traffic pattern from `--traffic-pattern`."""

    shape_name = "phases"  # its name in SHAPES, and the web UI form group of its own options

    search: ScheduleSearch

    def start(self, settings: ShapeSettings) -> None:
        self.schedule = settings.schedule()
        self.search = settings.schedule_search(self.schedule)
        self.driver = ScheduleDriver(self.schedule.at, self.search, min_subwindow_s=self.report_period_s)
        self.measurements = self.driver.measurements
        say(f"traffic pattern {self.schedule.describe()} (~{self.schedule.duration_s} s)")
        for warning in self.schedule.warnings:
            say(f"traffic pattern note: {warning}")

    def stop(self, now, seconds, reason):
        self.driver.finish(now, seconds, reason)
        super().stop(now, seconds, self.driver.stop_reason or reason)

    def decide(self, now, seconds):
        level = self.driver.tick(now, seconds)
        if level is None:
            self.stop_reason = self.driver.stop_reason
            return None
        users, spawn_rate = level
        return self.closed_loop(users, spawn_rate)
