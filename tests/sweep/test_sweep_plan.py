"""`--plan` figures: each configuration's estimate (deploy + test + delete, priced), the totals,
the overlap's wall time and extra waiting, and the max_cost_usd cut; nothing is deployed."""

from __future__ import annotations

import pytest

from sm_locust.cli import main
from sm_locust.sweep.api import load_sweep, plan_lines, plan_totals
from sm_locust.sweep.load import LOCUST_OVERHEAD_S, PLATEAU_STEPS_GUESS
from tests.conftest import SAMPLE_PAYLOAD

EXAMPLE_ONE = """\
name: ranker-concurrency
deploy: local                  # the embedded endpoint, started per configuration
endpoint:                      # settings shared by every configuration (sm-locust serve's, in snake_case)
  service_time_ms: 40
grid:                          # every combination is one configuration
  max_concurrency: [2, 5]
load:                          # `sm-locust run` options in snake_case; default shape: plateau
  payload: body.json
  shape: plateau
objective:                     # what "best" means
  target_rps: 100
  slo_ms: 400
  percentile: 95
price_per_hour: 0.2            # or instance_type priced from the bundled table
"""


def workers(**extra) -> dict:
    spec = {"name": "workers", "deploy": "sagemaker",
            "endpoint": {"model_name": "my-model", "instance_type": "ml.c5.xlarge", "instance_count": 1},
            "grid": {"environment.SAGEMAKER_MODEL_SERVER_WORKERS": [1, 2, 4],
                     "instance_type": ["ml.c5.xlarge", "ml.c5.2xlarge"]},
            "load": {"payload": str(SAMPLE_PAYLOAD), "users": 2, "run_time": "8s"},
            "objective": {"target_rps": 50, "slo_ms": 500, "percentile": 95}}
    spec.update(extra)
    return spec


@pytest.mark.e2e
def test_example_one_plan(tmp_path, capsys):
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    (tmp_path / "sweep.yaml").write_text(EXAMPLE_ONE)
    assert main(["sweep", str(tmp_path / "sweep.yaml"), "--plan", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    test_s = PLATEAU_STEPS_GUESS * 30 + LOCUST_OVERHEAD_S  # the plateau search's guess at 30-s steps
    billed = 2.0 + test_s + 1.0  # local: ~2 s to start, ~1 s to stop
    assert ("[1] max_concurrency 2: sm-locust serve --workers 1 --threads 1 --max-concurrency 2 --service-time-ms 40 "
            "($0.200/h)") in out
    assert f"{billed / 3600:.3f} instance-hours, ${0.2 * billed / 3600:.4f}" in out
    assert "latency_slo_ms 400, slo_percentile 95, max_error_rate 0.01" in out  # the objective becomes the search's SLO
    assert not (tmp_path / "out").exists()


def test_sagemaker_plan_prices_each_instance_type():
    sweep = load_sweep(workers(), out="unused")
    test_s = 8 + LOCUST_OVERHEAD_S
    billed = 480 + test_s + 60
    small, big = sweep.estimates[1], sweep.estimates[2]
    assert small.billed_s == pytest.approx(billed) and small.instance_hours == pytest.approx(billed / 3600)
    assert small.usd == pytest.approx(0.204 * billed / 3600) and big.usd == pytest.approx(0.408 * billed / 3600)
    t = plan_totals(sweep)
    assert t["to_run"] == 6 and t["instance_hours"] == pytest.approx(6 * billed / 3600)
    assert t["usd"] == pytest.approx(3 * (0.204 + 0.408) * billed / 3600)
    assert t["wall_s"] == pytest.approx(6 * billed)
    lines = plan_lines(sweep)
    assert ("1 x ml.c5.2xlarge, clone of model my-model, environment SAGEMAKER_MODEL_SERVER_WORKERS=1 ($0.408/h)"
            in lines[2])
    total = next(line for line in lines if line.startswith("  total:"))
    assert total.startswith("  total: 6 to run (0 measured before, 0 over budget)") and "$0.28 (billed by AWS)" in total
    dearest = (3 * 0.408 + 0.204) * billed / 3600  # the confirmation's most: the 4 dearest measured again
    assert lines[-1].startswith("  confirmation: ") and f"${dearest:.2f} (" in lines[-1]


def test_overlap_shortens_the_wall_time_and_bills_the_waiting():
    sweep = load_sweep(workers(max_parallel_endpoints=3), out="unused")
    t = plan_totals(sweep)
    sequential = 6 * (480 + 14 + 60)
    assert t["wall_s"] < 0.5 * sequential
    waits = [sweep.estimates[i].wait_s for i in range(1, 7)]
    assert waits[0] == 0 and max(waits) > 0  # created early, billed while the tests before it run


def test_max_cost_usd_stops_before_the_estimate_passes_it():
    sweep = load_sweep(workers(max_cost_usd=0.1), out="unused")
    assert sweep.allowed == {1, 2}  # 0.031 + 0.063 = 0.094; the third would pass 0.1
    lines = plan_lines(sweep)
    assert "NOT RUN: max_cost_usd 0.1 would be passed" in lines[3]
    assert plan_totals(sweep)["over_budget"] == 4


def test_a_sagemaker_sdk_model_gives_the_shared_settings():
    class Model:  # the attributes sweep() reads from a sagemaker.model.Model
        image_uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ranker:1"
        model_data = "s3://bucket/model.tar.gz"
        role = "arn:aws:iam::123456789012:role/sagemaker"
        env = {"OMP_NUM_THREADS": "1"}

    spec = workers()
    del spec["endpoint"]["model_name"]
    sweep = load_sweep(spec, out="unused", model=Model())
    settings = sweep.configurations[0].settings
    assert settings["image"] == Model.image_uri and settings["role"] == Model.role
    assert settings["model_data_url"] == Model.model_data and settings["environment.OMP_NUM_THREADS"] == "1"
    assert "image 123456789012.dkr.ecr.us-east-1.amazonaws.com/ranker:1" in plan_lines(sweep)[1]


def test_a_run_time_too_short_for_a_useful_interval_is_noted_after_the_load():
    load = {"payload": str(SAMPLE_PAYLOAD), "users": 2, "run_time": "6s"}
    lines = plan_lines(load_sweep(workers(load=load), out="unused"))
    notes = [i for i, line in enumerate(lines) if line.startswith("  note: ")]
    assert len(notes) == 1 and lines[notes[0] - 1].startswith("  load per configuration: ")
    assert lines[notes[0]] == ("  note: load.run_time 6s leaves about 5 steady seconds per test: its 95 % rate "
                               "intervals rest on 2 batches (Student's t 12.7), so close configurations will tie; "
                               "9s or more gives at least 4 batches (t 3.18 or less)")
    long_enough = plan_lines(load_sweep(workers(load={**load, "run_time": "12s"}), out="unused"))
    assert not [line for line in long_enough if "note:" in line] and len(long_enough) == len(lines) - 1
