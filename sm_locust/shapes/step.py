"""`StepLoadShape`: hold `start` users, add `step` users every `step_seconds`, up to `max_users`.

The classic ramp of the seeds, done in steps so each load level is held long enough to measure.
`StepSchedule` is the plain arithmetic of the ramp (also used by `sm-locust demo`); the shape runs
it as a `StepSearch` through a `SearchDriver`, so every step is measured like the plateau search
measures its steps, the verdict (knee) lands in summary.json's `plateau`, and the ramp can stop
early: at the knee (`--stop-at-knee true`: throughput gain < 5 % over 4 steps), at a constraint
(`--latency-slo-ms`, `--max-error-rate`) or a budget (`--max-duration`, `--max-invocations`).
Without those options it runs every step up to `--max-users`, as it always did.
"""

from __future__ import annotations

from dataclasses import dataclass

from sm_locust.errors import UsageError
from sm_locust.plateau.driver import SearchDriver
from sm_locust.shapes.base import SmLocustShape
from sm_locust.shapes.settings import ShapeSettings


@dataclass(frozen=True)
class StepSchedule:
    start_users: int = 1
    step_users: int = 1
    step_seconds: float = 30.0
    max_users: int = 10
    spawn_rate: float = 100.0

    def validate(self) -> StepSchedule:
        if self.start_users < 1:
            raise UsageError(f"--start-users must be at least 1, got {self.start_users}")
        if self.step_users < 1:
            raise UsageError(f"--step-users must be at least 1, got {self.step_users}")
        if self.step_seconds <= 0:
            raise UsageError(f"--step-seconds must be more than 0, got {self.step_seconds}")
        if self.max_users < self.start_users:
            raise UsageError(f"--max-users ({self.max_users}) is below --start-users ({self.start_users})")
        if self.spawn_rate <= 0:
            raise UsageError(f"the spawn rate must be more than 0, got {self.spawn_rate}")
        return self

    @property
    def steps(self) -> int:
        return (self.max_users - self.start_users) // self.step_users + 1

    @property
    def duration(self) -> float:
        return self.steps * self.step_seconds

    def users_at(self, elapsed: float) -> int | None:
        """Users to hold at `elapsed` seconds, or None when the schedule is over."""
        index = int(elapsed // self.step_seconds)
        if index >= self.steps:
            return None
        return self.start_users + index * self.step_users


def schedule_from_options(options) -> StepSchedule:
    return ShapeSettings.from_options(options).step_schedule()


class StepLoadShape(SmLocustShape):
    """Step load from `--start-users/--step-users/--step-seconds/--max-users`, optionally stopping at the knee."""

    use_common_options = True

    def start(self, settings: ShapeSettings) -> None:
        self.schedule = settings.step_schedule()
        self.search = settings.step_search()
        self.driver = SearchDriver(self.search, step_s=self.schedule.step_seconds,
                                   min_subwindow_s=self.report_period_s)
        self.measurements = self.driver.measurements

    def decide(self, now, seconds):
        decision = self.driver.tick(now, seconds)
        if decision.stop:
            return None
        return self.closed_loop(decision.users, self.schedule.spawn_rate)
