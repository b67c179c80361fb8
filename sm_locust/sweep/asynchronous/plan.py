"""What an async configuration's test runs: the `load:` section of an async sweep, as the async search
(`--shape async`) against the objective's time-to-result SLO (pure).

Each configuration is one `sm-locust run --shape async` (plateau/asyncsearch.py: open-loop rate steps of
`start_rps`, up to `max_rps`, until the backlog grows or the time to result breaks the SLO) with the
objective's `slo_ms` and `percentile` as `--time-to-result-slo-ms` and `--slo-percentile`. `load:` takes
`sm-locust run`'s options except those the search decides (`LOAD_KEYS_REFUSED`) and needs
`async_input_location` and `async_result` (`s3` or `sqs:QUEUE_URL`: the backlog is the calls waiting for
their results).
"""

from __future__ import annotations

import math

from sm_locust.sweep.load import LOCUST_OVERHEAD_S, PLATEAU_STEPS_GUESS, LoadPlan, parse_load
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.schema import SweepSpec

SHAPE = "async"
LOAD_KEYS_REFUSED = {
    "shape": "an async sweep's test is the async search (--shape async)",
    "users": "the async search sends at open-loop rates (start_rps, max_rps)",
    "target_rps": "the async search raises the rate itself (start_rps, max_rps); objective.target_rps is the "
                  "rate to serve",
    "traffic": "the async search raises the rate itself (start_rps, max_rps)",
    "traffic_pattern": "the async search raises the rate itself (start_rps, max_rps)",
    "time_to_result_slo_ms": "the time-to-result SLO is objective.slo_ms",
    "slo_percentile": "the SLO's percentile is objective.percentile",
    "repeat": "not for an async sweep (yet): the capacity is a bracket of rates, not a figure runs can average",
}


def async_load_plan(spec: SweepSpec) -> LoadPlan:
    """The async file's `load:` section checked and planned as the async search against the objective's SLO."""
    check = spec.check
    for key, why in LOAD_KEYS_REFUSED.items():
        if key in spec.load:
            raise check.error(f"load.{key}", f"{why}; leave it out")
    objective = spec.objective
    if objective.slo_ms is None:
        raise check.error("objective.slo_ms", "missing: an async sweep needs the time-to-result SLO (objective: "
                          "{slo_ms: 2000, percentile: 95}): a rate counts only when its time to result keeps it")
    if not spec.load.get("async_input_location"):
        raise check.error("load.async_input_location", "missing: the S3 object each InvokeEndpointAsync names as "
                          "its input (s3://bucket/key)")
    if spec.load.get("async_result") in (None, "none"):
        raise check.error("load.async_result", "missing: s3 or sqs:QUEUE_URL (the async search's backlog is the calls "
                          "waiting for their results)")
    given = {**spec.load, "shape": SHAPE, "time_to_result_slo_ms": float(objective.slo_ms),
             "slo_percentile": float(objective.percentile)}
    plan = parse_load(given, Objective(), source=spec.source, base_dir=spec.base_dir)
    return AsyncLoadPlan(plan.options, plan.given, plan.load, plan.shape, plan.shape_settings, plan.source)


class AsyncLoadPlan(LoadPlan):
    """`load:` of an async sweep: the plan's guess at one test is the search's steps, not a plateau's."""

    def expected_test_s(self) -> float:
        """The budget when given, else the steps to `max_rps` (at most `PLATEAU_STEPS_GUESS` of them: the search
        usually stops earlier) of `step_seconds` each."""
        s = self.shape_settings
        if s.max_duration_s:
            return float(s.max_duration_s) + LOCUST_OVERHEAD_S
        steps = min(PLATEAU_STEPS_GUESS, math.ceil(s.max_rps / s.start_rps))
        return steps * float(s.step_seconds) + LOCUST_OVERHEAD_S
