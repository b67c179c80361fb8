"""A Locust worker lost mid-run never lets a sweep rank a configuration on figures measured with fewer users
than asked: `trust.lost_worker_reason` reads summary.json `workers.lost` against the steps' ends, every kind's
`client_bound` reads it (realtime, async and autoscaling with the client-bound rule, serverless alone), and the
shared runner measures such a configuration again by itself, then INCONCLUSIVE naming the lost worker, never
recommended. Summaries are built by the recorder's own `build_summary`; deployers and runs are fakes."""

from __future__ import annotations

import json

import pytest

from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import Interval
from sm_locust.plateau.asyncsearch import AsyncRateSearch
from sm_locust.plateau.asyncslo import SloJudgement, TimeToResultSlo
from sm_locust.record.summary import LOST_WORKER_FIX, MISSING_SILENT_S, build_summary
from sm_locust.sweep.api import load_sweep, run_sweep
from sm_locust.sweep.runner import SweepRunner
from sm_locust.sweep.trust import WORKER_LOST, client_bound_reason, lost_worker_reason, untrusted_words
from tests.conftest import SAMPLE_PAYLOAD
from tests.sweep_fakes import FakeDeployer, fake_summary

T0 = 1_780_000_000.0  # the test's start; two steps of 20 s each: the first ends 20 s in, the second 40 s
LOST_IN_STEP_2 = [{"id": "host_4f0c", "reason": "missing", "after_s": 31.2}]
LATE = "13 % of sends were late (> 10 %)"


def seconds(bound_second_step: bool = False) -> list[Second]:
    return [Second(t=T0 + i + 1, users=2 if i < 20 else 4, spawning=False, requests=100, failures=0,
                   hist={20: 95, 40: 5}, client_cpu_pct=97.0 if bound_second_step and i >= 20 else None)
            for i in range(40)]


def summary(lost: list[dict], **extra: object) -> dict:
    """summary.json of a two-step distributed run with 2 workers, `lost` of them lost."""
    workers = {"expected": 2, "connected": 2, "at_end": 2 - len(lost), "lost": lost}
    return build_summary(endpoint="ep", started_at=T0, ended_at=T0 + 40, totals={"requests": 4000}, errors={},
                         seconds=seconds(), extra={"workers": workers, **extra})


# -- the rule (pure) ---------------------------------------------------------------------------------------------

def test_a_worker_lost_before_a_judged_step_ended_is_the_runs_own_verdict_reason():
    reason = lost_worker_reason(summary(LOST_IN_STEP_2))
    assert reason == summary(LOST_IN_STEP_2)["verdict"]["reason"]  # the run's verdict's own words
    assert reason.startswith("1 of 2 Locust workers lost (host_4f0c missing 31.2 s into the test) before step 2 ")
    assert reason.endswith(f"({LOST_WORKER_FIX})")
    assert lost_worker_reason(summary([])) is None
    assert lost_worker_reason(fake_summary(10.0)) is None  # not distributed: no `workers`
    after_the_end = [{"id": "w", "reason": "quit", "after_s": 41.0}]  # every judged step had ended
    assert lost_worker_reason(summary(after_the_end)) is None
    silent_in_step_2 = [{"id": "w", "reason": "missing", "after_s": 40.0 + MISSING_SILENT_S - 1}]
    assert "before step 2 (4 users) ended" in lost_worker_reason(summary(silent_in_step_2))


def test_without_step_ends_a_loss_before_the_runs_end_counts_and_one_after_it_does_not():
    def stepless(lost: list[dict]) -> dict:
        return {"schema": 1, "duration_s": 40.0, "steps": [{"users": 2}],
                "workers": {"expected": 3, "connected": 3, "at_end": 2, "lost": lost}}

    reason = lost_worker_reason(stepless([{"id": "w<b>", "reason": "quit", "after_s": 12.0}]))
    assert reason == ("1 of 3 Locust workers lost (w<b> quit 12.0 s into the test) before the run ended: its users "
                      f"stopped with it, so the run measured less load than asked ({LOST_WORKER_FIX})")
    assert lost_worker_reason(stepless([{"id": "w", "reason": "quit", "after_s": 40.5}])) is None
    assert lost_worker_reason(stepless([{"id": "w", "reason": "missing", "after_s": 43.0}])) is not None  # silent at 39
    assert "(w quit 0.0 s into the test)" in lost_worker_reason(stepless([{"id": "w", "reason": "quit"}]))


def test_the_client_bound_rule_reads_it_once_whatever_the_verdict_says():
    lost = summary(LOST_IN_STEP_2)
    reason = lost_worker_reason(lost)
    assert client_bound_reason(lost) == reason  # realtime and async: the verdict, not said twice
    assert client_bound_reason(lost, every_step=True) == reason  # autoscaling: without the verdict
    ok_verdict = {**lost, "verdict": {"status": "ok", "reason": None}}  # a writer that did not judge the loss
    assert client_bound_reason(ok_verdict) == reason
    assert client_bound_reason(summary([])) is None
    assert client_bound_reason(summary([]), every_step=True) is None
    bound = summary(LOST_IN_STEP_2)
    bound["steps"][1].update(client_bound=True, client_bound_reason=LATE)
    assert client_bound_reason(bound, every_step=True) == f"{reason}; step 2 (4 users): {LATE}"


def test_untrusted_words_name_the_lost_worker():
    reason = lost_worker_reason(summary(LOST_IN_STEP_2))
    assert untrusted_words(reason) == f"{WORKER_LOST}, so the endpoint was offered less load than asked"
    assert untrusted_words(reason, short=True) == WORKER_LOST
    assert untrusted_words(f"{reason}; step 2 (4 users): {LATE}").startswith(WORKER_LOST)
    assert "load generator" in untrusted_words(f"step 2 (4 users): {LATE}")


# -- every kind reads it (each sweep's own `client_bound`) -------------------------------------------------------

ASYNC = f"""\
name: async-lost
deploy: local
endpoint: {{service_time_ms: 200, async_output_path: 's3://demo/out', async_s3_url: 'http://127.0.0.1:9'}}
async:
  instance_count: [1, 2]
  max_concurrent_invocations_per_instance: 1
load: {{payload: {SAMPLE_PAYLOAD}, async_input_location: 's3://demo/in/request.json', async_result: s3,
        start_rps: 3, max_rps: 30, step_seconds: 5}}
objective: {{slo_ms: 1500, percentile: 95}}
price_per_hour: 0.23
report: false
"""
AUTOSCALING = f"""\
name: scaling
deploy: local
endpoint: {{service_time_ms: 40, max_concurrency: 4}}
autoscaling: {{min_instances: [1, 2], max_instances: 3, target_value: 4200, instance_start_s: 240, time_scale: 30}}
traffic: [{{duration_s: 300, rps: 20}}, {{duration_s: 600, rps: 150}}]
load: {{payload: {SAMPLE_PAYLOAD}}}
objective: {{slo_ms: 250, percentile: 95, max_breach_s: 0}}
price_per_hour: 0.23
"""
SERVERLESS = f"""\
name: sls
deploy: local
endpoint: {{service_time_ms: 60}}
serverless: {{memory_size_mb: [2048, 4096], max_concurrency: 2}}
tests: [stability, concurrency]
load: {{payload: {SAMPLE_PAYLOAD}, run_time: 6s}}
report: false
"""


def load_kind(tmp_path, kind: str):
    if kind == "realtime":
        return load_sweep({"name": "rt", "grid": {"max_concurrency": [1, 2]}, "price_per_hour": 0.2, "report": False,
                           "load": {"payload": str(SAMPLE_PAYLOAD)}}, out=tmp_path / "out")
    (tmp_path / "s.yaml").write_text({"async": ASYNC, "autoscaling": AUTOSCALING, "serverless": SERVERLESS}[kind])
    return load_sweep(str(tmp_path / "s.yaml"), out=tmp_path / "out")


@pytest.mark.parametrize("kind", ["realtime", "async", "autoscaling", "serverless"])
def test_every_kind_does_not_trust_a_run_that_lost_a_worker(tmp_path, kind):
    sweep = load_kind(tmp_path, kind)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps(summary([])))
    assert sweep.client_bound(run_dir) is None
    lost = summary(LOST_IN_STEP_2)
    (run_dir / "summary.json").write_text(json.dumps(lost))
    assert sweep.client_bound(run_dir) == lost_worker_reason(lost)
    # a client-bound step alone: judged by every kind but serverless (its own tests decide; a lost worker does not)
    bound = build_summary(endpoint="ep", started_at=T0, ended_at=T0 + 40, totals={"requests": 4000}, errors={},
                          seconds=seconds(bound_second_step=True),
                          extra={"workers": {"expected": 2, "connected": 2, "at_end": 2, "lost": []}})
    assert bound["steps"][1]["client_bound"] and bound["verdict"]["status"] == "inconclusive"
    (run_dir / "summary.json").write_text(json.dumps(bound))
    assert (sweep.client_bound(run_dir) is None) == (kind == "serverless")


# -- the runner: measured again by itself, then INCONCLUSIVE, never recommended (async, realtime) ----------------

SLO = TimeToResultSlo(95.0, 1500.0)


def async_summary(capacity_steps: int, lost: list[dict]) -> dict:
    """An async search at 3, 6, ... req/s, bounded and within the SLO for `capacity_steps` steps, then growing."""
    search = AsyncRateSearch(3.0, 3.0, 30.0, slo=SLO)
    for k in range(capacity_steps + 1):
        backlog = [2.0] * 12 if k < capacity_steps else [3.0 * i for i in range(12)]
        search.judge(backlog, SloJudgement(SLO, 400.0, Interval(350.0, 450.0), results=40, awaited=0))
    return summary(lost, async_search=search.as_dict(),
                   **{"async": {"accepted": 400, "results": 400, "failures": 0, "awaited_at_stop": 0,
                                "backlog_max": 30}})


class AsyncRunner(SweepRunner):
    """One instance shows 12 req/s (twice two instances' 6: cheaper per inference, the winner) but loses a
    worker in its first `lost_runs` measurements; two instances show 6 req/s with every worker."""

    lost_runs = 0
    tested: list[int]

    def run_configuration(self, i, d, run_dir):
        self.tested.append(i)
        run_dir.mkdir(parents=True, exist_ok=True)
        lost = LOST_IN_STEP_2 if i == 1 and self.tested.count(1) <= self.lost_runs else []
        (run_dir / "summary.json").write_text(json.dumps(async_summary(4 if i == 1 else 2, lost)))


def async_sweep(tmp_path, lost_runs: int):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "s.yaml").write_text(ASYNC)
    sweep = load_sweep(str(tmp_path / "s.yaml"), out=tmp_path / "out")
    sweep.deployer = FakeDeployer(deploy_s=0.01)
    sweep.runner_class = type("Runner", (AsyncRunner,), {"lost_runs": lost_runs, "tested": []})
    lines: list[str] = []
    return run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False), lines, sweep.runner_class


def test_an_async_configuration_that_lost_a_worker_twice_is_inconclusive_and_the_other_recommended(tmp_path):
    clean, _, _ = async_sweep(tmp_path / "clean", lost_runs=0)
    assert clean.document["recommendation"]["label"] == "instance_count 1"  # on figures from every worker: it wins
    result, lines, runner = async_sweep(tmp_path / "lost", lost_runs=2)
    assert runner.tested == [1, 2, 1]  # again by itself, after the other, once
    one, two = result.document["configurations"]
    assert one["status"] == "inconclusive" and two["status"] == "ok"
    assert one["reason"].startswith(f"{WORKER_LOST}, so the endpoint was offered less load than asked in both "
                                    "measurements (first: 1 of 2 Locust workers lost (host_4f0c missing 31.2 s")
    assert "its figures were measured with less load than asked: not ranked, not recommended" in one["reason"]
    rec = result.document["recommendation"]
    assert rec["label"] == "instance_count 2" and rec["inconclusive"] == ["instance_count 1"]
    assert f"chosen without instance_count 1: INCONCLUSIVE, {WORKER_LOST}" in rec["reason"]
    assert f"; {LOST_WORKER_FIX})" in rec["reason"]
    assert result.document["why_not"]["instance_count 1"].startswith(f"INCONCLUSIVE: {WORKER_LOST}")
    assert result.exit_code == 1
    assert any(f"NOT TRUSTED: {WORKER_LOST} (1 of 2 Locust workers lost" in line for line in lines)


def test_an_async_configuration_that_lost_a_worker_once_is_trusted_on_its_second_measurement(tmp_path):
    result, _, runner = async_sweep(tmp_path, lost_runs=1)
    assert runner.tested == [1, 2, 1]
    one = result.document["configurations"][0]
    assert one["status"] == "ok" and one["client_bound"] is None
    assert one["remeasured"]["first_reason"] == lost_worker_reason(async_summary(4, LOST_IN_STEP_2))
    assert result.document["recommendation"]["label"] == "instance_count 1" and result.exit_code == 0


def test_an_async_search_left_undecided_by_a_lost_worker_is_measured_again_not_taken_as_its_doubt(tmp_path):
    """The search's INCONCLUSIVE with a worker lost may be the loss's: measured again like any untrusted run."""
    search = AsyncRateSearch(3.0, 3.0, 30.0, slo=SLO)
    search.judge([2.0] * 12, SloJudgement(SLO, 400.0, Interval(350.0, 450.0), results=40, awaited=0))
    search.judge([2.0] * 12, SloJudgement(SLO, 1400.0, Interval(900.0, 2100.0), results=40, awaited=0), 2)
    undecided = summary(LOST_IN_STEP_2, async_search=search.as_dict())
    assert undecided["async_search"]["verdict"] == "INCONCLUSIVE"
    sweep = load_kind(tmp_path, "async")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    row = sweep.base_row(sweep.configuration(1))
    (run_dir / "summary.json").write_text(json.dumps(undecided))
    sweep.measure_row(1, run_dir, row)
    assert row.status != "inconclusive" and row.figures is not None and row.figures.inconclusive
    (run_dir / "summary.json").write_text(json.dumps({**undecided, "workers": None}))
    sweep.measure_row(1, run_dir, row)
    assert row.status == "inconclusive" and row.reason.startswith("its search could not decide")
