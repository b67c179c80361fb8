"""Short load tests in this process: Locust's `Environment` with a local runner, the sm-locust
recorder (so the result is the same summary.json a real run writes) and the smoke gates.

Why in-process: a unit-test-sized load test (a few users for a few seconds against a local or
staging endpoint) should not need a Locust subprocess, a run folder or CSV parsing. This module
imports Locust (which patches gevent) at its top; `sm_locust.testing`, the pytest plugin every
test session loads, reaches it only when a test runs a load test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
from locust import task
from locust.env import Environment

from sm_locust.config.options import all_option_specs, namespace
from sm_locust.gates import evaluate
from sm_locust.gates.baseline import DEFAULT_TOLERANCE, regression_gates
from sm_locust.gates.cli import INCONCLUSIVE_CHOICES, closing_line
from sm_locust.gates.spec import GateSpec
from sm_locust.invocation import Invocation
from sm_locust.record.model import Summary
from sm_locust.record.recorder import RunRecorder, attach_recorder
from sm_locust.record.runfolder import RunData, load_run
from sm_locust.users import SageMakerUser


@dataclass
class LoadTestResult:
    """What an in-process run produced: summary.json's content and Locust's per-name stats."""

    summary: dict
    environment: object
    out_dir: Path | None = None

    @property
    def record(self) -> Summary:
        """summary.json's content as typed records (`sm_locust.record.model`)."""
        return Summary.of(self.summary)

    @property
    def totals(self) -> dict:
        """summary.json's `totals` object (`record.totals` typed)."""
        return self.record.totals.to_json()

    @property
    def requests(self) -> int:
        return int(self.record.totals.requests)

    @property
    def failures(self) -> int:
        return int(self.record.totals.failures)

    @property
    def errors(self) -> dict[str, int]:
        return dict(self.record.totals.errors or {})

    def run_data(self):
        """The gates' view: totals and exact per-name figures from the summary (as `sm-locust smoke` reads them)."""
        return RunData(run_dir=self.out_dir, summary=self.summary, source="in-process run")

    def check(self, *, max_p95_ms=None, max_p99_ms=None, max_error_rate=None, min_rps=None, min_requests: int = 1,
              baseline: LoadTestResult | str | Path | None = None, tolerance: float = DEFAULT_TOLERANCE):
        """Verdicts (pass / fail / inconclusive) for the limits given; each limit is a number or
        {request name: number}. `baseline`: an earlier result with a run folder (`out_dir`), or a run
        folder, to compare with as `sm-locust smoke --baseline` does."""
        spec = GateSpec(max_p95_ms=_as_values(max_p95_ms), max_p99_ms=_as_values(max_p99_ms),
                        max_error_rate=_as_values(max_error_rate), min_rps=_as_values(min_rps),
                        min_requests=min_requests)
        gates = spec.build()
        if baseline is not None:
            gates += regression_gates(_baseline_run(baseline), tolerance)
        return evaluate(gates, self.run_data())

    def assert_gates(self, *, inconclusive: str = "fail", **limits) -> None:
        """Raise AssertionError listing every gate that fails the test (see `check` for the limits); an
        inconclusive gate fails it too unless `inconclusive="pass"` (as `smoke --inconclusive pass`)."""
        if inconclusive not in INCONCLUSIVE_CHOICES:
            raise ValueError(f"inconclusive must be one of {INCONCLUSIVE_CHOICES}, got {inconclusive!r}")
        verdicts = self.check(**limits)
        failed = [v.line() for v in verdicts if v.fails(inconclusive == "pass")]
        if failed:
            raise AssertionError("load test gates failed:\n  " + "\n  ".join(failed) + "\n  "
                                 + closing_line(verdicts, inconclusive == "pass"))


def _baseline_run(baseline: LoadTestResult | str | Path) -> RunData:
    """An earlier in-process result (it needs its run folder) or a run folder, as the gates read it."""
    if isinstance(baseline, LoadTestResult):
        if baseline.out_dir is None:
            raise ValueError("the baseline result has no run folder: run it with out_dir (the sm_load_test fixture "
                             "sets one) so its per-second samples can be compared")
        return load_run(baseline.out_dir, role="baseline")
    return load_run(baseline, role="baseline")


def _as_values(limit) -> list[str]:
    if limit is None:
        return []
    if isinstance(limit, dict):
        return [f"{name}={value}" if name else str(value) for name, value in limit.items()]
    return [str(limit)]


def invoke_user(body: bytes | str, *, content_type: str = "application/json", name: str = "InvokeUser", **fields):
    """A SageMakerUser class that sends `body` over and over (endpoint from the run's options)."""
    invocation = Invocation(body=body.encode() if isinstance(body, str) else body, content_type=content_type, **fields)

    def invoke(self) -> None:
        self.client.invoke(invocation)

    return type(name, (SageMakerUser,), {"invoke_body": task(invoke), "__module__": __name__})


def options_namespace(options: dict | None = None) -> Any:
    """Every sm-locust option at its default, overridden by `options` (dest names)."""
    values = {spec.dest: spec.default for spec in all_option_specs()}
    unknown = sorted(set(options or {}) - set(values))
    if unknown:
        raise ValueError(f"unknown sm-locust option(s) {unknown}; use dest names such as endpoint_name, endpoint_url")
    values.update(options or {})
    return namespace(values)  # argparse.Namespace, as Locust's parsed_options


def run_load_test(user_classes: Sequence[type], *, users: int = 2, spawn_rate: float = 10.0, run_time_s: float = 3.0,
                  options: dict | None = None, out_dir: str | Path | None = None) -> LoadTestResult:
    """Run `users` users of `user_classes` for `run_time_s` seconds in this process; return the result.

    `options` are sm-locust options by dest name (`endpoint_name`, `endpoint_url`, `region`, ...);
    with `out_dir`, summary.json and timeline.jsonl are written there as in a real run.
    """
    if users < 1 or spawn_rate <= 0 or run_time_s <= 0:
        raise ValueError(f"users must be >= 1, spawn_rate and run_time_s > 0 (got {users}, {spawn_rate}, {run_time_s})")
    parsed = options_namespace(options)
    environment = Environment(user_classes=list(user_classes), parsed_options=parsed)
    recorder = RunRecorder(environment, out_dir, endpoint=parsed.endpoint_name)
    attach_recorder(environment, recorder)
    runner = environment.create_local_runner()
    try:
        runner.start(users, spawn_rate=spawn_rate)
        gevent.sleep(run_time_s)
    finally:
        runner.stop()
        runner.quit()
    return LoadTestResult(summary=recorder.summary(), environment=environment,
                          out_dir=Path(out_dir) if out_dir else None)
