"""Clock-driven glue between a search and a once-a-second shape tick, still free of Locust.

`SearchDriver.tick(now, timeline)` holds each decided load until it is measured (`measure_step`),
feeds the step to the search and returns the next `Decision`. A step ends from `min_step_s` on as
soon as it is stable and `Search.undecided` is empty, at the latest at `step_s` (what is undecided
is recorded on it). Both limits count the timeline's seconds at the step's load, not wall time,
unless the timeline lags more than `TIMELINE_LAG_S`. A budget (`--max-duration`, `--max-invocations`)
is checked every tick on the step under way too: when it fires the step ends there (judged as
`finish` judges an outside stop), so a budget bounds the run. `ScheduleDriver` does the same for a clock-driven
load (`traffic.Schedule`): levels shorter than `MIN_LEVEL_S` fold into the next, and budgets are
checked during long levels. `finish(now, timeline, reason)` takes an outside stop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sm_locust.errors import UsageError
from sm_locust.measure.steady import (
    DEFAULT_WARMUP_FRACTION,
    DEFAULT_WARMUP_S,
    MIN_SUBWINDOW_S,
    StepMeasurement,
    measure_step,
)
from sm_locust.measure.timeline import Second
from sm_locust.plateau.search import Decision, ScheduleSearch, Search

DEFAULT_STEP_S = 30.0  # the longest a step is held (--step-seconds): 24 s after warm-up, 3 sub-windows of 8 s
DEFAULT_MIN_STEP_S = 10.0  # the shortest: 2 s warm-up, then 3 sub-windows of ~2.7 s (1-s samples)
MIN_LEVEL_S = 5.0  # ScheduleDriver: a level is judged on its own only if it lasted this long
BUDGET_CHECK_AFTER_S = 10.0  # ScheduleDriver: a running level is checked against budgets from then on
TIMELINE_LAG_S = 10.0  # SearchDriver: wall time decides when the timeline is this far behind
SAMPLE_SLACK_S = 1.0  # ... and one less than a sample behind counts as caught up (samples and ticks are not in phase)


def _window(timeline: Sequence[Second], start: float, now: float) -> list[Second]:
    return [s for s in timeline if start < s.t <= now + 1e-9]


class SearchDriver:
    """Runs `search` in steps of `min_step_s` to `step_s` seconds of wall time (until stable); `now` is
    the timeline's clock (epoch s). `min_step_s` None: fixed steps of `step_s`."""

    def __init__(
        self,
        search: Search,
        step_s: float = DEFAULT_STEP_S,
        *,
        min_step_s: float | None = None,
        warmup_s: float = DEFAULT_WARMUP_S,
        warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
        min_subwindow_s: float = MIN_SUBWINDOW_S,
    ):
        if not step_s > 0:
            raise UsageError(f"step duration {step_s!r} s must be > 0")
        if min_step_s is not None and not min_step_s > 0:
            raise UsageError(f"minimum step duration {min_step_s!r} s must be > 0")
        self.search = search
        self.step_s = float(step_s)
        self.min_step_s = self.step_s if min_step_s is None else min(float(min_step_s), self.step_s)
        self.warmup_s = warmup_s
        self.warmup_fraction = warmup_fraction
        self.min_subwindow_s = min_subwindow_s
        self.decision: Decision | None = None  # None until the first tick
        self.step_start = 0.0  # set by the first tick
        self.measurements: list[StepMeasurement] = []

    @property
    def spawn_rate(self) -> float | None:
        """Users per second to start the current step's users at; None: as fast as the shape starts any."""
        return None

    def restart_step(self, now: float) -> None:
        """The current load only really starts now (e.g. after the endpoint drained a backlog)."""
        self.step_start = now

    def _measure(self, seconds: Sequence[Second]) -> StepMeasurement:
        assert self.decision is not None  # measured only after the first tick decided a load
        return measure_step(
            seconds, mode=self.search.mode, load=self.decision.load,
            warmup_s=self.warmup_s, warmup_fraction=self.warmup_fraction, min_subwindow_s=self.min_subwindow_s,
        )

    def tick(self, now: float, timeline: Sequence[Second]) -> Decision:
        """The decision in force at `now`; moves to the next step once the current one is stable (after
        `min_step_s`) or has lasted `step_s`."""
        if self.decision is None:
            self.decision = self.search.first()
            self.step_start = now
            return self.decision
        if self.decision.stop:
            return self.decision
        fired = self._budget_now(now, timeline)
        if fired is not None:  # the step under way ends now: judged as it is when it lasted min_step_s
            return self.finish(now, timeline, fired)
        elapsed = now - self.step_start
        if elapsed < self.min_step_s - 1e-9:
            return self.decision
        seconds = _window(timeline, self.step_start, now)
        stuck = elapsed >= self.step_s + TIMELINE_LAG_S  # the timeline is far behind: wall time decides
        if not seconds and not stuck:  # the sampler has not caught up yet: hold the load a little longer
            return self.decision
        # The seconds the timeline holds at the load, ramping left out (Locust ramps down at the spawn
        # rate too), plus the part of a sample the tick is ahead of (under one sample: caught up). A
        # master appends each second ~4 s late, so this trails wall time there.
        held = sum(s.interval for s in seconds if not s.spawning)
        if seconds and not seconds[-1].spawning and now - seconds[-1].t < SAMPLE_SLACK_S:
            held += now - seconds[-1].t
        if stuck:
            held = max(held, self.step_s)
        if not seconds:
            return self.decision
        if held < self.min_step_s - 1e-9:
            return self.decision
        step = self._measure(seconds)
        undecided = self.search.undecided(step)
        if (not step.stable or undecided) and held < self.step_s - 1e-9:
            return self.decision  # not settled, or its figures decide nothing yet: hold on, up to step_s
        step.undecided = undecided  # what the budget left undecided: the verdict says so
        self.measurements.append(step)
        self.decision = self.search.feed(step)
        self.step_start = now
        return self.decision

    def _budget_now(self, now: float, timeline: Sequence[Second]) -> str | None:
        """A budget (`--max-duration`, `--max-invocations`) that fires on the steps judged so far plus the
        step under way as it stands (its figures as `measure_step` reads them), or None. Checked every
        tick: a budget bounds the run, not only the steps that end before it."""
        assert self.decision is not None
        if not self.search.budgets:
            return None
        seconds = _window(timeline, self.step_start, now)
        if not seconds:
            return None
        probe = measure_step(seconds, mode=self.search.mode, load=self.decision.load, warmup_s=self.warmup_s,
                             warmup_fraction=self.warmup_fraction, min_subwindow_s=self.min_subwindow_s)
        return self.search.budget_fired(probe)

    def finish(self, now: float, timeline: Sequence[Second], reason: str) -> Decision:
        """Stop from outside: judge the step under way if it lasted `min_step_s`, and stop with `reason`."""
        if self.decision is None:
            self.decision = self.search.first()
        if not self.decision.stop and self.step_start is not None and now - self.step_start >= self.min_step_s - 1e-9:
            seconds = _window(timeline, self.step_start, now)
            if seconds:
                step = self._measure(seconds)
                step.undecided = self.search.undecided(step)  # cut short: what it had not decided stays so
                self.measurements.append(step)
                self.decision = self.search.feed_final(step, reason)
        if not self.decision.stop:
            self.decision = self.search.halt(reason)
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
        self.start: float | None = None  # None until the first tick
        self.step_start = 0.0  # set by the first tick
        self.current: tuple[int, float] | None = None
        self.measurements: list[StepMeasurement] = []
        self.stop_reason: str | None = None
        self._checked = 0.0

    def _measure(self, seconds: Sequence[Second]) -> StepMeasurement:
        assert self.current is not None  # measured only after the first tick chose a level
        return measure_step(seconds, mode=self.search.mode, load=self.current[0],
                            warmup_s=self.warmup_s, warmup_fraction=self.warmup_fraction,
                            min_subwindow_s=self.min_subwindow_s)

    def _budget_check(self, now: float, timeline: Sequence[Second]) -> str | None:
        """A budget that fires on the level still running (checked every `min_level_s` after
        `BUDGET_CHECK_AFTER_S`); the level is then judged as it is and the pattern stops."""
        if now - self.step_start < BUDGET_CHECK_AFTER_S or now - self._checked < self.min_level_s:
            return None
        self._checked = now
        seconds = _window(timeline, self.step_start, now)
        if not seconds:
            return None
        step = self._measure(seconds)
        fired = self.search.budget_fired(step)
        if fired:
            self.measurements.append(step)
            self.search.feed_final(step, fired)
        return fired

    def finish(self, now: float, timeline: Sequence[Second], reason: str) -> None:
        """Stop from outside: judge the level under way if it lasted `min_level_s`, and stop with `reason`."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self.start is None or self.current is None:
            return
        seconds = _window(timeline, self.step_start, now) if now - self.step_start >= self.min_level_s else []
        if seconds:
            step = self._measure(seconds)
            self.measurements.append(step)
            self.search.feed_final(step, reason)
        else:
            self.search.halt(reason)

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
        if self.stop_reason is not None or self.current is None:
            return None
        level = self.schedule_at(now - self.start)
        if level is not None and level[0] == self.current[0]:
            fired = self._budget_check(now, timeline)
            if fired:
                self.stop_reason = fired
                return None
            return self.current
        if level is not None and now - self.step_start < self.min_level_s:
            self.current = level  # too short to judge alone: fold it into the next level
            self.search.retarget(level[0])
            return level
        seconds = _window(timeline, self.step_start, now)
        next_load = None if level is None else level[0]
        if seconds:
            step = self._measure(seconds)
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
        self._checked = now
        return level
