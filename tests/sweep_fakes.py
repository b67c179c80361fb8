"""A sweep with a fake deployer and runner, shared by the sweep tests (no test module imports another):
`fake_sweep(tmp_path, count, max_parallel)` (a grid of `count` configurations whose deployer counts
the endpoints alive), `FakeRunner` (writes a summary.json per configuration without Locust) and
`fake_summary(rps)`."""

from __future__ import annotations

import json
import threading
import time

from sm_locust.sweep.api import load_sweep
from sm_locust.sweep.deployers import Deployer, DeployError
from sm_locust.sweep.runner import SweepRunner
from tests.conftest import SAMPLE_PAYLOAD


def fake_summary(rps: float) -> dict:
    step = {"users": 2, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:10Z", "rps": rps, "p50_ms": 20.0,
            "p90_ms": 25.0, "p95_ms": 30.0, "p99_ms": 40.0, "p99_9_ms": 45.0, "error_rate": 0.0}
    return {"schema": 1, "totals": {"requests": 100, "failures": 0, "rps": rps}, "steps": [step],
            "plateau": {"users": 2, "rps": rps, "p50_ms": 20.0, "p95_ms": 30.0, "p99_ms": 40.0, "error_rate": 0.0,
                        "text": f"plateau: {rps:.0f} req/s at 2 users"}}


class FakeDeployer(Deployer):
    """Counts endpoints alive (creation started, deletion not finished)."""

    name = "fake"

    def __init__(self, deploy_s=0.15, fail=()):
        self.alive = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.deploy_s = deploy_s
        self.fail = set(fail)

    def describe(self, settings):
        return "fake"

    def deploy(self, d, cancel, progress):
        with self.lock:
            self.alive += 1
            self.peak = max(self.peak, self.alive)
        d.created_at = time.time()
        time.sleep(self.deploy_s)
        if d.index in self.fail:
            raise DeployError("CreateEndpoint: ResourceLimitExceeded: account quota")

    def teardown(self, d, progress):
        time.sleep(0.05)
        with self.lock:
            self.alive -= 1
        d.deleted_at = time.time()
        return []


class FakeRunner(SweepRunner):
    tested: list[int]

    def run_configuration(self, i, d, run_dir):
        self.tested.append(i)
        time.sleep(0.05)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps(fake_summary(10.0 * i)))


def fake_sweep(tmp_path, count, max_parallel, **deployer_kw):
    sweep = load_sweep({"name": "fake", "grid": {"max_concurrency": list(range(1, count + 1))},
                        "max_parallel_endpoints": max_parallel, "price_per_hour": 0.2, "report": False,
                        "load": {"payload": str(SAMPLE_PAYLOAD)}}, out=tmp_path / "sweep")
    sweep.deployer = FakeDeployer(**deployer_kw)
    return sweep


