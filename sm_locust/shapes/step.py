"""`StepLoadShape`: hold `start` users, add `step` users every `step_seconds`, up to `max_users`.

The classic ramp of the seeds, done in steps so each load level is held long enough to measure.
The schedule is a pure function of elapsed time (`step_users_at`); the shape only adapts it to
Locust's `tick()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from locust import LoadTestShape

from sm_locust.errors import UsageError


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
    return StepSchedule(
        start_users=int(getattr(options, "start_users", 1)),
        step_users=int(getattr(options, "step_users", 1)),
        step_seconds=float(getattr(options, "step_seconds", 30.0)),
        max_users=int(getattr(options, "max_users", 10)),
        spawn_rate=float(getattr(options, "spawn_rate", None) or 100.0),
    ).validate()


class StepLoadShape(LoadTestShape):
    """Step load from the `--start-users/--step-users/--step-seconds/--max-users` options."""

    use_common_options = True

    def tick(self):
        schedule = schedule_from_options(self.runner.environment.parsed_options)
        users = schedule.users_at(self.get_run_time())
        if users is None:
            return None
        return users, schedule.spawn_rate
