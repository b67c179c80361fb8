"""Closed-loop theory for the plateau search: where the knee must be, from the steps already measured.

A closed loop holds N users; each sends its next request when the last one returned (plus any think
time Z). Little's law ties every step's figures together: N = X x (R + Z), X the throughput, R the
response time. Two bounds follow (the asymptotic bounds of operational analysis):

- below the knee requests do not queue, so a user's cycle R0 + Z is the same at every load and
  X grows linearly: X = N / (R0 + Z);
- past it the endpoint is busy all the time and X stays at its capacity C.

They meet at N* = C x (R0 + Z), the fewest users that can keep the endpoint busy: the knee. Every
step yields N / X, its cycle time; the smallest one is the unqueued cycle R0 + Z (think time
included, so nothing has to be known about the users). Once a step has saturated the endpoint, C
is measured too, and the knee is no longer a guess: `PlateauSearch` goes there and confirms it
instead of bisecting blindly. A real endpoint bends before the corner (variable service times
queue a little below the knee), so the model's answer is always confirmed by a step; when the
confirmation disagrees the search falls back to bisection.

Pure arithmetic on `StepMeasurement`s; tested with `synthetic.SyntheticEndpoint`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sm_locust.measure.steady import MODE_USERS, StepMeasurement

CYCLE_TOLERANCE = 0.05  # steps whose cycle is within 5 % of the shortest count as unqueued


def cycle_time_s(steps: Sequence[StepMeasurement]) -> float | None:
    """The unqueued cycle time R0 + Z (seconds per request per user), or None without a usable step.

    Each closed-loop step gives users / goodput. The shortest is unqueued, but a 1-user step holds
    few requests and reads a few % off; so every step within `CYCLE_TOLERANCE` of the shortest is
    pooled (total users / total goodput), which the larger, more precise steps dominate.
    """
    usable = [m for m in steps if m.mode == MODE_USERS and m.users > 0 and m.goodput_rps > 0]
    if not usable:
        return None
    shortest = min(m.users / m.goodput_rps for m in usable)
    unqueued = [m for m in usable if m.users / m.goodput_rps <= shortest * (1.0 + CYCLE_TOLERANCE)]
    return sum(m.users for m in unqueued) / sum(m.goodput_rps for m in unqueued)


@dataclass(frozen=True)
class ClosedLoopModel:
    """Throughput of a closed loop of `users`: min(users / cycle_s, capacity) (Little's law + capacity)."""

    capacity: float  # req/s the saturated endpoint sustains
    cycle_s: float  # unqueued cycle time R0 + Z, seconds

    @classmethod
    def from_steps(cls, steps: Sequence[StepMeasurement], capacity: float) -> ClosedLoopModel | None:
        cycle = cycle_time_s(steps)
        if cycle is None or not capacity > 0:
            return None
        return cls(capacity=float(capacity), cycle_s=cycle)

    @property
    def knee(self) -> float:
        """N* = C x (R0 + Z): where the two bounds meet."""
        return self.capacity * self.cycle_s

    def predict(self, users: float) -> float:
        return min(users / self.cycle_s, self.capacity)

    def users_reaching(self, fraction: float) -> int:
        """The fewest whole users the model says reach `fraction` of capacity (ceil(fraction x N*))."""
        return max(1, math.ceil(fraction * self.knee - 1e-9))
