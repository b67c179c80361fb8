"""Rankings that hold when measured again: the leader and the runner-up, told apart by their intervals,
are measured once more in reverse order and judged on both replicates; replicates that disagree
beyond their intervals make the hull the interval, and what then overlaps is a tie said so."""

from __future__ import annotations

import json

import pytest

from sm_locust.sweep.api import load_sweep, plan_lines, run_sweep
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.realtime.rank import REPLICATE_FIELDS, Candidate, criteria, rank, recommend
from sm_locust.sweep.replicates import combine, confirmation_note, contenders, disagreements, drift_note, merged
from sm_locust.sweep.runner import REPLICATE_SUFFIX, SweepInterrupted
from sm_locust.sweep.serverless.rank import ServerlessCandidate, replicated
from sm_locust.sweep.serverless.rank import criteria as serverless_criteria
from sm_locust.sweep.serverless.rank import rank as serverless_rank
from sm_locust.sweep.serverless.rank import recommend as serverless_recommend
from tests.sweep_fakes import FakeDeployer, FakeRunner, fake_summary

THROUGHPUT = Objective(optimize="throughput")


def cand(index: int, rps: float, ci: list[float] | None, price: float = 0.2) -> Candidate:
    return Candidate(index=index, label=f"c{index}", capacity_rps=rps, capacity_ci95=ci, latency_ms=20.0,
                     error_rate=0.0, price_per_hour=price)


# -- the rule (pure) -------------------------------------------------------------------------------

def test_combine_is_the_mean_and_the_hull_of_both_intervals():
    assert combine(50.0, [45.0, 52.0], 41.0, [38.0, 44.0]) == (45.5, [38.0, 52.0])
    assert combine(50.0, [45.0, 52.0], None, None) == (50.0, [45.0, 52.0])  # one replicate unknown: the other
    assert combine(50.0, None, 41.0, [38.0, 44.0]) == (45.5, None)  # no interval: it separates nothing
    value, interval = combine(10.0, [9.0, 11.0], 20.0, [19.5, 20.5])
    assert interval is not None and interval[0] <= 10.0 <= value <= 20.0 <= interval[1]


def test_merged_keeps_whole_counts_whole():
    a = Candidate(index=1, label="a", instances_needed=2, instances_needed_ci95=[2, 2], capacity_rps=100.0)
    b = Candidate(index=1, label="a", instances_needed=3, instances_needed_ci95=[2, 3], capacity_rps=80.0)
    m = merged(a, b, REPLICATE_FIELDS)
    assert m.instances_needed == 3 and m.instances_needed_ci95 == [2, 3] and m.capacity_rps == 90.0
    assert a.capacity_rps == 100.0  # the replicates themselves are untouched


def test_contenders_only_when_a_measured_figure_told_them_apart():
    order = criteria("throughput", THROUGHPUT)
    apart = rank([cand(1, 100.0, [98.0, 102.0]), cand(2, 80.0, [79.0, 81.0])], THROUGHPUT)
    assert [c.index for c in contenders(apart, order)] == [1, 2]
    tied = rank([cand(1, 100.0, [90.0, 110.0]), cand(2, 95.0, [90.0, 100.0], price=0.1)], THROUGHPUT)
    assert contenders(tied, order) == []  # the price (exact) decided: already a tie said so
    assert contenders(apart[:1], order) == []


def test_the_runner_up_is_the_closest_call_not_the_second_rank():
    """A serverless sweep ranked second the configuration that lost on goodput (110 vs 30 req/s), and third
    the one that lost on $ per 1M by a hair ($2.72 vs $2.77): the hair is what drift overturns."""
    objective = Objective()
    leader = serverless(1, 8, 74.0, [72.0, 76.0], 110.0)
    leader.cost_per_1m, leader.cost_per_1m_ci95 = 2.66, [2.56, 2.72]
    far = serverless(2, 2, 75.0, [71.0, 80.0], 30.0)
    far.cost_per_1m, far.cost_per_1m_ci95 = 2.70, [2.56, 2.76]
    near = serverless(3, 8, 44.0, [42.0, 48.0], 180.0)
    near.cost_per_1m, near.cost_per_1m_ci95 = 2.88, [2.77, 3.04]
    order = serverless_criteria(objective)
    ranked = serverless_rank([near, far, leader], objective)
    assert [c.index for c in ranked[:2]] == [1, 2]
    assert [c.index for c in contenders(ranked, order)] == [1, 3]


def test_replicates_that_drift_turn_a_confident_pick_into_a_tie_said_so():
    order = criteria("throughput", THROUGHPUT)
    a1, a2 = cand(1, 100.0, [98.0, 102.0]), cand(1, 84.0, [82.0, 86.0])  # the machine got busier
    b1, b2 = cand(2, 80.0, [79.0, 81.0], price=0.1), cand(2, 83.0, [81.0, 85.0], price=0.1)
    assert recommend([a1, b1], THROUGHPUT).winner.index == 1  # one replicate: a looks 25 % better
    assert [c.name for c in disagreements(a1, a2, order)] == ["throughput"]
    assert disagreements(b1, b2, order) == []
    rec = recommend([merged(a1, a2, REPLICATE_FIELDS), merged(b1, b2, REPLICATE_FIELDS)], THROUGHPUT)
    assert rec.winner.index == 2 and rec.tied == [1]  # a tie, broken by the price to run
    assert "TIES" in rec.reason and "the cheaper to run is recommended" in rec.reason
    note = drift_note("c1", a1, a2, order)
    assert note.startswith("c1: replicates 100 req/s (±2) and 84 req/s (±2) on throughput disagree")
    assert "the machine drifted" in note and drift_note("c2", b1, b2, order) == ""
    assert confirmation_note(["c1", "c2"], [note, ""], tied=True).startswith(
        "; tie after measuring c1 and c2 again in reverse order: c1: replicates")


def test_replicates_that_agree_confirm_the_pick():
    order = criteria("throughput", THROUGHPUT)
    a = merged(cand(1, 100.0, [98.0, 102.0]), cand(1, 99.0, [97.0, 101.0]), REPLICATE_FIELDS)
    b = merged(cand(2, 80.0, [79.0, 81.0]), cand(2, 81.0, [80.0, 82.0]), REPLICATE_FIELDS)
    rec = recommend([b, a], THROUGHPUT)
    assert rec.winner.index == 1 and rec.tied == [] and contenders(rec.ranked, order) == [a, b]
    assert confirmation_note(["c1", "c2"], ["", ""], tied=False).endswith("the replicates agree")


def serverless(index: int, mc: int, p95: float, ci: list[float], capacity: float) -> ServerlessCandidate:
    return ServerlessCandidate(index=index, label=f"s{index}", memory_mb=4096, max_concurrency=mc,
                               warm_ms={95.0: p95}, warm_ci95={95.0: ci}, capacity_rps=capacity,
                               capacity_ci95=[capacity - 5, capacity + 5], cost_per_1m=4.98,
                               cost_per_1m_ci95=[4.8, 5.2])


def test_a_serverless_pick_that_turned_on_drift_becomes_the_goodput_decision():
    """MaxConcurrency 8 read warm p95 50 [45, 52] beside 39 [37, 40] for 2, measured minutes apart; measured
    again in reverse order 8 reads 41 [38, 44]: the warm p95s tie and goodput decides."""
    objective = Objective()
    two_1, eight_1 = serverless(1, 2, 39.0, [37.0, 40.0], 58.0), serverless(2, 8, 50.0, [45.0, 52.0], 213.0)
    two_2, eight_2 = serverless(1, 2, 40.0, [38.0, 42.0], 57.0), serverless(2, 8, 41.0, [38.0, 44.0], 210.0)
    assert serverless_recommend([two_1, eight_1], objective).winner.max_concurrency == 2  # the noise decided
    rec = serverless_recommend([replicated(two_1, two_2), replicated(eight_1, eight_2)], objective)
    assert rec.winner.max_concurrency == 8 and "goodput decides" in rec.reason
    note = drift_note("MaxConcurrency 8", eight_1, eight_2, serverless_criteria(objective))
    assert "50 ms [45, 52] and 41 ms (±3) on warm p95 disagree" in note


# -- the runner: who is measured again, in which order, and what sweep.json says ------------------

class DriftRunner(FakeRunner):
    """Configuration i serves 10 x i req/s (±1); the second measurement of the leader (3) reads 20 % less:
    the machine drifted."""

    drift = 0.8

    def run_configuration(self, i, d, run_dir):
        self.tested.append(i)
        again = self.tested.count(i) > 1
        rps = 10.0 * i * (self.drift if again and i == 3 else 1.0)
        summary = fake_summary(rps)
        summary["plateau"].update(capacity_rps=rps, capacity_ci95=[rps - 1, rps + 1])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps(summary))


@pytest.fixture
def payload(tmp_path):
    (tmp_path / "x.json").write_text("{}")


def drift_sweep(tmp_path, drift: float, **extra):
    sweep = load_sweep({"name": "fake", "grid": {"max_concurrency": [1, 2, 3]}, "price_per_hour": 0.2,
                        "report": False, "load": {"payload": "x.json"}, "objective": {"optimize": "throughput"},
                        **extra}, out=tmp_path / "sweep", base_dir=tmp_path)
    sweep.deployer = FakeDeployer(deploy_s=0.01)
    sweep.runner_class = type("Runner", (DriftRunner,), {"tested": [], "drift": drift})
    return sweep


def test_the_leader_and_runner_up_are_measured_again_in_reverse_order_and_drift_ties(tmp_path, payload):
    sweep = drift_sweep(tmp_path, drift=0.7)  # the leader's 30 +-1 reads 21 +-1 the second time
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    # A B ... B A: the later one first; then 3 and 2 tie, and 1, which lost to the leader on throughput and was
    # measured once, is the closest call of a second round
    assert sweep.runner_class.tested == [1, 2, 3, 3, 2, 1]
    doc = result.document
    rows = {row["index"]: row for row in doc["configurations"]}
    assert rows[3]["replicate"]["first_run_dir"].endswith(REPLICATE_SUFFIX)
    assert (sweep.out_dir / rows[3]["replicate"]["first_run_dir"] / "summary.json").exists()  # both kept
    assert rows[3]["capacity_rps"] == pytest.approx(21.0)  # the row shows its latest measurement
    reason = doc["recommendation"]["reason"]
    assert "TIES" in reason and "the machine drifted" in reason and "tie after measuring" in reason
    assert any("confirming the ranking" in line for line in lines)
    # a rerun resumes with both replicates: nothing measured a third time, the same words
    again = drift_sweep(tmp_path, drift=0.7)
    second = run_sweep(again, yes=True, printer=lambda _: None, handle_signals=False)
    assert again.runner_class.tested == []
    assert second.document["recommendation"]["reason"] == reason


def test_replicates_that_agree_keep_the_pick_and_say_it_was_confirmed(tmp_path, payload):
    sweep = drift_sweep(tmp_path, drift=1.0)
    result = run_sweep(sweep, yes=True, printer=lambda _: None, handle_signals=False)
    assert sweep.runner_class.tested == [1, 2, 3, 3, 2]
    rec = result.document["recommendation"]
    assert rec["index"] == 3 and "TIES" not in rec["reason"]
    assert rec["reason"].endswith("confirmed by measuring max_concurrency 2 and max_concurrency 3 again in reverse "
                                  "order: the replicates agree")


def test_a_new_leader_measured_once_gets_a_second_round_and_nothing_a_third(tmp_path, payload):
    """The leader's replicate reads a sixth of its first (30 then 5 req/s): max_concurrency 2 leads on both
    replicates, and its closest call, measured once, is measured again in a second round."""
    sweep = drift_sweep(tmp_path, drift=0.17)
    result = run_sweep(sweep, yes=True, printer=lambda _: None, handle_signals=False)
    assert sweep.runner_class.tested == [1, 2, 3, 3, 2, 1]
    rec = result.document["recommendation"]
    assert rec["index"] == 2 and "max_concurrency 3: replicates" in rec["reason"]
    assert all(row.get("replicate") for row in result.document["configurations"])


def test_confirm_false_measures_each_once_and_the_plan_shows_the_extra_cost(tmp_path, payload):
    sweep = drift_sweep(tmp_path, drift=0.7, confirm=False)
    assert not any(line.startswith("  confirmation:") for line in plan_lines(sweep))
    result = run_sweep(sweep, yes=True, printer=lambda _: None, handle_signals=False)
    assert sweep.runner_class.tested == [1, 2, 3]
    assert result.document["recommendation"]["index"] == 3
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.json").write_text("{}")
    confirming = drift_sweep(tmp_path / "other", drift=0.7)
    extra = [line for line in plan_lines(confirming) if line.startswith("  confirmation:")]
    assert len(extra) == 1 and "`confirm: false` skips it" in extra[0]
    estimate = confirming.confirmation_estimate()
    one = confirming.estimates[1]
    assert estimate is not None and estimate.billed_s == pytest.approx(3 * one.billed_s)  # 2 rounds of 2, of 3


def test_the_progress_bar_says_done_only_once_the_confirmation_round_is_over(tmp_path, payload):
    sweep = drift_sweep(tmp_path, drift=1.0)
    lines: list[str] = []
    run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    bars = [i for i, line in enumerate(lines) if " configurations, " in line and " elapsed, " in line]
    done = [i for i in bars if lines[i].endswith(", done")]
    confirming = [i for i, line in enumerate(lines) if "confirming the ranking: " in line]
    second = [i for i, line in enumerate(lines) if line.endswith("(second measurement, confirming the ranking)")]
    assert len(confirming) == 1 and len(second) == 2  # max_concurrency 3 and 2 measured again
    assert done == [bars[-1]] and done[0] > max(second)  # said once, after the round
    first_round = [lines[i] for i in bars if i < confirming[0]]
    assert " 3/3 configurations, " in first_round[-1]
    assert first_round[-1].endswith(" elapsed, measured once; next: confirming the ranking, if its leaders need it")
    assert all(lines[i].endswith(" elapsed, measured once; confirming the ranking") for i in bars
               if confirming[0] < i < done[0])
    (tmp_path / "once").mkdir()
    (tmp_path / "once" / "x.json").write_text("{}")
    once = drift_sweep(tmp_path / "once", drift=1.0, confirm=False)
    plain: list[str] = []
    run_sweep(once, yes=True, printer=plain.append, handle_signals=False)
    assert [line for line in plain if "next:" in line] == []  # no round follows: the last bar is "done"
    assert [line for line in plain if line.endswith(", done")] == [[line for line in plain if " elapsed, " in line][-1]]


class CutShortRunner(DriftRunner):
    """The leader's second measurement is cut short by Ctrl-C after Locust wrote part of its folder."""

    def run_configuration(self, i, d, run_dir):
        if i == 3 and 3 in self.tested:
            self.tested.append(i)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "locust_stats_history.csv").write_text("Timestamp\n")
            raise SweepInterrupted()
        super().run_configuration(i, d, run_dir)


def test_a_confirmation_cut_short_leaves_no_replicate_folder_and_the_first_measurement_resumes(tmp_path, payload):
    sweep = drift_sweep(tmp_path, drift=1.0)
    sweep.runner_class = type("Runner", (CutShortRunner,), {"tested": [], "drift": 1.0})
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    assert sweep.runner_class.tested == [1, 2, 3, 3] and result.exit_code == 130
    assert not list(sweep.out_dir.glob(f"*{REPLICATE_SUFFIX}"))  # nothing left behind
    rows = {row["index"]: row for row in result.document["configurations"]}
    assert rows[3]["status"] == "ok" and rows[3]["capacity_rps"] == 30.0 and not rows[3].get("replicate")
    folder = sweep.out_dir / rows[3]["run_dir"]
    assert json.loads((folder / "summary.json").read_text())["plateau"]["capacity_rps"] == 30.0  # the first
    assert not (folder / "locust_stats_history.csv").exists()  # the cut-short one's files are gone
    assert any("max_concurrency 3: the second measurement was cut short; the first stands alone" in line
               for line in lines)
    # resumed: all three measured before, and the ranking confirmed afresh
    again = drift_sweep(tmp_path, drift=1.0)
    second = run_sweep(again, yes=True, printer=lambda _: None, handle_signals=False)
    assert again.runner_class.tested == [3, 2] and second.exit_code == 0  # the confirmation only, none from scratch
    assert len(list(again.out_dir.glob(f"*{REPLICATE_SUFFIX}"))) == 2  # its own first replicates, kept
    assert second.document["recommendation"]["reason"].endswith("the replicates agree")
