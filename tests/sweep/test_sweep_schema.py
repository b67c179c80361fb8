"""Bad input: one line `sm-locust: error: ...` naming the key's path, exit 2, nothing deployed."""

from __future__ import annotations

import pytest

from sm_locust.cli import main
from sm_locust.sweep.schema import apply_overrides
from tests.conftest import SAMPLE_PAYLOAD

GOOD = f"""\
name: t
endpoint: {{service_time_ms: 40}}
grid: {{max_concurrency: [2, 5]}}
load: {{payload: {SAMPLE_PAYLOAD}}}
objective: {{target_rps: 100, slo_ms: 400}}
price_per_hour: 0.2
"""


def error_of(tmp_path, capsys, text: str, *extra: str) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    code = main(["sweep", str(path), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("sm-locust: error: ") and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing deployed, not even a folder
    return err[len("sm-locust: error: "):]


@pytest.mark.e2e
def test_the_good_file_plans(tmp_path, capsys):
    (tmp_path / "sweep.yaml").write_text(GOOD)
    assert main(["sweep", str(tmp_path / "sweep.yaml"), "--plan"]) == 0
    assert "2 configurations on local" in capsys.readouterr().out


@pytest.mark.parametrize("change, message", [
    (("objective:", "objectiv:"), "objectiv: unknown key; valid keys: name, sweep_id"),
    (("slo_ms: 400", "slo: 400"), "objective.slo: unknown key; valid keys: target_rps, slo_ms, percentile"),
    (("grid: {max_concurrency: [2, 5]}", "grid: {}"), "grid: empty: give each setting to vary a list of values"),
    (("grid: {max_concurrency: [2, 5]}", "grid: {max_concurrency: []}"), "grid.max_concurrency: empty list"),
    (("grid: {max_concurrency: [2, 5]}", "grid: {max_concurrency: 2}"),
     "grid.max_concurrency: expected a list of values"),
    (("max_concurrency: [2, 5]", "max_concurency: [2, 5]"),
     "grid.max_concurency: the local deployer has no setting 'max_concurency'; valid: "),
    (("max_concurrency: [2, 5]", "max_concurrency: [2, five]"),
     "grid.max_concurrency: expected a whole number, got 'five'"),
    (("service_time_ms: 40", "service_time_ms: -4"),
     "configuration 'max_concurrency 2': --service-time-ms must be at least 0, got -4"),
    (("payload: ", "stepseconds: 3, payload: "), "load.stepseconds: unknown key; did you mean step_seconds?"),
    (("payload: ", "users: 3, shape: plateau, payload: "),
     "load.users conflicts with the plateau shape: the shape decides the load"),
    (("payload: ", "shape: zigzag, payload: "), "load.shape: unknown shape 'zigzag'"),
    (("payload: ", "endpoint_name: x, payload: "), "load.endpoint_name: set by the deployer"),
    ((f"payload: {SAMPLE_PAYLOAD}", "payload: missing.json"), "load: "),
    (("name: t", "name: t\ndeploy: k8s"), "deploy: unknown deployer 'k8s'; choose one of: local, sagemaker"),
    (("price_per_hour: 0.2", "instance_type: ml.nope.xlarge"),
     "instance type ml.nope.xlarge is not in the price table (bundled prices.json); give price_per_hour"),
    (("target_rps: 100, ", "target_rps: 100, percentile: 97, "),
     "objective.percentile: 97: runs record p50, p90, p95, p99 and p99.9"),
    (("name: t\n", ""), "name: missing"),
])
def test_bad_input_names_the_key(tmp_path, capsys, change, message):
    old, new = change
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    err = error_of(tmp_path, capsys, text)
    assert message in err
    assert err.startswith(str(tmp_path / "sweep.yaml"))


def test_invalid_yaml_says_where(tmp_path, capsys):
    err = error_of(tmp_path, capsys, "name: t\ngrid: {max_concurrency: [2, 5]\n")
    assert "not valid YAML (line 3" in err


@pytest.mark.e2e
def test_an_instance_type_missing_from_the_table_is_fine_with_a_price(tmp_path, capsys):
    text = GOOD.replace("price_per_hour: 0.2", "instance_type: ml.nope.xlarge\nprice_per_hour: 0.3")
    (tmp_path / "sweep.yaml").write_text(text)
    assert main(["sweep", str(tmp_path / "sweep.yaml"), "--plan"]) == 0
    assert "($0.300/h)" in capsys.readouterr().out


def test_sagemaker_settings_are_checked_before_anything_is_created(tmp_path, capsys):
    text = f"""name: sm
deploy: sagemaker
endpoint: {{model_name: m}}
grid: {{environment.OMP_NUM_THREADS: [1, 2], max_concurrency: [2]}}
load: {{payload: {SAMPLE_PAYLOAD}}}
"""
    message = "grid.max_concurrency: the sagemaker deployer has no setting 'max_concurrency'"
    assert message in error_of(tmp_path, capsys, text)
    text = text.replace(", max_concurrency: [2]", "")
    message = "endpoint.instance_type: missing; a SageMaker configuration needs an instance type"
    assert message in error_of(tmp_path, capsys, text)


def test_overrides():
    data = {"load": {"payload": "b.json"}, "grid": {"a": [1]}}
    out = apply_overrides(data, ["load.run_time=3s", "grid.environment.X=[1, 2]", "max_parallel_endpoints=2",
                                 "endpoint.environment.Y=4"], "f")
    assert out["load"] == {"payload": "b.json", "run_time": "3s"}
    assert out["grid"] == {"a": [1], "environment.X": [1, 2]}
    assert out["max_parallel_endpoints"] == 2 and out["endpoint"] == {"environment": {"Y": 4}}
    assert data["load"] == {"payload": "b.json"}  # the file's data is not modified
