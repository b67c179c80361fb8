"""The report's traffic-mix section (report/targets.py): the per-target table, cold vs warm, the cache over
time. Pure on synthetic summaries and frames; then end to end: a Zipf mix against the multi-model
emulation publishing to a CloudWatch API (conftest's moto server), and `sm-locust report` on the run folder
draws the cache's hit rate and loaded models per minute from CloudWatch.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sm_locust.endpoint.multimodel import MultiModelConfig
from sm_locust.report.cloudwatch import select_metrics
from sm_locust.report.sources import MetricRequest
from sm_locust.report.targets import FIG_ID, cache_minutes, mix_rows, target_view, targets_section
from tests.conftest import SAMPLE_PAYLOAD, run_cli

SUMMARY = {
    "totals": {"requests": 1000},
    "mix": {"field": "target_model", "spec": "zipf:1.1:300", "kind": "zipf", "targets": 300, "seed": 4},
    "targets": [{"name": "model-0001.tar.gz", "requests": 600, "failures": 1, "p50_ms": 9.0, "p95_ms": 12.0,
                 "p99_ms": 900.0, "cold": 1},
                {"name": "others", "targets": 212, "requests": 400, "failures": 0, "p50_ms": 11.0, "p95_ms": 800.0,
                 "p99_ms": 1200.0, "cold": 35}],
    "model_cache": {"source": "endpoint", "requests": 999, "hit_rate": 0.963964, "threshold_ms": None,
                    "cold": {"requests": 36, "p50_ms": 820.0, "p95_ms": 1100.0, "p99_ms": 1200.0, "wait_p50_ms": 800.0,
                             "wait_p95_ms": 1000.0},
                    "warm": {"requests": 963, "p50_ms": 10.0, "p95_ms": 13.0, "p99_ms": 20.0}},
}


def _div(fig, div_id: str) -> str:
    return f'<div id="{div_id}">{len(fig.data)} traces</div>'


def _missing(div_id: str, title: str, why: str) -> str:
    return f'<div id="{div_id}" class="missing">{title}: {why}</div>'


def test_the_section_shows_each_target_and_cold_vs_warm():
    seconds = pd.DataFrame({"epoch_s": [600.0, 601.0, 660.0, 661.0, 720.0],
                            "cw_ModelCacheHit_avg_pct": [80.0, 80.0, 95.0, 95.0, float("nan")],
                            "cw_LoadedModelCount_avg_count": [12.0, 12.0, 30.0, 30.0, float("nan")]})
    view = target_view(SUMMARY, seconds)
    assert [(p["hit_pct"], p["loaded"]) for p in view.minutes] == [(80.0, 12.0), (95.0, 30.0)]  # one per minute
    page = targets_section(view, _div, _missing)
    assert '<table id="targets">' in page and "others (212 targets)" in page and "60.0 %" in page  # share
    assert '<table id="model-cache">' in page and "Cache hit rate 96.4 % of 999" in page
    assert "marked each request that waited" in page and "800 / 1,000" in page  # the waits
    assert f'<div id="{FIG_ID}">2 traces</div>' in page
    measured = {**SUMMARY, "model_cache": {**SUMMARY["model_cache"], "hit_rate_ci95": [0.951, 0.977]}}
    page = targets_section(target_view(measured), _div, _missing)
    assert "Cache hit rate 96.4 % (±1.3) of 999" in page  # the hit rate with its 95 % interval
    assert ("Model cache hit rate", "96.4 % (±1.3) of 999 successful requests (36 cold)") in mix_rows(
        target_view(measured))


def test_what_the_section_says_when_figures_are_missing():
    assert target_view({"totals": {}}) is None and targets_section(None, _div, _missing) == ""
    unsplit = {**SUMMARY, "model_cache": {"source": "latency-modes", "requests": 999, "hit_rate": None,
                                          "threshold_ms": None, "cold": None, "warm": None}}
    page = targets_section(target_view(unsplit), _div, _missing)
    assert "Cold vs warm: not split" in page and f'id="{FIG_ID}" class="missing"' in page
    modes = {**SUMMARY, "model_cache": {**SUMMARY["model_cache"], "source": "latency-modes", "threshold_ms": 200}}
    assert "requests from 200 ms on are taken as cold" in targets_section(target_view(modes), _div, _missing)
    components = {key: value for key, value in SUMMARY.items() if key != "model_cache"}
    assert "Cold vs warm" not in targets_section(target_view(components), _div, _missing)
    assert cache_minutes(pd.DataFrame({"epoch_s": [1.0], "rps": [3.0]})) == []


def test_a_model_mix_asks_cloudwatch_for_the_mme_metrics():
    def names(**kw) -> set[str]:
        return {m.name for m in select_metrics(MetricRequest("ep", 0, 60, **kw))}

    assert {"ModelCacheHit", "LoadedModelCount"} <= names(multi_model=True)
    assert "ModelCacheHit" not in names() and "ModelCacheHit" not in names(multi_model=True, inference_component="a")


@pytest.mark.e2e
def test_the_report_draws_the_cache_from_cloudwatch(endpoint_factory, moto_url, tmp_path):
    ep = endpoint_factory(cloudwatch_url=moto_url, metrics_interval_s=1.0, endpoint_name="ep",
                          multi_model=MultiModelConfig(model_count=40, memory_mb=1000, download_ms=2, load_ms=5))
    out = tmp_path / "run"
    run = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                  "--target-models", "zipf:1.0:40", "-u", "2", "-r", "10", "-t", "3s", "--out", str(out), "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    ep.stop()  # published every second while it ran; stopping flushes the rest
    env = {"AWS_ENDPOINT_URL_CLOUDWATCH": moto_url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    report = run_cli("report", str(out), env=env)
    assert report.returncode in (0, 1), report.stdout + report.stderr  # 1: gaps (e.g. metrics a local run lacks)
    page = (out / "report.html").read_text()
    assert "<h2>Traffic mix</h2>" in page and '<table id="targets">' in page and '<table id="model-cache">' in page
    assert f'<div id="{FIG_ID}"' in page and f'id="{FIG_ID}" class="missing"' not in page  # drawn from CloudWatch
    steps = (out / "steps.csv").read_text().splitlines()[0]
    assert "cw_ModelCacheHit_avg_pct" in steps and "cw_LoadedModelCount_avg_count" in steps
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_cache"]["source"] == "endpoint"


def test_lora_adapters_show_ttft_cold_and_warm_per_target_and_overall():
    side = {"requests": 4, "p50_ms": 460.0, "p95_ms": 1700.0, "p99_ms": 2400.0}
    adapters = {"totals": {"requests": 50},
                "mix": {"field": "inference_component", "spec": "adapter-1=1,adapter-2=1", "kind": "list",
                        "targets": 2, "seed": 0},
                "targets": [{"name": "adapter-1", "requests": 30, "failures": 0, "p50_ms": 500.0, "p95_ms": 900.0,
                             "p99_ms": 950.0, "cold": 4, "ttft_cold": side,
                             "ttft_warm": {"requests": 26, "p50_ms": 68.0, "p95_ms": 76.0, "p99_ms": 80.0}},
                            {"name": "adapter-2", "requests": 20, "failures": 0, "p50_ms": 500.0, "p95_ms": 530.0,
                             "p99_ms": 540.0, "cold": 0, "ttft_cold": None,
                             "ttft_warm": {"requests": 20, "p50_ms": 66.0, "p95_ms": 72.0, "p99_ms": 74.0}}],
                "model_cache": {"source": "endpoint", "requests": 50, "hit_rate": 0.92, "threshold_ms": None,
                                "cold": {"requests": 4, "p50_ms": 910.0, "p95_ms": 2100.0}, "warm": {"requests": 46},
                                "ttft_cold": side, "ttft_warm": {"requests": 46, "p50_ms": 67.0, "p95_ms": 75.0}}}
    view = target_view(adapters)
    page = targets_section(view, _div, _missing)
    assert "<th>TTFT p95 cold ms</th><th>TTFT p95 warm ms</th>" in page
    assert "<td>1,700</td><td>76</td>" in page and "<td>n/a</td><td>72</td>" in page  # adapter-2: never cold
    assert "cold: time to first token" in page and "warm: time to first token" in page
    assert FIG_ID not in page  # CloudWatch's MME cache minutes do not apply to adapters
    rows = dict(mix_rows(view))
    assert rows["Cold vs warm TTFT p50 / p95"] == "cold 460 / 1,700 ms (4); warm 67 / 75 ms (46)"
    assert "Adapter cache hit rate" in rows and "Models loaded" not in rows
    assert "TTFT" not in "".join(dict(mix_rows(target_view(SUMMARY))))  # a model mix without streams: no row
