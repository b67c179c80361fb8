"""The report and compare on an LLM run: tokens/s, TTFT and ITL vs users, $ per 1M output tokens
(instance $/h / tokens/s), and nothing of it for a run without tokens."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.record.model import SustainablePoint
from sm_locust.report.cost import cost_per_million_tokens
from sm_locust.report.llm import llm_columns, llm_rows, llm_view, token_cost
from sm_locust.report.slos import RunSlos
from tests.conftest import SAMPLE_PAYLOAD, run_cli

SUMMARY = {
    "llm": {"output_tokens_per_s": 100.0, "ttft_p95_ms": 300.0, "itl_p95_ms": 40.0, "output_tokens": 5000},
    "steps": [{"users": 2, "llm": {"output_tokens_per_s": 80.0, "ttft_p95_ms": 200.0}},
              {"users": 4, "llm": {"output_tokens_per_s": 150.0, "ttft_p95_ms": 250.0, "itl_p95_ms": 30.0}},
              {"users": 8}],
}


def test_dollars_per_million_output_tokens():
    assert cost_per_million_tokens(1.212, 1, 253.678) == pytest.approx(1.212 / (253.678 * 3600) * 1e6)
    assert cost_per_million_tokens(2.0, 2, 0.0) is None


def test_token_figures_at_the_sustainable_point():
    view = llm_view(SUMMARY, SustainablePoint.make(users=4))
    assert view.point.output_tokens_per_s == 150.0 and view.where == "the step at 4 users"
    assert [s.users for s in view.steps] == [2, 4]
    assert llm_view(SUMMARY, SustainablePoint.make(users=16)).where == "the whole run"
    plateau = {**SUMMARY, "plateau": {"users": 4, "llm": {"output_tokens_per_s": 140.0}}}
    assert llm_view(plateau, SustainablePoint.make(users=4)).point.output_tokens_per_s == 140.0
    cost = token_cost({"price_per_hour_usd": 3.6, "instance_count": 2}, view)
    assert cost["usd_per_million_output_tokens"] == pytest.approx(3.6 * 2 / (150.0 * 3600) * 1e6)
    assert "usd_per_million_output_tokens" not in token_cost({"price_per_hour_usd": None}, view)
    assert llm_view({"steps": []}, None) is None and llm_columns({"steps": []}, None, {}) == {}
    assert llm_columns(SUMMARY, SustainablePoint.make(users=4), {})["itl_p95_ms"] == 30.0


def test_summary_rows_print_a_missing_token_figure_as_n_a_not_nan():
    summary = {"llm": {"output_tokens_per_s": float("nan"), "output_tokens": 5000},
               "steps": [{"users": 4, "llm": {"output_tokens_per_s": 150.0, "ttft_p95_ms": float("nan")}}]}
    rows = dict(llm_rows(llm_view(summary, SustainablePoint.make(users=4)), {"price_per_hour_usd": 3.6}))
    assert "nan" not in " ".join(rows.values())
    assert rows["Whole run (tokens)"].endswith("n/a output tokens/s")
    assert rows["Output tokens/s (the step at 4 users)"] == "150.0 tokens/s"
    assert rows["Time to first token p50 / p95 / p99"] == "n/a / n/a / n/a ms"
    assert rows["$ per 1M output tokens"].startswith("$6.67 ($3.600/h")


def test_the_llm_rows_lead_with_tokens_and_judge_ttft_and_itl_against_their_slos():
    summary = {"llm": {"output_tokens_per_s": 140.0},
               "steps": [{"users": 4, "llm": {"output_tokens_per_s": 150.0, "ttft_p50_ms": 200.0, "ttft_p95_ms": 900.0,
                                              "ttft_p99_ms": 1500.0, "itl_p50_ms": 30.0, "itl_p95_ms": 70.0,
                                              "itl_p99_ms": 90.0}}]}
    rows = llm_rows(llm_view(summary, SustainablePoint.make(users=4)), {"price_per_hour_usd": 3.6},
                    RunSlos(ttft_slo_ms=1000.0, itl_slo_ms=60.0, slo_percentile=95.0))
    assert [k for k, _ in rows][:4] == ["Output tokens/s (the step at 4 users)", "Time to first token p50 / p95 / p99",
                                        "Inter-token latency p50 / p95 / p99", "$ per 1M output tokens"]
    values = dict(rows)
    assert values["Time to first token p50 / p95 / p99"] == "200 / 900 / 1,500 ms; SLO 1000 ms: within (at p95)"
    assert values["Inter-token latency p50 / p95 / p99"] == "30.0 / 70.0 / 90.0 ms; SLO 60 ms: OVER (at p95)"
    assert values["$ per 1M output tokens"].startswith("$6.67 ($3.600/h")  # 3.6 $/h / (150 tokens/s x 3600) x 1M


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An LLM run and a plain run, 3 s each, side by side (nothing here is timed: the figures are only
    checked to be there, and only in the LLM run)."""
    from sm_locust.endpoint.server import LocalEndpoint

    root = tmp_path_factory.mktemp("llm-report")
    config = LlmConfig(max_sequences=4, step_ms=10.0, step_ms_per_seq=1.0)
    with LocalEndpoint(llm=config, log_path=root / "endpoint.log") as llm_ep, \
            LocalEndpoint(log_path=root / "plain.log") as plain_ep, ThreadPoolExecutor(2) as pool:
        llm = pool.submit(run_cli, "run", "--endpoint-name", "llm", "--endpoint-url", llm_ep.url, "--prompts",
                          "synthetic:50", "--llm-template", "messages", "--max-new-tokens", "16", "--stream", "true",
                          "-u", "2", "-r", "10", "-t", "3s", "--out", str(root / "llm"), "-q")
        plain = pool.submit(run_cli, "run", "--endpoint-name", "plain", "--endpoint-url", plain_ep.url, "--payload",
                            str(SAMPLE_PAYLOAD), "-u", "1", "-t", "3s", "--out", str(root / "plain"), "-q")
        for done in (llm.result(), plain.result()):
            assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.mark.e2e
def test_report_draws_tokens_and_prices_them(runs):
    result = run_cli("report", str(runs / "llm"), "--no-cloudwatch", "--price-per-hour", "1.5", "--instance-type",
                     "ml.g5.xlarge")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    page = (runs / "llm" / "report.html").read_text()
    assert 'id="fig-llm-tokens"' in page and 'id="fig-llm-latency"' in page and "$ per 1M output tokens" in page
    summary = json.loads((runs / "llm" / "summary.json").read_text())
    cost = summary["cost"]
    assert summary["llm"]["tokens_source"] == "server" and cost["output_tokens_per_s"] > 0
    assert cost["usd_per_million_output_tokens"] == pytest.approx(1.5 / (cost["output_tokens_per_s"] * 3600) * 1e6)
    plain = run_cli("report", str(runs / "plain"), "--no-cloudwatch", "--price-per-hour", "1.5")
    assert plain.returncode in (0, 1), plain.stdout + plain.stderr
    assert "fig-llm-tokens" not in (runs / "plain" / "report.html").read_text()
    assert "usd_per_million_output_tokens" not in json.loads((runs / "plain" / "summary.json").read_text())["cost"]


@pytest.mark.e2e
def test_compare_shows_token_columns_when_a_run_has_them(runs, tmp_path):
    result = run_cli("compare", str(runs / "llm"), str(runs / "plain"), "--out", str(tmp_path / "cmp"))
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: a 3-s plain run may have no clean step
    table = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert {"output_tokens_per_s", "ttft_p95_ms", "itl_p95_ms", "usd_per_million_output_tokens"} <= set(table.columns)
    assert table.loc[0, "output_tokens_per_s"] > 0 and pd.isna(table.loc[1, "output_tokens_per_s"])
    only_plain = run_cli("compare", str(runs / "plain"), "--out", str(tmp_path / "cmp2"))
    assert "output_tokens_per_s" not in pd.read_csv(tmp_path / "cmp2" / "compare.csv").columns, only_plain.stderr


STEP_INTERVALS = {"output_tokens_per_s": [140.0, 160.0], "ttft_p50_ms": [180.0, 230.0], "ttft_p95_ms": [800.0, 990.0],
                  "itl_p50_ms": [28.0, 33.0], "itl_p95_ms": [62.0, 81.0]}
INTERVAL_SUMMARY = {"llm": {"output_tokens_per_s": 140.0},
                    "steps": [{"users": 2, "llm": {"output_tokens_per_s": 80.0, "ttft_p95_ms": 200.0}},
                              {"users": 4, "llm": {"output_tokens_per_s": 150.0, "ttft_p50_ms": 200.0,
                                                   "ttft_p95_ms": 900.0, "itl_p50_ms": 30.0, "itl_p95_ms": 70.0,
                                                   "ci95": STEP_INTERVALS}}]}


def test_the_steps_token_intervals_reach_the_step_table_the_lead_rows_and_compare():
    """A step's `llm.ci95` shows beside its tokens/s, TTFT and ITL (`with_interval`'s wording); a step
    recorded without one (an older summary.json) shows the figure alone."""
    from sm_locust.report.render import steps_table

    view = llm_view(INTERVAL_SUMMARY, SustainablePoint.make(users=4))
    table = steps_table(pd.DataFrame({"users": [2, 4], "rps": [1.0, 2.0]}), view)
    rows = table.split("<tr>")[2:]
    assert "<td>80.0</td><td>200</td>" in rows[0]  # no interval recorded: the figure alone
    assert "<td>150.0 (±10.0)</td><td>900 [800, 990]</td><td>70.0 [62.0, 81.0]</td>" in rows[1]
    lead = dict(llm_rows(view, {}))
    assert lead["Output tokens/s (the step at 4 users)"] == "150.0 tokens/s (±10.0)"
    assert lead["Time to first token p50 / p95 / p99"] == "200 [180, 230] / 900 [800, 990] / n/a ms"
    columns = llm_columns(INTERVAL_SUMMARY, SustainablePoint.make(users=4), {})
    assert (columns["output_tokens_per_s_ci95_low"], columns["output_tokens_per_s_ci95_high"]) == (140.0, 160.0)
    assert (columns["itl_p95_ms_ci95_low"], columns["itl_p95_ms_ci95_high"]) == (62.0, 81.0)
    assert llm_columns(INTERVAL_SUMMARY, SustainablePoint.make(users=2), {})["ttft_p95_ms_ci95_low"] is None
