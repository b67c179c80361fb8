"""A short local sweep end to end: two configurations of the embedded endpoint, each a normal run
folder; sweep.json / sweep.csv / sweep.html; the recommendation; progress lines; no endpoint left
running; a rerun resumes (both configurations measured before, nothing deployed)."""

from __future__ import annotations

import csv
import json

import psutil
import pytest

from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.starved import skip_if_the_load_generator_was_the_bottleneck

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

SWEEP = f"""\
name: local-e2e
endpoint: {{service_time_ms: 40}}
grid: {{max_concurrency: [2, 5]}}
load: {{payload: {SAMPLE_PAYLOAD}, users: 6, run_time: 12s}}    # ~11 steady seconds: 5 batches for a rate's 95 %
# interval (t 2.78); 6 s left 5 seconds, 2 batches (t 12.7), and one second slowed by a client stall on a loaded CI
# machine (78 req/s of ~115) read max_concurrency 5's capacity as 103 [9.7, 197]: a tie the data could not break
objective: {{target_rps: 80, slo_ms: 400, percentile: 95}}
price_per_hour: 0.2
confirm: false    # one measurement each: the sentence and the resume below; confirmation: test_sweep_replicates.py
"""


def endpoints_running(out: str) -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if "serve" in (p.info["cmdline"] or []) and
            any(out in part for part in p.info["cmdline"] or [])]


def test_short_local_sweep_end_to_end_and_resume(tmp_path):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    r = run_cli("sweep", "sweep.yaml", "--out", "out", cwd=tmp_path, timeout=240)
    out = tmp_path / "out"
    doc = json.loads((out / "sweep.json").read_text())
    low, high = doc["configurations"]
    assert (low["label"], high["label"]) == ("max_concurrency 2", "max_concurrency 5")
    skip_if_the_load_generator_was_the_bottleneck(doc, r)  # a busy machine bottlenecked the client twice: said
    assert r.returncode == 0, r.stdout + r.stderr
    # capacity = slots / 40 ms: 50 and 125 req/s nominal; 6 users saturate both (a busy shared machine measures less)
    assert low["capacity_rps"] < 55 and high["capacity_rps"] < 130
    assert high["capacity_rps"] > 1.8 * low["capacity_rps"]
    assert low["instances_needed"] > high["instances_needed"] >= 1  # 2+ and 1 on a quiet machine, more on a busy one
    assert high["cost_per_1m"] < low["cost_per_1m"]
    assert high["cpu_pct"] is not None and high["memory_pct"] is not None  # sampled from the endpoint's processes
    assert doc["recommendation"]["label"] == "max_concurrency 5"
    assert low["capacity_ci95"] and high["capacity_ci95"]  # ranked on intervals, which do not overlap
    assert low["capacity_ci95"][1] < high["capacity_ci95"][0]
    assert doc["recommendation"]["reason"].startswith("max_concurrency 5: ")
    # the figure that decides is the first one whose intervals are apart: the fleet's $ per hour at 80 req/s
    # when the instances needed are apart (a quiet machine: 2+ against 1), else $ per 1M (a busy one read
    # 2 [2, 3] instances for max_concurrency 5, overlapping max_concurrency 2's)
    # (a loaded machine once read max_concurrency 2's p95 380 ms (±80) at 6 users, straddling the SLO: left out
    # as undecided, and the sentence says whether it could have won)
    fewer, more = high["instances_needed_ci95"], low["instances_needed_ci95"]
    reason = doc["recommendation"]["reason"]
    if "straddles the SLO" in doc["why_not"]["max_concurrency 2"]:
        assert "the only configuration known to meet the objective (max_concurrency 2's p95 " in reason, reason
        anyway = "straddles the SLO 400 ms, but it would lose on $ per hour at 80 req/s anyway: $"
        assert (anyway in reason) == (fewer[1] < more[0]), reason
    elif fewer[1] < more[0]:
        assert "cheaper at 80 req/s than max_concurrency 2" in reason
        assert doc["why_not"]["max_concurrency 2"].startswith(f"{low['instances_needed']} instances for 80 req/s cost")
    else:
        assert "$ per 1M decides (max_concurrency 5 " in reason, doc["recommendation"]
    assert doc["pareto"] == [2] or 2 in doc["pareto"]
    for c in (low, high):  # each configuration is a normal run folder, reported
        run = out / c["run_dir"]
        for name in ("summary.json", "options.json", "locust_stats.csv", "report.html", "endpoint_usage.csv",
                     "sweep_configuration.json"):
            assert (run / name).exists(), name
        assert c["curve"] and c["curve"][-1]["rps"] > 0
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["setting:max_concurrency"] for row in rows] == ["2", "5"]
    page = (out / "sweep.html").read_text()
    for marker in ('id="fig-sweep-curves"', 'id="fig-sweep-cost"', "Why the others lost", "max_concurrency 5: "):
        assert marker in page
    lines = r.stdout.splitlines()
    assert any(line.startswith("sm-locust sweep: [1/2] max_concurrency 2: ") and " at 6 users, p95 " in line
               for line in lines)
    assert any("[##########..........] 1/2 configurations" in line and "left" in line for line in lines)
    assert any(line.startswith("sm-locust sweep: recommendation: max_concurrency 5") for line in lines)
    assert not endpoints_running(str(out))

    measured = {c["run_dir"]: (out / c["run_dir"] / "summary.json").read_bytes() for c in (low, high)}
    again = run_cli("sweep", "sweep.yaml", "--out", "out", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stderr
    # resumed: both configurations taken from their complete run folders, neither measured again
    assert again.stdout.count("(measured before: run folder complete)") == 2, again.stdout
    assert {d: (out / d / "summary.json").read_bytes() for d in measured} == measured
    assert again.stdout.count("measured before: run folder complete") == 2
    assert "0 to run (2 measured before)" in again.stdout
    resumed = json.loads((out / "sweep.json").read_text())
    assert resumed["recommendation"]["label"] == "max_concurrency 5"
    assert [c["resumed"] for c in resumed["configurations"]] == [True, True]
