"""A sweep under a traffic mix (sweep/realtime/mix.py): the grid varies the instance's memory and the mix.

Pure: each configuration's `--target-models` from its `zipf_s` / `model_count` and the `load:` mix,
the settings the deployer is given, the figures, the cost per model-month; mistakes named by key.
End to end: a local sweep over `instance_memory_mb` x `zipf_s` against the multi-model emulation:
more memory (or a more skewed mix) hits the cache more; sweep.json has `cache_hit_rate`,
`models_loaded`, `cold_p95_ms`, `cost_per_model_month` per configuration.
"""

from __future__ import annotations

import json

import pytest

from sm_locust.errors import UsageError
from sm_locust.sweep.realtime.mix import (
    configuration_mix,
    cost_per_model_month,
    deployer_settings,
    mix_figures,
    models_loaded,
    models_loaded_from_steps,
)
from tests.conftest import SAMPLE_PAYLOAD, run_cli


def where(key: str) -> str:
    return f"sweep.yaml: grid.{key}"


def test_each_configuration_gets_its_own_mix():
    assert configuration_mix({"zipf_s": 1.2, "model_count": 500}, None, where) == "zipf:1.2:500"
    assert configuration_mix({"zipf_s": 0.8}, "zipf:1.1:100", where) == "zipf:0.8:100"
    assert configuration_mix({"model_count": 50}, "zipf:1.1:100", where) == "zipf:1.1:50"
    assert configuration_mix({"model_count": 50}, "uniform:100", where) == "uniform:50"
    assert configuration_mix({"model_count": 50}, None, where) is None  # the endpoint's size only
    assert configuration_mix({"max_concurrency": 4}, "zipf:1.1:100", where) is None  # the load's mix as it is


@pytest.mark.parametrize(("settings", "load", "needle"), [
    ({"zipf_s": 1.1}, None, "grid.zipf_s: needs the number of models: add model_count"),
    ({"zipf_s": -1, "model_count": 5}, None, "grid.zipf_s: expected a number >= 0"),
    ({"zipf_s": 1, "model_count": 2.5}, None, "grid.model_count: expected a whole number of models"),
    ({"zipf_s": 1.0}, "a.tar.gz=1,b.tar.gz=2", "grid.zipf_s: varies a generated mix, but load.target_models is"),
    ({"zipf_s": 1.0}, "uniform:10", "grid.zipf_s: varies a generated mix"),
    ({"model_count": 3}, "zipf:1", "grid.model_count: load.target_models: --target-models 'zipf:1' is not"),
])
def test_a_mix_setting_that_cannot_work_is_one_line(settings, load, needle):
    with pytest.raises(UsageError, match=needle):
        configuration_mix(settings, load, where)


def test_the_deployer_gets_the_settings_it_knows():
    settings = {"zipf_s": 1.1, "model_count": 100, "instance_memory_mb": 2000}
    assert deployer_settings(settings, lambda: ["model_count", "instance_memory_mb"]) == {
        "model_count": 100, "instance_memory_mb": 2000}  # local: the emulation hosts model_count models
    assert deployer_settings(settings, lambda: ["instance_type"]) == {"instance_memory_mb": 2000}  # sagemaker

    def unasked() -> list[str]:
        raise AssertionError("known_keys asked without a mix key")

    assert deployer_settings({"max_concurrency": 2}, unasked) == {"max_concurrency": 2}


def test_figures():
    summary = {"model_cache": {"source": "endpoint", "hit_rate": 0.91, "hit_rate_ci95": [0.89, 0.93],
                               "cold": {"p95_ms": 620.0}}}
    assert mix_figures(summary) == {"cache_hit_rate": 0.91, "cache_hit_rate_ci95": [0.89, 0.93], "cold_p95_ms": 620.0}
    assert mix_figures({}) == {"cache_hit_rate": None, "cache_hit_rate_ci95": None, "cold_p95_ms": None}
    samples = [{"t": "10", "loaded_models": "18"}, {"t": "11", "loaded_models": "20"},
               {"t": "30", "loaded_models": "5"}, {"t": "12", "loaded_models": ""}]
    assert models_loaded(samples, 10, 12) == 19.0 and models_loaded(samples, None, 12) is None
    column = "cw_LoadedModelCount_avg_count"
    steps = [{"users": "4", column: "31.5"}, {"users": "8", column: ""}]
    assert models_loaded_from_steps(steps, 4) == 31.5 and models_loaded_from_steps(steps, 8) is None
    assert cost_per_model_month(0.5, 1000) == 0.365  # $0.50/h x 730 h / 1,000 models
    assert cost_per_model_month(None, 1000) is None and cost_per_model_month(0.5, None) is None


SWEEP = f"""\
name: mme-memory
endpoint: {{model_count: 60, model_size_mb: 100, model_download_ms: 5, model_load_ms: 10}}
grid:
  instance_memory_mb: [600, 3000]
  zipf_s: [0.6, 1.2]
load: {{payload: {SAMPLE_PAYLOAD}, users: 4, run_time: 2s, locust_args: [--stop-timeout, 5]}}
objective: {{slo_ms: 2000}}
price_per_hour: 0.5
"""


@pytest.mark.e2e
def test_a_local_sweep_over_memory_and_mix(tmp_path):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    plan = run_cli("sweep", "sweep.yaml", "--out", "out", "--plan", cwd=tmp_path, timeout=60)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "--multi-model --model-count 60" in plan.stdout and "target_models zipf:1.2:60" in plan.stdout
    result = run_cli("sweep", "sweep.yaml", "--out", "out", cwd=tmp_path, timeout=360)
    rows = {(c["settings"]["instance_memory_mb"], c["settings"]["zipf_s"]): c
            for c in json.loads((tmp_path / "out" / "sweep.json").read_text())["configurations"]}
    # a busy machine can make a configuration's client the bottleneck twice: INCONCLUSIVE, said, exit 1;
    # its figures are still recorded, and the cache relations below are the endpoint's, not the client's
    statuses = {c["status"] for c in rows.values()}
    assert len(rows) == 4 and statuses <= {"ok", "inconclusive"}, result.stdout + result.stderr
    assert result.returncode == (0 if statuses == {"ok"} else 1), result.stdout + result.stderr
    for (memory, s), c in rows.items():
        summary = json.loads((tmp_path / "out" / c["run_dir"] / "summary.json").read_text())
        assert summary["mix"]["spec"] == f"zipf:{s:g}:60"  # the configuration's own mix was sent
        assert c["cache_hit_rate"] == summary["model_cache"]["hit_rate"]
        assert c["cold_p95_ms"] >= 10  # a cold request waited at least the load
        assert c["cost_per_model_month"] == round(0.5 * 730 / 60, 6)
        assert 0 < c["models_loaded"] <= memory // 100
    for s in (0.6, 1.2):  # more memory: more models stay loaded, more hits
        assert rows[(3000, s)]["cache_hit_rate"] > rows[(600, s)]["cache_hit_rate"]
        assert rows[(3000, s)]["models_loaded"] > rows[(600, s)]["models_loaded"]
    assert rows[(600, 1.2)]["cache_hit_rate"] > rows[(600, 0.6)]["cache_hit_rate"]  # a skewed mix hits more
    page = (tmp_path / "out" / "sweep.html").read_text()
    assert "cache hit %" in page and "$ per model-month" in page
    header = (tmp_path / "out" / "sweep.csv").read_text().splitlines()[0].split(",")
    assert {"setting:zipf_s", "setting:instance_memory_mb", "cache_hit_rate", "models_loaded"} <= set(header)


@pytest.mark.e2e
def test_the_load_section_takes_a_mix_and_checks_it_before_anything_is_deployed(tmp_path):
    good = SWEEP.replace("run_time: 2s,", "run_time: 2s, target_models: 'zipf:0.9:60', seed: 3,")
    (tmp_path / "good.yaml").write_text(good)
    plan = run_cli("sweep", "good.yaml", "--out", "out", "--plan", cwd=tmp_path, timeout=60)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "target_models zipf:1.2:60" in plan.stdout and "target_models zipf:0.6:60" in plan.stdout  # S from the grid
    bad = SWEEP.replace("run_time: 2s,", "run_time: 2s, target_models: 'zipf:0.9',")
    (tmp_path / "bad.yaml").write_text(bad)
    result = run_cli("sweep", "bad.yaml", "--out", "out", "--plan", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "load.target_models: --target-models 'zipf:0.9' is not zipf:S:N" in result.stderr
