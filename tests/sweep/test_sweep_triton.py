"""examples/sweeps/triton-bert.yaml, scaled down: the Triton article's tuning (dynamic batching x model
instances, BERT at 512 tokens, binary tensors, every answer validated) on `serve --protocol triton`.

The example as shipped finds each configuration's plateau (~6 minutes); this copy keeps its
endpoint settings, grid, payload and objective and gives each configuration 8 users for 2 s
instead, enough to order them: a batch of up to 16 rows holds an instance 40 ms x (1 + 0.1 per
extra row), so with 8 users waiting, batching serves several times what one row per pass does.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.conftest import ROOT, run_cli
from tests.starved import skip_if_the_load_generator_was_the_bottleneck

pytestmark = pytest.mark.e2e
EXAMPLE = ROOT / "examples" / "sweeps" / "triton-bert.yaml"


def test_the_triton_bert_sweep_ends_in_a_recommendation(tmp_path):
    spec = yaml.safe_load(EXAMPLE.read_text())
    assert spec["endpoint"]["protocol"] == "triton" and spec["load"]["serializer"] == "triton"
    assert spec["grid"] == {"max_batch_size": [1, 16], "max_concurrency": [1, 2]}
    for key in ("step_seconds", "max_users"):
        spec["load"].pop(key)
    spec["load"].update(users=8, run_time="2s")
    shutil.copy(EXAMPLE.parent / spec["load"]["payload"], tmp_path)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    result = run_cli("sweep", "sweep.yaml", "--out", "out", cwd=tmp_path, timeout=240)
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    skip_if_the_load_generator_was_the_bottleneck(doc, result)  # a starved machine: INCONCLUSIVE is right
    assert result.returncode == 0, result.stdout + result.stderr
    by_label = {c["label"]: c for c in doc["configurations"]}
    assert sorted(by_label) == ["max_batch_size 1, max_concurrency 1", "max_batch_size 1, max_concurrency 2",
                                "max_batch_size 16, max_concurrency 1", "max_batch_size 16, max_concurrency 2"]
    for c in by_label.values():
        assert c["status"] == "ok"
        summary = json.loads((tmp_path / "out" / c["run_dir"] / "summary.json").read_text())
        assert summary["totals"]["failures"] == 0 and summary["payload"]["validate_response"] is True
    base = by_label["max_batch_size 1, max_concurrency 1"]["capacity_rps"]
    assert by_label["max_batch_size 1, max_concurrency 2"]["capacity_rps"] > 1.5 * base  # two instances
    assert by_label["max_batch_size 16, max_concurrency 1"]["capacity_rps"] > 2 * base  # dynamic batching
    recommended = doc["recommendation"]["label"]
    assert recommended.startswith("max_batch_size 16")
    assert f"sm-locust sweep: recommendation: {recommended}" in result.stdout
