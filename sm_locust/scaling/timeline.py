"""The timelines an autoscaling test produces, in one unit both sides share: run seconds.

Why a module of its own: the local fleet emulation (`sm_locust/endpoint/fleet.py`), the DescribeEndpoint
poller (`sm_locust/scaling/aws.py`), the pure model (`policy.py`, `simulate.py`) and the figures
(`figures.py`) all speak about the same two series, and they must line up second for second:

- `InstanceSample(t_s, desired, in_service)`: the variant's DesiredInstanceCount and the instances
  serving (DescribeEndpoint's CurrentInstanceCount) at run second `t_s`. A timeline is a list of them
  in time order; a count holds until the next sample (a step function).
- `MetricPeriod(t_s, value)`: one datapoint of the scaling metric, for the period starting at `t_s`
  (InvocationsPerInstance per minute, or concurrent requests per instance); `value` None when the
  period had no data (SageMaker sends request metrics only for periods with requests).

`t_s` is seconds since the run started (summary.json `started_at`, the traffic's t = 0). Against the
local emulation they are *emulated* seconds: its clock runs `time_scale` times faster than the wall
clock (`RunClock` converts), so a 20-minute traffic pattern runs in 40 s and every figure still reads
as it would on SageMaker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class InstanceSample:
    """The instance counts at run second `t_s` (they hold until the next sample)."""

    t_s: float
    desired: int  # DesiredInstanceCount: what the scaling policy asked for
    in_service: int  # CurrentInstanceCount: instances serving requests

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> InstanceSample:
        return cls(float(data["t_s"]), int(data["desired"]), int(data["in_service"]))


@dataclass(frozen=True)
class MetricPeriod:
    """One datapoint of the scaling metric: the period [t_s, t_s + period) had `value` (None: no data)."""

    t_s: float
    value: float | None

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> MetricPeriod:
        value = data.get("value")
        return cls(float(data["t_s"]), None if value is None else float(value))


MAX_TIME_SCALE = 1000.0  # emulated seconds per real second: a 60-s metric period still spans 60 ms of real time


@dataclass(frozen=True)
class RunClock:
    """Wall clock <-> run seconds: run second 0 is epoch `started_at`; one real second is
    `time_scale` run seconds (1 on SageMaker, e.g. 30 on the local emulation)."""

    started_at: float
    time_scale: float = 1.0

    def run_s(self, epoch: float) -> float:
        return (epoch - self.started_at) * self.time_scale

    def epoch(self, run_s: float) -> float:
        return self.started_at + run_s / self.time_scale

    def real_s(self, run_s: float) -> float:
        """How long `run_s` run seconds last on the wall clock."""
        return run_s / self.time_scale


def compact(samples: Iterable[InstanceSample]) -> list[InstanceSample]:
    """Only the samples where a count changed (and the first): the step function, without the
    repeats a 10-s poller writes."""
    out: list[InstanceSample] = []
    for sample in sorted(samples, key=lambda s: s.t_s):
        if not out or (sample.desired, sample.in_service) != (out[-1].desired, out[-1].in_service):
            out.append(sample)
    return out


def counts_at(samples: Sequence[InstanceSample], t_s: float) -> InstanceSample | None:
    """The sample in force at run second `t_s` (the last one at or before it), None before the first."""
    found = None
    for sample in samples:
        if sample.t_s > t_s:
            break
        found = sample
    return found
