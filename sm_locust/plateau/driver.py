"""Clock-driven glue between a search and a once-a-second shape tick, still free of Locust.

A Locust `LoadTestShape.tick()` is called about once a second and must answer the load to run
now. `SearchDriver.tick(now, timeline)` does the bookkeeping every shape would otherwise repeat:
hold each decided load for `step_s` seconds, then measure that step from the timeline's `Second`s
(ramping and warm-up dropped by `measure_step`), feed it to the search and return the next
`Decision`. The shape only translates a Decision into `(users, spawn_rate)` or a target rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from sm_locust.errors import UsageError
from sm_locust.plateau.search import Decision, _Search
from sm_locust.plateau.steady import DEFAULT_WARMUP_FRACTION, DEFAULT_WARMUP_S, StepMeasurement, measure_step
from sm_locust.timeline import Second

DEFAULT_STEP_S = 30.0  # 20 % warm-up leaves 24 s: 3 stability sub-windows of 8 s (>= 2 worker reports each)


class SearchDriver:
    """Runs `search` in steps of `step_s` seconds of wall time; `now` is the timeline's clock (epoch s)."""

    def __init__(
        self,
        search: _Search,
        step_s: float = DEFAULT_STEP_S,
        *,
        warmup_s: float = DEFAULT_WARMUP_S,
        warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    ):
        if not step_s > 0:
            raise UsageError(f"step duration {step_s!r} s must be > 0")
        self.search = search
        self.step_s = float(step_s)
        self.warmup_s = warmup_s
        self.warmup_fraction = warmup_fraction
        self.decision: Decision | None = None
        self.step_start: float | None = None
        self.measurements: list[StepMeasurement] = []

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
            warmup_s=self.warmup_s, warmup_fraction=self.warmup_fraction,
        )
        self.measurements.append(step)
        self.decision = self.search.feed(step)
        self.step_start = now
        return self.decision
