"""Pure load-search logic: steady-state step figures, stop conditions, plateau searches, IR traffic patterns.

Nothing here imports Locust, boto3, gevent or psutil, or does I/O: the Locust shapes and the CLI
(`sm_locust.shapes`, `sm_locust.cli`) are thin adapters that feed these objects with `Second`s
(`timeline.py`, filled by `sm_locust.record.recorder`) and act on their answers. See docs/plateau.md.
"""

from sm_locust.measure.steady import StepMeasurement, measure_step, measure_timeline, split_steps
from sm_locust.plateau.arrival import constant_arrivals, count_late, latency_from_intended_ms, poisson_arrivals
from sm_locust.plateau.conditions import (
    ErrorRate,
    LatencySLO,
    MaxDuration,
    MaxInvocations,
    MaxInvocationsPerMinute,
    MaxLoad,
    MaxRate,
    MaxUsers,
    ThroughputGain,
)
from sm_locust.plateau.driver import ScheduleDriver, SearchDriver
from sm_locust.plateau.model import ClosedLoopModel, cycle_time_s
from sm_locust.plateau.search import Decision, PlateauSearch, ScheduleSearch, StepSearch, Verdict
from sm_locust.plateau.traffic import Schedule, parse_traffic_pattern

__all__ = [
    "ClosedLoopModel", "Decision", "ErrorRate", "LatencySLO", "MaxDuration", "MaxInvocations",
    "MaxInvocationsPerMinute", "MaxLoad", "MaxRate", "MaxUsers", "PlateauSearch", "Schedule", "ScheduleDriver",
    "ScheduleSearch", "SearchDriver", "StepMeasurement", "StepSearch", "ThroughputGain", "Verdict",
    "constant_arrivals", "count_late", "cycle_time_s", "latency_from_intended_ms", "measure_step", "measure_timeline",
    "parse_traffic_pattern", "poisson_arrivals", "split_steps",
]
