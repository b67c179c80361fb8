"""`StepLoadShape`: hold `start` users, add `step` users every `step_seconds`, up to `max_users`.

The classic ramp of the seeds, done in steps so each load level is held long enough to measure.
`StepSchedule` (in `settings.py`) is the plain arithmetic of the ramp (also used by `sm-locust
demo`); the shape runs it as a `StepSearch` through a `SearchDriver`, so every step is measured
like the plateau search measures its steps, the verdict (knee) lands in summary.json's `plateau`, and the ramp can stop
early: at the knee (`--stop-at-knee true`: throughput gain < 5 % over 4 steps), at a constraint
(`--latency-slo-ms`, `--max-error-rate`) or a budget (`--max-duration`, `--max-invocations`).
Without those options it runs every step up to `--max-users`, as it always did.
"""

from __future__ import annotations

from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import StepSearch
from sm_locust.shapes.base import SmLocustShape
from sm_locust.shapes.settings import ShapeSettings


class StepLoadShape(SmLocustShape):
    """Step load from `--start-users/--step-users/--step-seconds/--max-users`, optionally stopping at the knee."""

    shape_name = "step"  # its name in SHAPES, and the web UI form group of its own options

    search: StepSearch

    def start(self, settings: ShapeSettings) -> None:
        self.schedule = settings.step_schedule()
        self.search = settings.step_search()
        self.driver = SearchDriver(self.search, step_s=self.schedule.step_seconds,
                                   min_subwindow_s=self.report_period_s)
        self.measurements = self.driver.measurements

    def stop(self, now, seconds, reason):
        super().stop(now, seconds, self.driver.finish(now, seconds, reason).reason)

    def decide(self, now, seconds):
        decision = self.driver.tick(now, seconds)
        if decision.users is None:  # stop
            self.stop_reason = decision.reason
            return None
        return self.closed_loop(decision.users, self.schedule.spawn_rate)
