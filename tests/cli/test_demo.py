"""`sm-locust demo` end to end: local endpoint -> moto CloudWatch stand-in -> step load -> report, so
the run folder holds summary.json's steps, report.html and CSVs with the endpoint's cw_* columns;
and without moto (it is only in the demo/test extras) the demo still runs and says in one line that
metrics are skipped."""

from __future__ import annotations

import csv
import json
import re
import sys

import pytest

from sm_locust.cli import demo
from tests.conftest import run_cli
from tests.starved import load_generator_verdict


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.e2e
def test_demo_writes_the_report_with_the_endpoints_cloudwatch_columns(tmp_path):
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out), "--step-seconds", "1", "--step-users", "3", "--max-users", "4",
                     timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"results in {out}" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    users = [s["users"] for s in summary["steps"]]  # the steps the search judged (a 1-s step too short to judge
    if load_generator_verdict(summary):  # is held once more), then any it did not
        # INCONCLUSIVE, verified: the search stopped at the load the generator could not drive, measured twice
        judged = [s for s in summary["steps"] if s.get("judged") is not False]
        assert users[0] == 1 and set(users) <= {1, 4}, summary["steps"]
        assert judged[-1]["client_bound"] and judged[-1]["measured_again"] == "client-bound", summary["steps"]
    else:
        assert users[0] == 1 and users[-1] == 4 and set(users) == {1, 4}
    assert summary["totals"]["requests"] > 0 and summary["totals"]["failures"] == 0
    # every step measured something (whether 4 users get more than 1 from the demo's endpoint in 1-s
    # steps depends on what else the machine runs: a plateau's growth is tested on a synthetic clock)
    assert all(s["rps"] > 0 and s["requests"] > 0 for s in summary["steps"])
    assert "CloudWatch stand-in (moto) on http://127.0.0.1:" in result.stdout
    # the search's verdict said once, among the demo's closing lines (the shape does not say it too)
    verdict = str((summary.get("plateau") or {}).get("text") or "").splitlines()
    assert verdict, summary.get("plateau")
    lines = result.stdout.splitlines()
    assert [line for line in lines if verdict[0] in line] == [f"sm-locust demo: {verdict[0]}"], result.stdout
    assert f"report in {out / 'report.html'}" in result.stdout
    assert "missing:" not in result.stdout, result.stdout  # every expected metric arrived, no minute left out
    assert re.search(r"UTC: Invocations +\d+  ModelLatency +\d+\.\d ms", result.stdout), result.stdout
    for name in ("report.html", "merged_timeseries.csv", "steps.csv", "summary.json"):
        assert (out / name).is_file(), name

    seconds = read_csv(out / "merged_timeseries.csv")
    # each CloudWatch minute's Invocations appear on every second of that minute: one value per minute
    per_minute = {int(row["epoch_s"]) // 60: float(row["cw_Invocations_sum_count"])
                  for row in seconds if row["cw_Invocations_sum_count"]}
    counted = int(re.search(r"the endpoint counted (\d+) requests", result.stdout).group(1))
    assert per_minute and sum(per_minute.values()) == counted  # the final flush left nothing behind
    latency = [float(r["cw_ModelLatency_avg_ms"]) for r in seconds if r["cw_ModelLatency_avg_ms"]]
    assert latency and all(20.0 <= v < 60.0 for v in latency)  # 20 ms service time, read back in ms
    assert any(float(r["cw_CPUUtilization_avg_pct"] or 0) > 0 for r in seconds)

    steps = read_csv(out / "steps.csv")
    assert [int(s["users"]) for s in steps] == users  # one row per summary.json step
    assert all(s["cw_ModelLatency_avg_ms"] and s["network_client_ms"] for s in steps)


@pytest.mark.e2e
def test_demo_without_moto_skips_cloudwatch_in_one_line(tmp_path):
    blocker = tmp_path / "no_moto"
    blocker.mkdir()
    (blocker / "moto.py").write_text("raise ImportError('moto is blocked for this test')\n")
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out), "--step-seconds", "1", "--max-users", "1", timeout=90,
                     env={"PYTHONPATH": str(blocker)})
    assert result.returncode == 0, result.stdout + result.stderr
    skipped = [line for line in result.stdout.splitlines() if "CloudWatch metrics skipped" in line]
    assert len(skipped) == 1 and "sm-locust[demo]" in skipped[0]
    assert (out / "report.html").is_file() and (out / "steps.csv").is_file()
    header = read_csv(out / "merged_timeseries.csv")[0]
    assert not [k for k, v in header.items() if k.startswith("cw_") and v]


def test_stand_in_choice(monkeypatch, capsys):
    assert demo.cloudwatch_stand_in(False) is None
    assert "skipped (--no-cloudwatch)" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "moto.server", None)  # importing it now raises ImportError
    assert demo.cloudwatch_stand_in(True) is None
    assert "moto is not installed" in capsys.readouterr().out
