"""`load: {repeat: N}` in a sweep: each configuration's test N times, its figures from the median
run (one run's own steps), its capacity interval widened to the run-to-run one, a client-bound run
among them enough to measure it again; refused where a repetition needs a fresh deployment."""

from __future__ import annotations

import json

import pytest

from sm_locust.errors import UsageError
from sm_locust.record.repeat import REPEAT_JSON, repeat_document
from sm_locust.sweep.api import load_sweep, run_sweep
from tests.sweep_fakes import FakeDeployer, FakeRunner, fake_summary

CAPACITIES = {1: [100.0, 90.0, 110.0], 2: [60.0, 64.0, 62.0]}


class RepeatRunner(FakeRunner):
    """Writes run-1/ .. run-3/ and repeat.json as the runner does with `repeat: 3` (without Locust)."""

    bound: set[tuple[int, int]] = set()

    def run_configuration(self, i, d, run_dir):
        summaries, folders = [], []
        for k, capacity in enumerate(CAPACITIES[i], 1):
            summary = fake_summary(capacity)
            summary["plateau"].update(capacity_rps=capacity, capacity_step=0,
                                      capacity_ci95=[capacity - 1.0, capacity + 1.0])
            summary["steps"][0]["goodput_rps"] = capacity
            if (i, k) in self.bound:
                summary["verdict"] = {"status": "inconclusive", "reason": "client CPU 95 % >= 90 %"}
            folder = run_dir / f"run-{k}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "summary.json").write_text(json.dumps(summary))
            summaries.append(summary)
            folders.append(folder.name)
        (run_dir / REPEAT_JSON).write_text(json.dumps(repeat_document(summaries, folders)))


def repeat_sweep(tmp_path, bound=()):
    (tmp_path / "x.json").write_text("{}")
    sweep = load_sweep({"name": "rep", "grid": {"max_concurrency": [1, 2]}, "price_per_hour": 0.2, "report": False,
                        "load": {"payload": "x.json", "repeat": 3}, "objective": {"optimize": "throughput"}},
                       out=tmp_path / "sweep", base_dir=tmp_path)
    sweep.deployer = FakeDeployer(deploy_s=0.01)
    sweep.runner_class = type("Runner", (RepeatRunner,), {"bound": set(bound), "tested": []})
    return sweep


def test_the_median_run_is_quoted_and_the_interval_covers_the_runs(tmp_path):
    sweep = repeat_sweep(tmp_path)
    assert sweep.plan.repeat == 3 and sweep.plan.given["repeat"] == 3
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    first = result.document["configurations"][0]
    assert first["capacity_rps"] == 100.0  # run-1's: the median of 100, 90, 110
    assert first["repeat"]["quoted_run"] == "run-1" and first["repeat"]["capacity_values"] == [100.0, 90.0, 110.0]
    low, high = first["capacity_ci95"]
    assert low < 99.0 and high > 101.0  # the run-to-run interval of the mean (t(2) x sd / sqrt 3) is wider
    assert any("(run-1, the median of 3 runs: run to run 90.0..110.0 req/s)" in line for line in lines)
    marker = json.loads((sweep.out_dir / first["run_dir"] / "sweep_configuration.json").read_text())
    assert marker["result"] == REPEAT_JSON  # resume checks repeat.json


def test_one_client_bound_run_among_the_repeats_is_enough_to_measure_again(tmp_path):
    sweep = repeat_sweep(tmp_path, bound={(2, 2)})
    result = run_sweep(sweep, yes=True, printer=lambda line: None, handle_signals=False)
    row = result.document["configurations"][1]
    assert row["remeasured"]["first_reason"] == "run-2: client CPU 95 % >= 90 %"
    assert row["status"] == "inconclusive"  # the fake bounds run-2 every time


@pytest.mark.parametrize("kind, section", [
    ("autoscaling", {"autoscaling": {"min_instances": [1], "max_instances": 2, "target_value": 100},
                     "traffic": [{"duration_s": 60, "rps": 5}]}),
])
def test_repeat_is_refused_where_each_run_needs_a_fresh_deployment(tmp_path, kind, section):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(UsageError, match="load.repeat: not for an autoscaling sweep"):
        load_sweep({"name": "r", **section, "load": {"payload": "x.json", "repeat": 2}}, out=tmp_path / "s",
                   base_dir=tmp_path)


def test_repeat_must_be_a_whole_number(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(UsageError, match="load.repeat"):
        load_sweep({"name": "r", "grid": {"max_concurrency": [1]}, "load": {"payload": "x.json", "repeat": 0}},
                   out=tmp_path / "s", base_dir=tmp_path)
