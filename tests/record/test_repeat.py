"""`--repeat N` / `load: {repeat: N}`: the run-to-run spread of each figure beside the within-run
interval (pure, synthetic summaries), the option's rule, and a short repeated run end to end."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from sm_locust.core.plan import plan_run
from sm_locust.errors import UsageError
from sm_locust.measure.uncertainty import t_quantile
from sm_locust.record.repeat import figure_of, median_run, repeat_document, repeat_lines, spread
from tests.conftest import SAMPLE_PAYLOAD, run_cli


def summary(p95: float, goodput: float, ci_p95=None, capacity=None, verdict="ok") -> dict:
    totals = {"requests": 700, "rps": goodput, "goodput_rps": goodput, "p50_ms": 40.0, "p95_ms": p95, "p99_ms": None,
              "ci95": {"p95_ms": ci_p95, "goodput_rps": [goodput - 1.0, goodput + 1.0]}}
    plateau = None if capacity is None else {"capacity_rps": capacity, "capacity_ci95": [capacity - 2, capacity + 2]}
    return {"totals": totals, "plateau": plateau, "verdict": {"status": verdict, "reason": None}}


def test_spread_is_the_sample_statistics_and_the_means_t_interval():
    values = [45.0, 48.0, 52.0, 47.0, 50.0]
    s = spread(values, [2.0, 3.0, 3.0, 4.0, 2.5])
    sd = statistics.stdev(values)
    assert s["mean"] == pytest.approx(48.4) and s["sd"] == pytest.approx(sd)
    half = t_quantile(4) * sd / math.sqrt(5)
    assert s["ci95"] == [pytest.approx(48.4 - half), pytest.approx(48.4 + half)]
    assert (s["min"], s["max"], s["within_run_half_width"]) == (45.0, 52.0, 3.0)
    assert s["spread_ratio"] == pytest.approx(sd / (3.0 / 1.959964))
    one = spread([45.0], [])
    assert one["sd"] is None and one["ci95"] is None and one["spread_ratio"] is None


def test_the_document_reads_each_runs_figure_and_interval_and_names_inconclusive_runs():
    runs = [summary(48.0, 45.0, [46.0, 51.0], capacity=100.0), summary(52.0, 43.0, None, capacity=96.0),
            summary(47.0, 46.0, [45.0, 49.0], capacity=104.0, verdict="inconclusive")]
    assert figure_of(runs[0], "p95_ms") == (48.0, [46.0, 51.0])
    assert figure_of(runs[1], "p95_ms") == (52.0, None)
    assert figure_of(runs[0], "capacity_rps") == (100.0, [98.0, 102.0])
    doc = repeat_document(runs, ["run-1", "run-2", "run-3"])
    assert doc["runs"] == 3 and doc["inconclusive_runs"] == ["run-3"]
    assert "p99_ms" not in doc["figures"]  # no run recorded one
    p95 = doc["figures"]["p95_ms"]
    assert p95["values"] == [48.0, 52.0, 47.0] and p95["within_run_half_width"] == 2.25  # median of 2.5 and 2.0
    assert median_run(doc) == 0  # capacities 100, 96, 104: run-1 is the median
    assert median_run({"figures": {"goodput_rps": {"values": [3.0, 1.0, 2.0, 4.0]}}}) == 2  # the lower middle
    lines = repeat_lines(doc)
    assert lines[0].startswith("throughput over 3 runs: 44.7 req/s (run to run 43.0..46.0, sd")
    assert any(line.startswith("p95 over 3 runs: 49 ms (run to run 47..52") and "within a run \u00b12 ms" in line
               for line in lines)
    assert lines[-1] == "INCONCLUSIVE runs (the load generator was the bottleneck): run-3"


def test_repeat_must_be_a_whole_number_of_runs():
    from sm_locust.api.options import run_arguments

    given = {"endpoint_name": "ep", "endpoint_url": "http://127.0.0.1:9", "payload": str(SAMPLE_PAYLOAD)}
    with pytest.raises(UsageError, match="--repeat must be at least 1"):
        plan_run(run_arguments({**given, "repeat": 0}, []))
    assert plan_run(run_arguments({**given, "repeat": None}, [])).repeat == 1


def test_each_repeat_prints_its_whole_verdict_sanitised(monkeypatch, tmp_path):
    # an INCONCLUSIVE run's why is the line under its totals: a repeat that printed only the first
    # line said "whole run: ..." and hid it
    from sm_locust.core import repeat as core_repeat
    from sm_locust.core.verdict import verdict_line
    from sm_locust.record.model import Summary
    inconclusive = summary(90.0, 40.0, verdict="inconclusive")
    inconclusive["verdict"]["reason"] = "the load generator was the bottleneck\x1b[2J"
    runs = iter([summary(80.0, 50.0), inconclusive])
    monkeypatch.setattr(core_repeat, "start_run", lambda one, echo=None, env=None: (one.out, Summary.of(next(runs))))
    from sm_locust.api.options import run_arguments
    planned = plan_run(run_arguments({"endpoint_name": "ep", "endpoint_url": "http://127.0.0.1:9", "repeat": 2,
                                      "payload": str(SAMPLE_PAYLOAD), "out": str(tmp_path / "reps")}, []))
    said: list[str] = []
    core_repeat.start_repeated(planned, say=said.append)
    second = [line for line in said if line.startswith("sm-locust: repeat 2 of 2: ") and not line.endswith("/")]
    assert len(verdict_line(inconclusive).splitlines()) == 2
    assert [line.split(": ", 2)[2][:40] for line in second] == [
        verdict_line(inconclusive).splitlines()[0][:40],
        "INCONCLUSIVE: the load generator was the"]
    assert "\x1b" not in "".join(said) and "\\x1b[2J" in second[1]  # the escape shown, not obeyed


@pytest.mark.e2e
def test_run_repeat_writes_each_run_and_the_spread(endpoint, tmp_path):
    out = tmp_path / "rep"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                     "-u", "2", "-r", "10", "-t", "2s", "-q", "--repeat", "2", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((out / "repeat.json").read_text())
    assert doc["runs"] == 2 and doc["folders"] == ["run-1", "run-2"]
    for name in doc["folders"]:
        assert (out / name / "summary.json").exists()
    assert len(doc["figures"]["rps"]["values"]) == 2
    assert "sm-locust: repeat 2 of 2: " in result.stdout and "throughput over 2 runs: " in result.stdout
    again = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                    "-u", "2", "-t", "2s", "--repeat", "2", "--out", str(out))
    assert again.returncode == 2 and "already holds repeated runs" in again.stderr
