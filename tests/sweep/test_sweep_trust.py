"""Verdicts that never lie: a client-bound configuration is measured again by itself and, still bound,
INCONCLUSIVE (never ranked, never recommended, said loudly); configurations whose intervals overlap
on the deciding figure tie and the cheaper is picked; every line quotes one step's own figures."""

from __future__ import annotations

import json

import pytest

from sm_locust.sweep.api import load_sweep, run_sweep
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.realtime.rank import Candidate, recommend
from sm_locust.sweep.runner import FIRST_SUFFIX
from sm_locust.sweep.trust import (
    Criterion,
    client_bound_reason,
    deciding,
    overlap,
    rank_by_intervals,
    tie_note,
)
from sm_locust.util.formatting import with_interval
from tests.sweep_fakes import FakeDeployer, FakeRunner, fake_summary

LATE = "13 % of sends were late (> 10 %)"


def bound_summary(rps: float) -> dict:
    summary = fake_summary(rps)
    summary["steps"][0].update(client_bound=True, client_bound_reason=LATE)
    summary["verdict"] = {"status": "inconclusive", "reason": f"step 1 (2 users) was client-bound: {LATE}"}
    return summary


# -- client-bound, from summary.json (pure) -------------------------------------------------------

def test_the_runs_verdict_says_it_first():
    assert client_bound_reason(bound_summary(10.0)) == f"step 1 (2 users) was client-bound: {LATE}"
    assert client_bound_reason({**fake_summary(10.0), "verdict": {"status": "ok", "reason": None}}) is None


def test_an_older_summary_is_judged_on_the_steps_its_answer_rests_on():
    steps = [{"users": 1, "client_bound": True, "client_bound_reason": "client CPU 95 % >= 90 %"},
             {"users": 4, "client_bound": False}, {"users": 8, "client_bound": False}]
    plateau = {"users": 4, "rps": 80.0, "capacity_step": 2, "knee_step": 1}
    assert client_bound_reason({"steps": steps, "plateau": plateau}) is None  # step 1 decides nothing
    steps[2]["client_bound"], steps[2]["client_bound_reason"] = True, LATE
    assert client_bound_reason({"steps": steps, "plateau": plateau}) == f"step 3 (8 users): {LATE}"
    assert client_bound_reason({"steps": steps, "plateau": None}).startswith("step 1 (1 users): client CPU")


def test_an_autoscaling_run_counts_every_step_and_the_seconds_over_the_slo_the_client_caused():
    steps = [{"users": 2, "target_rate": 20.0}, {"users": 15, "target_rate": 150.0, "client_bound": True,
                                                 "client_bound_reason": LATE}]
    ok = {"verdict": {"status": "ok", "reason": None}, "steps": steps[:1],
          "autoscaling": {"slo_breach_s": 400.0, "breach_client_bound_s": 0.0}}
    assert client_bound_reason(ok, every_step=True) is None
    late = {**ok, "steps": steps}  # nothing says what was sent: the endpoint may have been let off
    assert client_bound_reason(late, every_step=True) == f"step 2 (150 req/s offered): {LATE}"
    short = {**ok, "steps": [steps[0], {**steps[1], "sent_rps": 120.0}]}
    assert client_bound_reason(short, every_step=True) == (
        f"step 2 (150 req/s offered): {LATE} (sent 120.0 of 150 req/s: the endpoint was offered less than the "
        "traffic)")
    # late sends that caught up only add latency: a run within its SLO in spite of them stands, even when
    # the run's own verdict (which knows no objective) said inconclusive
    caught_up = {**ok, "steps": [steps[0], {**steps[1], "sent_rps": 149.0}],
                 "verdict": {"status": "inconclusive",
                             "reason": f"step 2 (150 req/s offered) was client-bound: {LATE}"},
                 "autoscaling": {"slo_breach_s": 0.0, "breach_client_bound_s": 0.0}}
    assert client_bound_reason(caught_up, every_step=True) is None
    assert client_bound_reason(caught_up) is not None  # a run without the objective keeps its verdict
    real = {**ok, "autoscaling": {"slo_breach_s": 400.0, "breach_client_bound_s": 120.0}}
    assert client_bound_reason(real, every_step=True) is None  # 280 s over the SLO the endpoint made on its own
    behind = {**ok, "autoscaling": {"slo_breach_s": 120.0, "breach_client_bound_s": 120.0}}
    assert client_bound_reason(behind, every_step=True) == (
        "120 s of the 120 s over the SLO came while the load generator was behind (late sends, a saturated or "
        "starved client CPU), and without them the run is within max_breach_s 0")
    assert client_bound_reason(behind, every_step=True, max_breach_s=200.0) is None  # within the budget anyway
    assert client_bound_reason(behind) is None  # a real-time run does not read it


# -- ties (pure) --------------------------------------------------------------------------------------

def test_overlap():
    assert overlap((1, 3), (3, 5)) and overlap((1, 5), (2, 3)) and not overlap((1, 2), (2.5, 3))
    assert not overlap(None, (1, 2))


def candidate(index, capacity, ci, price, latency=40.0, ci_latency=None):
    return Candidate(index, f"c{index}", capacity_rps=capacity, capacity_ci95=ci, knee_users=4, latency_ms=latency,
                     latency_ci95=ci_latency, error_rate=0.0, price_per_hour=price)


def test_overlapping_throughput_ties_and_the_cheaper_to_run_is_recommended():
    objective = Objective(slo_ms=100, optimize="throughput")
    dear, cheap, far = (candidate(1, 121.0, [115.0, 127.0], 0.46), candidate(2, 118.0, [112.0, 124.0], 0.23),
                        candidate(3, 80.0, [78.0, 82.0], 0.10))
    rec = recommend([dear, cheap, far], objective)
    assert rec.winner is cheap and rec.tied == [1]
    assert ("it TIES with c1 on throughput (95 % intervals overlap: c1 121 req/s (±6) vs c2 118 req/s "
            "(±6))") in rec.reason
    assert "the cheaper to run is recommended ($0.230/h vs $0.460/h)" in rec.reason
    assert rec.lost[1] == "ties with c2 on throughput; c2 costs less to run"
    assert rec.lost[3] == "80 req/s (±2) vs 118 req/s (±6)"


def test_without_prices_a_tie_keeps_the_higher_point_and_says_so():
    a, b = candidate(1, 121.0, [115.0, 127.0], None), candidate(2, 118.0, [112.0, 124.0], None)
    rec = recommend([b, a], Objective(optimize="throughput"))
    assert rec.winner is a and "TIES with c2" in rec.reason and "no price tells the cheaper" in rec.reason
    assert "no price tells them apart" in rec.lost[2]


def test_separate_intervals_rank_by_the_figure_and_no_interval_is_a_tie():
    a, b = candidate(1, 121.0, [119.0, 123.0], 0.46), candidate(2, 100.0, [98.0, 102.0], 0.23)
    rec = recommend([a, b], Objective(optimize="throughput"))
    assert rec.winner is a and "TIES" not in rec.reason and rec.tied == []
    # without an interval the measurement cannot say which serves more: never a point decision
    unknown = recommend([candidate(1, 121.0, None, 0.46), candidate(2, 118.0, None, 0.23)],
                        Objective(optimize="throughput"))
    assert unknown.winner.index == 2 and "it TIES with c1 on throughput" in unknown.reason
    assert unknown.lost[1] == "ties with c2 on throughput; c2 costs less to run"


def _c(label, value, ci, price=None, index=0):
    return {"label": label, "v": value, "ci": ci, "price": price, "index": index}


VALUE = Criterion("warm p95", lambda c: c["v"], lambda c: c["ci"], show=lambda c: f"{c['v']:g} ms {c['ci']}")
PRICE = Criterion("price", lambda c: c["price"])


def test_rank_by_intervals_ranks_tiers_of_ties_by_the_next_figure():
    fast = _c("fast", 39.0, [33.0, 47.0], price=2.0, index=1)
    close = _c("close", 51.0, [40.0, 63.0], price=1.0, index=2)  # overlaps fast: a tie, the cheaper first
    slow = _c("slow", 90.0, [85.0, 95.0], price=0.5, index=3)  # cheapest, but slower beyond the intervals
    unknown = _c("unknown", None, None, price=0.1, index=4)  # no figure: last, never tied with a figure
    ranked = rank_by_intervals([slow, unknown, fast, close], [VALUE, PRICE], lambda c: c["index"])
    assert [c["label"] for c in ranked] == ["close", "fast", "slow", "unknown"]
    why, same = deciding(close, fast, [VALUE, PRICE])
    assert why is PRICE and same == [VALUE]
    assert tie_note(close, fast, same, lambda c: c["label"]) == (
        "close and fast tie on warm p95 (51 ms [40.0, 63.0] vs 39 ms [33.0, 47.0])")
    assert deciding(fast, slow, [VALUE, PRICE]) == (VALUE, [])
    assert deciding(close, _c("twin", 50.0, [45.0, 55.0], price=1.0), [VALUE, PRICE])[0] is None
    # a tier is a chain of overlaps: 'far' overlaps 'close', which overlaps 'fast': the measurement cannot order
    # 'far' and 'fast' consistently with 'close', so the three tie and the cheapest leads; 'far' beats 'fast' on
    # no figure beyond the intervals in its own favour, and says so
    far = _c("far", 60.0, [50.0, 70.0], price=0.1, index=5)
    assert [c["label"] for c in rank_by_intervals([far, fast, close], [VALUE, PRICE], lambda c: c["index"])] == [
        "far", "close", "fast"]
    assert deciding(far, fast, [VALUE, PRICE]) == (PRICE, [VALUE])  # apart in fast's favour: tied through close
    # a figure without an interval ties with the tier but links nothing: 'slow' stays out
    assert [c["label"] for c in rank_by_intervals([fast, slow, _c("blind", 80.0, None, price=3.0, index=7)],
                                                  [VALUE, PRICE], lambda c: c["index"])] == ["fast", "blind", "slow"]
    # a measured figure without an interval ties with any other
    blind = _c("blind", 80.0, None, price=0.2, index=6)
    assert [c["label"] for c in rank_by_intervals([fast, blind], [VALUE, PRICE], lambda c: c["index"])] == [
        "blind", "fast"]


def test_latency_ties_on_the_percentiles_interval():
    a = candidate(1, 100.0, None, 0.46, latency=40.0, ci_latency=[36.0, 45.0])
    b = candidate(2, 100.0, None, 0.23, latency=43.0, ci_latency=[39.0, 48.0])
    rec = recommend([a, b], Objective(optimize="latency"))
    assert rec.winner is b and "TIES with c1 on p95" in rec.reason


# -- the runner: measured again by itself, then inconclusive --------------------------------------------

class BoundRunner(FakeRunner):
    """Configuration 2's run is client-bound (`bound_runs` times); configuration 2 has the best figures.
    `tested` and `alive_at_test` are the subclass's own lists (`bound_sweep` makes one per sweep)."""

    bound_runs = 1
    alive_at_test: list[int]

    def run_configuration(self, i, d, run_dir):
        self.tested.append(i)
        self.alive_at_test.append(self.sweep.deployer.alive)
        run_dir.mkdir(parents=True, exist_ok=True)
        bound = i == 2 and self.tested.count(2) <= self.bound_runs
        rps = 50.0 if i == 2 else 10.0 * i
        (run_dir / "summary.json").write_text(json.dumps(bound_summary(rps) if bound else fake_summary(rps)))


def bound_sweep(tmp_path, bound_runs):
    sweep = load_sweep({"name": "fake", "grid": {"max_concurrency": [1, 2, 3]}, "max_parallel_endpoints": 2,
                        "price_per_hour": 0.2, "report": False, "load": {"payload": "x.json"},
                        "objective": {"optimize": "throughput"}},
                       out=tmp_path / "sweep", base_dir=tmp_path)
    sweep.deployer = FakeDeployer(deploy_s=0.05)
    runner = type("Runner", (BoundRunner,), {"bound_runs": bound_runs, "tested": [], "alive_at_test": []})
    sweep.runner_class = runner
    return sweep


@pytest.fixture
def payload(tmp_path):
    (tmp_path / "x.json").write_text("{}")


def run(sweep):
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    return result, lines, sweep.runner_class


def test_a_client_bound_configuration_is_measured_again_by_itself_and_then_trusted(tmp_path, payload):
    result, lines, runner = run(bound_sweep(tmp_path, bound_runs=1))
    assert runner.tested == [1, 2, 3, 2]  # again, after every other configuration
    assert runner.alive_at_test[-1] == 1 and max(runner.alive_at_test[:3]) == 2  # alone the second time
    row = result.document["configurations"][1]
    assert row["status"] == "ok" and row["client_bound"] is None
    assert row["remeasured"]["first_reason"].endswith(LATE)
    first = result.sweep.out_dir / row["remeasured"]["first_run_dir"]
    assert first.name.endswith(FIRST_SUFFIX) and (first / "summary.json").exists()  # the first measurement kept
    assert result.document["recommendation"]["index"] == 2 and result.exit_code == 0
    assert any("NOT TRUSTED: the load generator was the bottleneck" in line for line in lines)
    assert any("measuring it again by itself" in line for line in lines)
    bars = [line for line in lines if " elapsed, " in line]  # "done" only once nothing else will run
    assert [line for line in bars if line.endswith(", done")] == [bars[-1]]
    assert any(" 3/3 configurations, " in line and line.endswith(" elapsed, measured once; next: measuring 1 "
                                                                  "configuration again by itself") for line in bars)


def test_the_kept_first_measurement_is_named_and_linked(tmp_path, payload):
    """The first, client-bound run folder a configuration keeps when it is measured again is recorded in
    sweep.json (`remeasured`: its folder and report), named on the lines and linked from the page's row."""
    sweep = bound_sweep(tmp_path, bound_runs=1)
    runner = sweep.runner_class
    measure = runner.run_configuration

    def with_report(self, i, d, run_dir):
        measure(self, i, d, run_dir)
        (run_dir / "report.html").write_text("<html></html>")  # as `report: true` draws it

    sweep.runner_class = type("Runner", (runner,), {"run_configuration": with_report})
    result, lines, _ = run(sweep)
    row = result.document["configurations"][1]
    first = row["remeasured"]["first_run_dir"]
    assert first == row["run_dir"] + FIRST_SUFFIX and row["remeasured"]["first_report"] == f"{first}/report.html"
    assert (result.sweep.out_dir / row["remeasured"]["first_report"]).is_file()
    kept = [line for line in lines if f"kept in {first}" in line]
    assert len(kept) == 2 and "measuring it again by itself (" in kept[0] and "(measured again by itself" in kept[1]
    page = result.outputs["html"].read_text()
    assert page.count(f'href="{first}/report.html"') == 1 and "the first measurement, not trusted (" in page
    others = [c for c in result.document["configurations"] if c["index"] != 2]
    assert all("remeasured" not in c for c in others)


def test_still_client_bound_is_inconclusive_never_recommended_and_said_loudly(tmp_path, payload):
    sweep = bound_sweep(tmp_path, bound_runs=2)
    result, lines, runner = run(sweep)
    assert runner.tested == [1, 2, 3, 2]  # once more, not twice
    row = result.document["configurations"][1]
    assert row["status"] == "inconclusive" and row["meets_objective"] is False
    assert row["reason"].startswith("the load generator, not the endpoint, was the bottleneck in both measurements")
    rec = result.document["recommendation"]
    assert rec["index"] == 3 and rec["inconclusive"] == ["max_concurrency 2"]  # best figures, but not trusted
    assert "chosen without max_concurrency 2: INCONCLUSIVE" in rec["reason"]
    assert result.document["why_not"]["max_concurrency 2"].startswith("INCONCLUSIVE: the load generator")
    assert result.exit_code == 1
    assert any("[2/3] max_concurrency 2: INCONCLUSIVE: the load generator" in line for line in lines)
    page = (sweep.out_dir / "sweep.html").read_text()
    assert "chosen without max_concurrency 2: INCONCLUSIVE" in page and "<td>INCONCLUSIVE: the load generator" in page
    # a rerun resumes: nothing is measured a third time, and the verdict stays
    again, _, runner = run(bound_sweep(tmp_path, bound_runs=2))
    assert runner.tested == [] and again.document["configurations"][1]["status"] == "inconclusive"


def test_the_line_quotes_one_steps_own_rate_users_and_percentile(tmp_path, payload):
    summary = fake_summary(10.0)
    step2 = {**summary["steps"][0], "users": 26, "rps": 245.6, "goodput_rps": 245.6, "p95_ms": 150.0,
             "ci95": {"goodput_rps": [240.0, 251.0], "p95_ms": [140.0, 160.0]}}
    knee = {**summary["steps"][0], "users": 22, "rps": 242.0, "goodput_rps": 242.0, "p95_ms": 140.0}
    summary["steps"] = [knee, step2]
    summary["plateau"] = {"users": 22, "rps": 242.0, "p95_ms": 140.0, "capacity_rps": 245.6, "capacity_step": 1,
                          "knee_step": 0, "capacity_ci95": [240.0, 251.0], "text": "plateau"}

    class OneStep(FakeRunner):
        def run_configuration(self, i, d, run_dir):
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "summary.json").write_text(json.dumps(summary))

    sweep = load_sweep({"name": "fake", "grid": {"max_concurrency": [1]}, "price_per_hour": 0.2, "report": False,
                        "load": {"payload": "x.json"}}, out=tmp_path / "sweep", base_dir=tmp_path)
    sweep.deployer = FakeDeployer(deploy_s=0.01)
    sweep.runner_class = OneStep
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    line = next(x for x in lines if "[1/1] max_concurrency 1:" in x)
    # the knee step's own rate, users and p95; then the capacity, its own step's, with its interval
    capacity = with_interval(245.6, [240.0, 251.0], " req/s", 1)  # the one formatter of a figure with its interval
    assert "242.0 req/s at 22 users, p95 140 ms" in line and f"capacity {capacity}" in line
    assert "245.6 req/s at" not in line and "at 26 users" not in line  # never one step's rate with another's users
    reason = result.document["recommendation"]["reason"]
    assert reason.startswith("max_concurrency 1: 242 req/s at 22 users, p95 140 ms, capacity "
                             f"{with_interval(245.6, [240.0, 251.0], ' req/s')}")


def test_untrusted_words_name_the_load_generator_only_when_the_reason_does():
    from sm_locust.sweep.trust import untrusted_words

    assert "load generator" in untrusted_words("step 3 (12 users): loop lag p99 40 ms, 60 % of its p50 (add workers)")
    assert "load generator" in untrusted_words("the load generator was the bottleneck: client CPU 95 %")
    assert untrusted_words("the capacity 84 (±26) at 4 users is not known to +-5 % (lengthen --step-seconds)") == (
        "the measurement did not decide")
    assert untrusted_words(None) == "the measurement did not decide"


def test_a_sweep_line_says_the_load_generator_was_the_bottleneck_once():
    """`untrusted_because`: the words and the reason; a search's verdict that opens with them continues them."""
    from sm_locust.sweep.trust import untrusted_because

    search = "the load generator was the bottleneck (add workers): client CPU 97 % >= 90 % at 5 users (measured twice)"
    assert untrusted_because(search, short=True) == search
    assert untrusted_because(search) == ("the load generator, not the endpoint, was the bottleneck (add workers): "
                                         "client CPU 97 % >= 90 % at 5 users (measured twice)")
    step = "step 4 (8 users) was client-bound: 13 % of sends were late (> 10 %)"
    assert untrusted_because(step, short=True) == f"the load generator was the bottleneck ({step})"
    undecided = "the capacity 84 (±26) at 4 users is not known to +-5 % (lengthen --step-seconds)"
    assert untrusted_because(undecided) == f"the measurement did not decide ({undecided})"


def test_a_verdict_left_undecided_by_its_budget_is_ranked_by_its_intervals_not_measured_again():
    from sm_locust.sweep.trust import client_bound_reason

    undecided = ["the capacity 57.9 (±9.3) at 4 users is not known to +-5 % (lengthen --step-seconds)"]
    summary = {"plateau": {"client_bound": False, "undecided": undecided},
               "verdict": {"status": "inconclusive", "reason": undecided[0]}, "steps": []}
    assert client_bound_reason(summary) is None
    starved = {**summary, "verdict": {"status": "inconclusive",
                                      "reason": "the load generator was the bottleneck: client CPU 97 %"}}
    assert client_bound_reason(starved) == "the load generator was the bottleneck: client CPU 97 %"
    bound = {**summary, "plateau": {"client_bound": True, "undecided": undecided}}
    assert client_bound_reason(bound) == undecided[0]


def test_the_starved_machine_rule_accepts_exactly_a_sweep_that_names_the_load_generator(tmp_path, payload):
    """tests/starved.py, fed what a sweep really writes and prints: the e2e sweep tests skip on it only."""
    import subprocess

    from tests.starved import skip_if_the_load_generator_was_the_bottleneck

    def finished(result, lines):
        return subprocess.CompletedProcess([], result.exit_code, "\n".join(lines), "")

    result, lines, _ = run(bound_sweep(tmp_path, bound_runs=2))  # max_concurrency 2 client-bound twice
    with pytest.raises(pytest.skip.Exception):
        skip_if_the_load_generator_was_the_bottleneck(result.document, finished(result, lines))
    with pytest.raises(AssertionError):  # exit 0 with an INCONCLUSIVE configuration: not the right answer
        skip_if_the_load_generator_was_the_bottleneck(result.document, subprocess.CompletedProcess([], 0, "\n".join(
            lines), ""))
    undecided = json.loads(json.dumps(result.document))
    undecided["configurations"][1]["reason"] = "the measurement did not decide in both measurements"
    with pytest.raises(AssertionError):  # INCONCLUSIVE for another reason: the test must not skip
        skip_if_the_load_generator_was_the_bottleneck(undecided, finished(result, lines))
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "x.json").write_text("{}")
    trusted, trusted_lines, _ = run(bound_sweep(tmp_path / "again", bound_runs=1))
    assert skip_if_the_load_generator_was_the_bottleneck(trusted.document, finished(trusted, trusted_lines)) is None
