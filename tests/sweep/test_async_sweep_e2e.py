"""An async sweep end to end on 127.0.0.1: two configurations of the local async endpoint (`serve --async`,
a fixed fleet of 1 or 2 instances of one 100-ms worker each), moto as S3, each measured by the async search
against a p50 time-to-result SLO, priced, ranked and recommended, then resumed from its folder; relations,
never wall-clock bounds."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import moto_with_input
from tests.undecided import async_budget_verdict

pytestmark = pytest.mark.e2e  # a moto server, local endpoints and Locust

BUCKET = "async-sweep-kind"
PRICE = 0.23
ONE, TWO = "instance_count 1", "instance_count 2"


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    yield from moto_with_input(tmp_path_factory.mktemp("moto"), BUCKET, SAMPLE_PAYLOAD.read_bytes())


def sweep_text(s3_url: str) -> str:
    return (f"name: async-kind\ndeploy: local\n"
            f"endpoint: {{service_time_ms: 100, async_output_path: 's3://{BUCKET}/out', async_s3_url: '{s3_url}'}}\n"
            "async:\n  instance_count: [1, 2]\n  max_concurrent_invocations_per_instance: 1\n"
            f"load: {{payload: {SAMPLE_PAYLOAD}, async_input_location: 's3://{BUCKET}/in/request.json', "
            "async_result: s3, async_poll_ms: 40, start_rps: 4, max_rps: 16, step_seconds: 8}\n"
            f"objective: {{slo_ms: 1000, percentile: 50}}\nprice_per_hour: {PRICE}\n")


def test_the_sweep_measures_prices_and_ranks_each_fleet(moto, tmp_path):
    (tmp_path / "s.yaml").write_text(sweep_text(moto.url))
    r = run_cli("sweep", "s.yaml", "--out", "out", cwd=tmp_path, timeout=600, env=moto.env())
    assert r.returncode in (0, 1), r.stdout + r.stderr
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert document["kind"] == "async" and document["async"] == {
        "instance_count": [1, 2], "max_concurrent_invocations_per_instance": [1]}
    rows = {row["label"]: row for row in document["configurations"]}
    assert list(rows) == [ONE, TWO]
    for label, row in rows.items():
        assert row["status"] in ("ok", "inconclusive"), (label, row["status"], row["reason"])
        if row["inconclusive"]:  # its search could not decide: said in its run's record, and borne out by it
            summary = json.loads((tmp_path / "out" / row["run_dir"] / "summary.json").read_text())
            assert async_budget_verdict(summary), row
        if row["status"] != "ok":  # its search could not decide, or the load generator was the bottleneck twice
            assert row["inconclusive"] or row["client_bound"], row
            assert not row["meets_objective"] and row["lost_because"].startswith("INCONCLUSIVE"), row
            continue
        rates = [step["rate_rps"] for step in row["steps"]]
        assert rates and rates == [4.0 * k for k in range(1, len(rates) + 1)], rates  # the search's steps, in order
        assert row["accepted"] >= row["results"] + row["failures"] > 0
        capacity = row["capacity_rps"]
        if capacity is None:
            continue
        low, top = row["capacity_ci95"]
        assert low == capacity in rates and (top is None or top in rates and top > capacity)
        hours = row["instance_count"] / (capacity * 3600) * 1e6  # instance-hours per 1M at the capacity
        assert row["instance_hours_per_1m"] == pytest.approx(hours)
        assert row["cost_per_1m"] == pytest.approx(hours * PRICE)
        assert row["fleet_per_hour"] == pytest.approx(PRICE * row["instance_count"])
    one, two = rows[ONE], rows[TWO]
    if one["status"] == "ok" and one["capacity_rps"] is not None:
        assert one["capacity_rps"] < 12  # one 100-ms worker serves at most 10 results/s
    if all(r["status"] == "ok" and r["capacity_rps"] is not None and not r["inconclusive"] for r in (one, two)):
        # twice the workers is never shown slower: the rate that stopped the two-instance search lies above
        # what one instance was shown to keep (the shown capacities themselves may tie: a step whose backlog
        # the seconds could not decide counts toward neither)
        top = two["capacity_ci95"][1]
        assert top is None or top > one["capacity_rps"], (one["capacity_ci95"], two["capacity_ci95"])
    rec = document["recommendation"]
    if rec["index"] is not None:
        winner = document["configurations"][rec["index"] - 1]
        assert winner["status"] == "ok" and not winner["inconclusive"] and winner["meets_objective"]
        assert rec["label"] not in rec["inconclusive"]
        other = rows[TWO if rec["label"] == ONE else ONE]
        assert other["lost_because"], other
        assert ("TIES" in rec["reason"]) == bool(rec["tied_with"]), rec
    else:
        assert all(not r["meets_objective"] for r in rows.values())
    lines = (tmp_path / "out" / "sweep.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("index,label,status")
    assert "Async sweep async-kind" in (tmp_path / "out" / "sweep.html").read_text()
    assert "recommendation" in r.stdout
    # run again into the same folder: every configuration measured is read back, none deployed again
    again = run_cli("sweep", "s.yaml", "--out", "out", cwd=tmp_path, timeout=300, env=moto.env())
    assert again.returncode == r.returncode, again.stdout + again.stderr
    resumed = json.loads((tmp_path / "out" / "sweep.json").read_text())
    for before, after in zip(document["configurations"], resumed["configurations"], strict=True):
        if before["status"] == "ok":
            assert after["resumed"] and after["capacity_rps"] == before["capacity_rps"], after
    assert resumed["recommendation"]["reason"] == rec["reason"]
