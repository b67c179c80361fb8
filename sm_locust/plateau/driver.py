"""Clock-driven glue between a search and a once-a-second shape tick, still free of Locust.

A Locust `LoadTestShape.tick()` is called about once a second and must answer the load to run
now. `SearchDriver.tick(now, timeline)` does the bookkeeping every shape would otherwise repeat:
hold each decided load for `step_s` seconds, then measure that step from the timeline's `Second`s
(ramping and warm-up dropped by `measure_step`), feed it to the search and return the next
`Decision`. The shape only translates a Decision into `(users, spawn_rate)` or a target rate.

`ScheduleDriver` is the same for a load that follows a clock instead of a search (an Inference
Recommender traffic pattern, `traffic.Schedule.at`): every user level is a step, judged by a
`ScheduleSearch` when the level ends; levels shorter than `MIN_LEVEL_S` are folded into the next
one (a ramp of one user per second is judged in `MIN_LEVEL_S` windows, not second by second).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sm_locust.errors import UsageError
from sm_locust.plateau.search import Decision, ScheduleSearch, _Search
from sm_locust.plateau.steady import (
    DEFAULT_WARMUP_FRACTION,
    DEFAULT_WARMUP_S,
    MIN_SUBWINDOW_S,
    StepMeasurement,
    measure_step,
)
from sm_locust.plateau.timeline import Second

DEFAULT_STEP_S = 30.0  # 20 % warm-up leaves 24 s: 3 stability sub-windows of 8 s (>= 2 worker reports each)
MIN_LEVEL_S = 5.0  # ScheduleDriver: a level is judged on its own only if it lasted this long


class SearchDriver:
    """Runs `search` in steps of `step_s` seconds of wall time; `now` is the timeline's clock (epoch s)."""

    def __init__(
        self,
        search: _Search,
        step_s: float = DEFAULT_STEP_S,
        *,
        warmup_s: float = DEFAULT_WARMUP_S,
        warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
        min_subwindow_s: float = MIN_SUBWINDOW_S,
    ):
        if not step_s > 0:
            raise UsageError(f"step duration {step_s!r} s must be > 0")
        self.search = search
        self.step_s = float(step_s)
        self.warmup_s = warmup_s
        self.warmup_fraction = warmup_fraction
        self.min_subwindow_s = min_subwindow_s
        self.decision: Decision | None = None
        self.step_start: float | None = None
        self.measurements: list[StepMeasurement] = []

    def restart_step(self, now: float) -> None:
        """The current load only really starts now (e.g. after the endpoint drained a backlog)."""
        self.step_start = now

    def tick(self, now: float, timeline: Sequence[Second]) -> Decision:
        """The decision in force at `now`; moves to the next step once the current one has lasted `step_s`."""
        if self.decision is None:
            self.decision = self.search.first()
            self.step_start = now
            return self.decision
        if self.decision.stop or now - self.step_start < self.step_s:
            return self.decision
        seconds = [s for s in timeline if self.step_start < s.t <= now + 1e-9]
        if not seconds:  # the sampler has not caught up yet: hold the load a little longer
            return self.decision
        step = measure_step(
            seconds, mode=self.search.mode, load=self.decision.load,
            warmup_s=self.warmup_s, warmup_fraction=self.warmup_fraction, min_subwindow_s=self.min_subwindow_s,
        )
        self.measurements.append(step)
        self.decision = self.search.feed(step)
        self.step_start = now
        return self.decision


class ScheduleDriver:
    """Plays `schedule_at(elapsed_s) -> (users, spawn_rate) | None` and judges each level with `search`."""

    def __init__(
        self,
        schedule_at: Callable[[float], tuple[int, float] | None],
        search: ScheduleSearch,
        *,
        min_level_s: float = MIN_LEVEL_S,
        warmup_s: float = DEFAULT_WARMUP_S,
        warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
        min_subwindow_s: float = MIN_SUBWINDOW_S,
    ):
        self.schedule_at = schedule_at
        self.min_subwindow_s = min_subwindow_s
        self.search = search
        self.min_level_s = float(min_level_s)
        self.warmup_s = warmup_s
        self.warmup_fraction = warmup_fraction
        self.start: float | None = None
        self.step_start: float | None = None
        self.current: tuple[int, float] | None = None
        self.measurements: list[StepMeasurement] = []
        self.stop_reason: str | None = None

    def tick(self, now: float, timeline: Sequence[Second]) -> tuple[int, float] | None:
        """The (users, spawn_rate) to run at `now`, or None once the schedule or a stop condition ended it."""
        if self.start is None:
            self.start = self.step_start = now
            self.current = self.schedule_at(0.0)
            if self.current is None:
                self.stop_reason = "empty traffic pattern"
                return None
            self.search.first()
            return self.current
        if self.stop_reason is not None:
            return None
        level = self.schedule_at(now - self.start)
        if level is not None and level[0] == self.current[0]:
            return self.current
        if level is not None and now - self.step_start < self.min_level_s:
            self.current = level  # too short to judge alone: fold it into the next level
            self.search.retarget(level[0])
            return level
        seconds = [s for s in timeline if self.step_start < s.t <= now + 1e-9]
        next_load = None if level is None else level[0]
        if seconds:
            step = measure_step(seconds, mode=self.search.mode, load=self.current[0],
                                warmup_s=self.warmup_s, warmup_fraction=self.warmup_fraction,
                                min_subwindow_s=self.min_subwindow_s)
            self.measurements.append(step)
            decision = self.search.follow(step, next_load)
            if decision.stop or level is None:
                self.stop_reason = decision.reason
                return None
        elif level is None:
            self.stop_reason = "traffic pattern finished"
            return None
        else:
            self.search.retarget(level[0])
        self.current = level
        self.step_start = now
        return level
