"""Overlapped deployments: the pure scheduler never has more than max_parallel_endpoints alive,
overlap brings the wall time near the sum of the tests, and the real runner (threads, a fake
deployer) keeps the same bound."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from sm_locust.sweep.api import load_sweep
from sm_locust.sweep.pipeline import Durations, Pipeline, simulate
from tests.conftest import SAMPLE_PAYLOAD
from tests.sweep_fakes import FakeDeployer, FakeRunner, fake_sweep


def test_sequential_is_the_sum_of_everything():
    sim = simulate({i: Durations(600, 120, 60) for i in (1, 2, 3)}, max_alive=1)
    assert sim.wall_s == pytest.approx(3 * 780)
    assert sim.peak_alive == 1


@pytest.mark.parametrize("n", [2, 3, 4])
def test_overlap_never_exceeds_n_alive(n):
    sim = simulate({i: Durations(600, 120, 60) for i in range(1, 9)}, max_alive=n)
    assert sim.peak_alive == n
    alive = 0
    for _, what, _ in sim.events:  # replay: +1 when creation starts, -1 when deletion ends
        alive += {"deploy": 1, "deleted": -1}.get(what, 0)
        assert alive <= n


def test_enough_overlap_approaches_the_sum_of_the_tests():
    tests = 8 * 120
    slow = simulate({i: Durations(600, 120, 60) for i in range(1, 9)}, max_alive=1).wall_s
    fast = simulate({i: Durations(600, 120, 60) for i in range(1, 9)}, max_alive=7).wall_s
    assert fast < 0.3 * slow
    assert fast <= 600 + tests + 60 + 1  # one creation, the tests back to back, one deletion


def test_tests_run_one_at_a_time_and_failed_creations_are_deleted_without_a_test():
    durations = {1: Durations(10, 5, 1), 2: Durations(3, 5, 1, fails=True), 3: Durations(4, 5, 1)}
    sim = simulate(durations, max_alive=3)
    tests = [(t, i) for t, what, i in sim.events if what == "test"]
    assert [i for _, i in tests] == [3, 1]  # the first ready is tested first; 2 never
    assert ("deleted" in [w for _, w, i in sim.events if i == 2])
    starts = [t for t, _ in tests]
    assert starts[1] >= starts[0] + 5


def test_misuse_raises():
    p = Pipeline([1, 2], max_alive=1)
    assert p.deploys_to_start() == [1]
    p.start_deploy(1)
    assert p.deploys_to_start() == []
    with pytest.raises(RuntimeError):
        p.start_deploy(2)  # would be 2 alive
    with pytest.raises(RuntimeError):
        p.tested(1)  # not testing


def test_the_runner_keeps_the_bound_with_threads(tmp_path):
    sweep = fake_sweep(tmp_path, 6, 2, fail={3})
    runner = FakeRunner(sweep, printer=lambda line: None, handle_signals=False)
    runner.tested = []
    outcome = runner.run()
    assert sweep.deployer.peak == 2 and outcome.peak_alive == 2
    assert sweep.deployer.alive == 0
    assert [r["status"] for r in outcome.rows.values()] == ["ok", "ok", "failed", "ok", "ok", "ok"]
    assert outcome.rows[3]["reason"] == "CreateEndpoint: ResourceLimitExceeded: account quota"
    assert sorted(runner.tested) == [1, 2, 4, 5, 6]
    doc = sweep.document(outcome.rows, outcome)
    assert doc["recommendation"]["index"] == 6  # most headroom for the same price


SIGTERM_SCRIPT = """
import json, sys, threading, time
from sm_locust.sweep.api import load_sweep
from sm_locust.sweep.deployers import Cancelled, Deployer
from sm_locust.sweep.runner import SweepRunner

class Slow(Deployer):
    name = "slow"
    alive = peak = deleted = 0
    lock = threading.Lock()
    def describe(self, settings):
        return "slow"
    def deploy(self, d, cancel, progress):
        with self.lock:
            Slow.alive += 1
            Slow.peak = max(Slow.peak, Slow.alive)
        d.created_at = time.time()
        print("creating", d.index, flush=True)
        if cancel.wait(30):
            raise Cancelled("interrupted while creating")
    def teardown(self, d, progress):
        with self.lock:
            Slow.alive -= 1
            Slow.deleted += 1
        return []

sweep = load_sweep({"name": "term", "grid": {"max_concurrency": [1, 2, 3, 4]}, "max_parallel_endpoints": 2,
                    "report": False, "load": {"payload": sys.argv[1]}}, out=sys.argv[2])
sweep.deployer = Slow()
outcome = SweepRunner(sweep, printer=lambda line: None).run()
print(json.dumps({"signum": outcome.signum, "interrupted": outcome.interrupted, "alive": Slow.alive, "peak": Slow.peak,
                  "deleted": Slow.deleted, "statuses": sorted({r["status"] for r in outcome.rows.values()})}),
      flush=True)
"""


@pytest.mark.e2e
def test_sigterm_while_endpoints_are_created_deletes_them(tmp_path):
    """The runner's own handler (outside a test, where execute() forwards signals to Locust): a
    SIGTERM while two creations are in flight cancels them and deletes both."""
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(SAMPLE_PAYLOAD), str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("creating")
    proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"signum": signal.SIGTERM, "interrupted": True, "alive": 0, "peak": 2, "deleted": 2,
                      "statuses": ["interrupted"]}, err


def test_a_rerun_resumes_even_when_the_grid_grew(tmp_path):
    def run(grid):
        sweep = load_sweep({"name": "grow", "grid": grid, "report": False, "price_per_hour": 0.2,
                            "load": {"payload": str(SAMPLE_PAYLOAD)}}, out=tmp_path / "sweep")
        sweep.deployer = FakeDeployer(deploy_s=0.01)
        runner = FakeRunner(sweep, printer=lambda line: None, handle_signals=False)
        runner.tested = []
        return runner, runner.run()

    first, _ = run({"max_concurrency": [1], "workers": [1, 2]})
    assert first.tested == [1, 2]
    second, outcome = run({"max_concurrency": [1, 2], "workers": [1, 2]})  # the folder names change
    assert [r["resumed"] for r in outcome.rows.values()] == [True, True, False, False]
    assert second.tested == [3, 4]


class ScanningPipeline(Pipeline):
    """The scheduler's rules asked the slow, obvious way (every configuration scanned for each question):
    the reference the kept-up-to-date counts of Pipeline must agree with."""

    @property
    def alive(self) -> int:
        return sum(1 for s in self.state.values() if s in ("deploying", "ready", "testing", "deleting"))

    @property
    def finished(self) -> bool:
        return all(s == "done" for s in self.state.values())

    def deploys_to_start(self) -> list[int]:
        return self.in_state("waiting")[:max(0, self.max_alive - self.alive)]

    def next_test(self) -> int | None:
        if self.in_state("testing"):
            return None
        ready = self.in_state("ready")
        return ready[0] if ready else None


@pytest.mark.parametrize("max_alive", [1, 3, 7])
def test_the_kept_counts_schedule_exactly_as_scanning_would(max_alive, monkeypatch):
    """Was quadratic: `--plan` of a 10,000-configuration grid took ~70 s (bench/plan_scale.py)."""
    import random

    from sm_locust.sweep import pipeline as module

    rng = random.Random(7)
    durations = {i: Durations(rng.choice([30.0, 300.0, 600.0]), rng.choice([60.0, 120.0]), rng.choice([10.0, 60.0]),
                              fails=rng.random() < 0.1) for i in rng.sample(range(1000), 300)}
    fast = simulate(durations, max_alive)
    monkeypatch.setattr(module, "Pipeline", ScanningPipeline)
    slow = simulate(durations, max_alive)
    assert fast == slow and fast.peak_alive == max_alive


def test_a_marker_that_is_not_a_json_object_means_measure_again(tmp_path):
    from sm_locust.sweep.runner import MARKER, is_complete

    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / MARKER).write_text('["key", "ok"]')  # edited by hand, or another tool's file
    assert is_complete(tmp_path, "key") is False
    (tmp_path / MARKER).write_text('{"key": "key", "status": "ok"}')
    assert is_complete(tmp_path, "key") is True
