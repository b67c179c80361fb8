"""`PhasesShape`: replay a SageMaker Inference Recommender TrafficPattern (PHASES or STAIRS) with Locust.

`--traffic-pattern` takes the pattern as JSON text or a file: a `TrafficPattern`, `{"TrafficPattern",
"StoppingConditions"}` or a whole CreateInferenceRecommendationsJob request; it is parsed and checked
against IR's rules by `sm_locust.plateau.traffic` (SpawnRate is users per MINUTE, as the API
reference says). The shape follows `Schedule.at(elapsed)`; every user level is judged when it ends
(`ScheduleDriver` + `ScheduleSearch`) against the pattern's StoppingConditions (MaxInvocations per
minute, ModelLatencyThresholds, FlatInvocations) plus `--latency-slo-ms`, `--max-error-rate`,
`--max-duration` and `--max-invocations` if given; budgets are also checked while a long level runs,
so `MaxInvocations` stops the pattern once a level sustains that rate. The verdict names the plateau
like the other shapes, and its stop reason the condition that fired (not "traffic pattern finished"
when a budget fired first).
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
