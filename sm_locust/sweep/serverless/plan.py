"""What a serverless configuration's test runs: the `load:` section of a serverless sweep, and the
tests' phases (pure).

Stability and concurrency are one Locust run: the stability test (one caller at a time for
`load.run_time`), then one phase per concurrency multiplier (`multiplier x MaxConcurrency`
callers, back to back), as an Inference Recommender PHASES pattern (`--shape phases`) that never
stops early. The cold-start test follows: `cold_start.rounds` times, an idle gap longer than the
idle timeout, then the first requests together. `load:` takes `sm-locust run`'s options except
those the tests decide (`LOAD_KEYS_REFUSED`); its `run_time` is each phase's length. What a
configuration's tests ran and recorded is `serverless.json` in its run folder (`RESULTS`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.shapes.settings import parse_seconds
from sm_locust.sweep.load import LoadPlan, parse_load
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.serverless.measure import Phase, phase_samples
from sm_locust.sweep.serverless.spec import PREFIX, ServerlessSpec
from sm_locust.sweep.shortrun import ShortRun, Window, short_run

RESULTS = "serverless.json"  # in each configuration's run folder: the phases, the counters, the cold-start requests
DEFAULT_PHASE_S = 30.0  # each test phase, when load.run_time is not given
LOCUST_START_STOP_S = 6.0  # plan estimate: Locust's start and stop around the load run
COLD_ROUND_S = 2.0  # plan estimate: one cold-start round's requests, after its gap
LOAD_KEYS_REFUSED = {
    "users": "the serverless tests decide the users (1 caller for stability, multiplier x MaxConcurrency "
             "for concurrency)",
    "shape": "the serverless tests decide the load (stability, then one phase per concurrency multiplier)",
    "spawn_rate": "callers start at once in each phase",
    "target_rps": "the serverless tests run callers back to back, not an open-loop rate",
    "traffic_pattern": "the serverless tests build their own phases",
    "repeat": "not for a serverless sweep: its tests (cold starts, the concurrency phases) are its own; run it again",
}


@dataclass
class ServerlessLoadPlan(LoadPlan):
    """`load:` of a serverless sweep: the run options every test shares, and the tests' shapes."""

    serverless: ServerlessSpec = field(kw_only=True)
    phase_s: float = DEFAULT_PHASE_S
    deploy: str = "local"

    def phases(self, max_concurrency: int) -> list[Phase]:
        out = []
        if "stability" in self.serverless.tests:
            out.append(Phase("stability", 1, self.phase_s))
        if "concurrency" in self.serverless.tests:
            for m in self.serverless.multipliers:
                out.append(Phase("concurrency", max(1, round(m * max_concurrency)), self.phase_s, m))
        return out

    @staticmethod
    def traffic_pattern(phases: list[Phase]) -> str:
        """The phases as an Inference Recommender PHASES pattern (shape `phases`), never stopped early."""
        return json.dumps({"TrafficPattern": {"TrafficType": "PHASES", "Phases": [
            {"InitialNumberOfUsers": p.users, "SpawnRate": 0, "DurationInSeconds": math.ceil(p.duration_s)}
            for p in phases]}, "StoppingConditions": {"FlatInvocations": "Continue"}})

    def gap_s(self, settings: Mapping[str, object]) -> float:
        return self.serverless.cold_start.gap_for(self.deploy, self.serverless.idle_timeout_s(settings))

    def expected_test_s(self) -> float:
        phases = self.phases(1)
        seconds = sum(p.duration_s for p in phases) + (LOCUST_START_STOP_S if phases else 0.0)
        if "cold_start" in self.serverless.tests:
            gap = self.serverless.cold_start.gap_for(self.deploy,
                                                     self.serverless.idle_timeout_s(self.serverless.shared))
            seconds += self.serverless.cold_start.rounds * (gap + COLD_ROUND_S)
        return seconds

    def short_run(self) -> ShortRun | None:
        """The plan's note when each test phase (`run_time`) leaves the rate intervals too few steady
        seconds: the stability test's warm mean (its $ per 1M) over the whole phase, the concurrency
        phases' goodput after their warm-up (`measure.phase_samples`); cold starts are timed one by one."""
        windows = []
        if "stability" in self.serverless.tests:
            windows.append(Window("in the stability test", "warm-mean ($ per 1M)", lambda s: phase_samples(s)[0]))
        if "concurrency" in self.serverless.tests:
            windows.append(Window("per concurrency phase", "goodput", lambda s: phase_samples(s)[1]))
        return short_run(f"load.run_time {self.phase_s:g}s", self.phase_s, windows)


def serverless_load_plan(spec: SweepSpec) -> ServerlessLoadPlan:
    """The serverless file's `load:` section checked (the keys the tests decide refused) and planned."""
    assert isinstance(spec.section, ServerlessSpec)
    check = spec.check
    for key, why in LOAD_KEYS_REFUSED.items():
        if key in spec.load:
            raise check.error(f"load.{key}", f"{why}; leave it out")
    load = dict(spec.load)
    run_time = load.pop("run_time", None)
    try:
        phase_s = parse_seconds(run_time, "run_time") or DEFAULT_PHASE_S
    except UsageError as exc:
        raise check.prefixed("load.run_time", exc) from None
    base = parse_load({**load, "users": 1}, Objective(), source=spec.source, base_dir=spec.base_dir)
    given = {k: v for k, v in base.given.items() if k != "users"}
    given["run_time"] = f"{phase_s:g}s"
    return ServerlessLoadPlan(base.options, given, base.load, "phases", base.shape_settings, spec.source,
                              serverless=spec.section, phase_s=phase_s, deploy=spec.deploy)


def describe_tests(plan: ServerlessLoadPlan | None, settings: Mapping[str, Any]) -> str:
    """'; tests: stability 1 caller 30 s, x1 8 callers, ...' for `--plan` (empty without a plan)."""
    if plan is None:
        return ""
    mc = int(settings.get(f"{PREFIX}max_concurrency") or 1)
    parts = []
    for p in plan.phases(mc):
        parts.append(f"stability 1 caller {p.duration_s:g} s" if p.name == "stability" else
                     f"x{p.multiplier:g} {p.users} caller{'s' if p.users != 1 else ''}")
    if "cold_start" in plan.serverless.tests:
        cold = plan.serverless.cold_start
        parts.append(f"cold start {cold.rounds} x {cold.concurrency_for(mc)} after {plan.gap_s(settings):g} s idle")
    return "; tests: " + ", ".join(parts)


