"""Serverless sweeps: the figures from a run's seconds and the ranking as pure functions, bad input as
one line (exit 2, nothing deployed), and a short local serverless sweep end to end."""

from __future__ import annotations

import csv
import json

import psutil
import pytest

from sm_locust.cli import main
from sm_locust.measure.timeline import Second
from sm_locust.report.cost import load_prices
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.replicates import combine
from sm_locust.sweep.serverless.measure import (
    Phase,
    cold_starts,
    load_figures,
    phase_bounds,
    success_hist,
)
from sm_locust.sweep.serverless.rank import ServerlessCandidate, recommend
from sm_locust.sweep.serverless.spec import CompareInstance
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli

# -- pure: figures ------------------------------------------------------------------------------------


def _second(t: float, users: int, hist: dict[int, int], failures: int = 0) -> Second:
    return Second(t=t, users=users, spawning=False, requests=sum(hist.values()), failures=failures, hist=hist)


def test_phases_are_cut_from_the_timeline_where_the_user_count_changes():
    # stability 1 user for 4 s, then x1 = 2 users for 4 s (starting a second late), then x2 = 4 users for 4 s
    seconds = [_second(101 + k, 1, {60: 10}) for k in range(4)]
    seconds += [_second(105, 1, {60: 10})]  # the shape's tick came a second late
    seconds += [_second(106 + k, 2, {60: 20}) for k in range(4)]
    seconds += [_second(110 + k, 4, {12: 60, 60: 20}, failures=60) for k in range(4)]
    phases = [Phase("stability", 1, 4), Phase("concurrency", 2, 4, 1.0), Phase("concurrency", 4, 4, 2.0)]
    assert phase_bounds(seconds, phases) == [(100.0, 104.0), (105.0, 109.0), (109.0, 113.0)]
    figures = load_figures(seconds, phases, {"failures": 240, "errors": {"ThrottlingException": 240}})
    assert figures.stability.requests == 40 and figures.stability_window == (100.0, 104.0)
    x1, x2 = figures.concurrency
    assert (x1.users, x1.throttle_rate, x1.p95_ms) == (2, 0.0, 60.0)
    # x2: first second (20 %, at least 1 s) dropped; 3 s x (60 throttled + 20 served)
    assert (x2.requests, x2.throttled, x2.throttle_rate) == (240, 180, 0.75)
    assert x2.goodput_rps == pytest.approx(20.0)
    assert x2.p50_ms == x2.p95_ms == 60.0  # the throttles (12 ms) are the fastest answers: taken out


def test_a_phase_found_late_ends_where_the_next_begins_and_keeps_its_own_user_count():
    # x1's 2 users sampled a second late (the second ending at 106 still says 1 user); x2's 4 callers on
    # time at 109, throttled from their first second: none of it is x1's
    seconds = [_second(101 + k, 1, {60: 10}) for k in range(5)]
    seconds += [_second(106 + k, 2, {60: 20}) for k in range(3)]
    seconds += [_second(109 + k, 4, {12: 60, 60: 20}, failures=60) for k in range(4)]
    phases = [Phase("stability", 1, 4), Phase("concurrency", 2, 4, 1.0), Phase("concurrency", 4, 4, 2.0)]
    bounds = phase_bounds(seconds, phases)
    assert bounds[1] == (105.0, 108.0) and bounds[2][0] == 108.0
    x1, _ = load_figures(seconds, phases, {"failures": 240, "errors": {"ThrottlingException": 240}}).concurrency
    assert (x1.users, x1.throttle_rate) == (2, 0.0)
    stability = load_figures(seconds, phases, {}).stability
    assert stability.requests == 40  # the fifth 1-user second lies past the stability phase's 4 s


def test_success_hist_drops_the_fastest_entries():
    assert success_hist({10: 5, 20: 3, 60: 4}, 6) == {20: 2, 60: 4}
    assert success_hist({10: 5}, 0) == {10: 5}


def test_stability_splits_cold_starts_at_the_threshold():
    seconds = [_second(101, 1, {770: 1, 60: 5}), _second(102, 1, {60: 10, 70: 4})]
    f = load_figures(seconds, [Phase("stability", 1, 2)], {}, cold_p50_ms=760.0).stability
    assert f.threshold_ms == pytest.approx((60 * 760) ** 0.5)  # ~214 ms: between warm and cold
    assert (f.cold_requests, f.max_ms, f.warm_p95_ms) == (1, 770.0, 70.0)
    assert f.warm_mean_ms == pytest.approx((60 * 15 + 70 * 4) / 19)
    without_cold_test = load_figures(seconds, [Phase("stability", 1, 2)], {}).stability
    assert without_cold_test.threshold_ms == 240.0 and without_cold_test.cold_requests == 1  # 4 x median


def test_cold_start_percentiles_are_nearest_rank_over_successes():
    samples = [{"ms": m, "code": "ok"} for m in (700, 710, 720, 900)] + [{"ms": 12, "code": "ThrottlingException"}]
    f = cold_starts(samples)
    assert (f.p50_ms, f.p99_ms, f.failures) == (710, 900, {"ThrottlingException": 1})


def test_the_tests_figures_carry_their_95_percent_intervals():
    # a steady single caller: 30 s of ~20 warm answers a second, one slow second in three; a cold start first
    seconds = [_second(101, 1, {900: 1, 50: 19})]
    seconds += [_second(102 + k, 1, {50: 16, 60: 3, 80: 1} if k % 3 else {50: 10, 70: 8, 90: 2}) for k in range(29)]
    seconds += [_second(132 + k, 4, {50: 60 + (k % 3) * 5}) for k in range(10)]
    phases = [Phase("stability", 1, 30), Phase("concurrency", 4, 10, 1.0)]
    figures = load_figures(seconds, phases, {})
    f = figures.stability
    for key in ("warm_p50_ms", "warm_p95_ms", "warm_p99_ms", "warm_mean_ms"):
        low, high = getattr(f, f"{key}_ci95")
        assert low <= getattr(f, key) <= high, key
    assert f.warm_mean_ms_ci95[1] > f.warm_mean_ms_ci95[0]  # a slow second in three: the mean is uncertain
    assert f.warm_mean_ms_ci95[1] < 900  # the cold start is not in the warm figures
    (x1,) = figures.concurrency
    low, high = x1.goodput_rps_ci95
    assert low < x1.goodput_rps < high and 60 <= low and high <= 70  # 60, 65 or 70 a second
    too_short = load_figures(seconds[:3], [Phase("stability", 1, 3)], {}).stability
    assert too_short.warm_p95_ms is not None and too_short.warm_p95_ms_ci95 is None  # no interval invented


def test_cold_start_intervals_are_order_statistics():
    samples = [{"ms": 700 + 10 * k, "code": "ok"} for k in range(20)]
    f = cold_starts(samples)
    assert f.p50_ms_ci95 == [750.0, 840.0]  # x(6) and x(15) of 20: the binomial 95 % ranks
    assert f.p99_ms_ci95 is None  # 20 samples cannot bound a p99
    assert cold_starts(samples[:5]).p50_ms_ci95 is None  # 5 samples cannot bound a median at 95 %


# -- pure: ranking ----------------------------------------------------------------------------------------


def _candidate(index, memory, mc, p95, cost, capacity, cold=800.0, throttle=0.0, be=9.7, spread=0.04):
    """A measured configuration: warm p95, $ per 1M and goodput each known within `spread` (relative)."""
    def ci(v):
        return [v * (1 - spread), v * (1 + spread)]
    return ServerlessCandidate(index, f"{memory}/{mc}", memory, mc, warm_ms={50.0: p95 * 0.9, 95.0: p95},
                               throttle_at_1=throttle, capacity_rps=capacity, cold_start_p50_ms=cold, cost_per_1m=cost,
                               break_even_rps=be, break_even_requests_per_month=be * 3600 * 730,
                               warm_ci95={50.0: ci(p95 * 0.9), 95.0: ci(p95)}, capacity_ci95=ci(capacity),
                               cost_per_1m_ci95=ci(cost), cold_start_p50_ci95=ci(cold))


def test_equally_cheap_sizes_are_decided_by_warm_latency_then_by_what_they_serve():
    candidates = [_candidate(1, 2048, 2, 122, 4.90, 16), _candidate(2, 2048, 8, 121, 4.91, 64),
                  _candidate(3, 4096, 2, 61, 5.02, 32), _candidate(4, 4096, 8, 61, 5.03, 120),
                  _candidate(5, 6144, 8, 45, 6.10, 170)]
    rec = recommend(candidates, Objective(), CompareInstance("ml.c5.large", 0.119))
    assert rec.winner.index == 4  # $ per 1M ties with the cheapest; p95 61 vs 122; MaxConcurrency 8 serves more
    assert rec.reason == (
        "serverless 4096 MB, MaxConcurrency 8: p95 61 ms (±2) warm, serves 120.0 req/s (±4.8), cold starts 0.80 s, "
        "$5.03 (±0.20) per 1M; real-time ml.c5.large is cheaper above 9.7 req/s sustained (25.5M requests a month); "
        "4096 MB, MaxConcurrency 8 and 4096 MB, MaxConcurrency 2 tie on $ per 1M ($5.03 (±0.20) vs $5.02 (±0.20)) "
        "and warm p95 (61 ms (±2) vs 61 ms (±2)): goodput decides (120.0 req/s (±4.8) vs 32.0 req/s (±1.3))")
    assert rec.lost[1] == ("ties with 4096 MB, MaxConcurrency 8 on $ per 1M; warm p95 122 ms (±5) vs 61 ms (±2)")
    assert rec.lost[3] == ("ties with 4096 MB, MaxConcurrency 8 on $ per 1M and warm p95; serves at most 32.0 req/s "
                           "(±1.3) vs 120.0 req/s (±4.8) (MaxConcurrency 2 vs 8)")
    assert rec.lost[5] == "$ per 1M $6.10 (±0.24) vs $5.03 (±0.20)"
    assert rec.tied == [3, 2, 1]  # the winner's tier on $ per 1M, in rank order


def test_warm_latency_inside_its_interval_is_a_tie_and_what_it_serves_decides():
    # the case of a serverless sweep that picked MaxConcurrency 2 over 8 at the same memory on "p95 51 ms warm
    # vs 39" from single-caller stability tests: inside their intervals the two tie, and 8 serves more
    two = _candidate(1, 4096, 2, 39, 4.97, 58)
    two.warm_ci95[95.0] = [33.0, 47.0]
    eight = _candidate(2, 4096, 8, 51, 4.98, 213)
    eight.warm_ci95[95.0] = [40.0, 63.0]
    rec = recommend([two, eight], Objective())
    assert rec.winner is eight
    assert rec.reason.endswith("4096 MB, MaxConcurrency 8 and 4096 MB, MaxConcurrency 2 tie on $ per 1M ($4.98 (±0.20) "
                               "vs $4.97 (±0.20)) and warm p95 (51 ms [40, 63] vs 39 ms [33, 47]): goodput decides "
                               "(213.0 req/s (±8.5) vs 58.0 req/s (±2.3))")
    # separate intervals: the faster one wins on warm latency
    two.warm_ci95[95.0] = [36.0, 42.0]
    eight.warm_ci95[95.0] = [47.0, 55.0]
    assert recommend([two, eight], Objective()).winner is two
    # no interval (too few samples): the warm latency cannot decide
    two.warm_ci95[95.0] = None
    assert recommend([two, eight], Objective()).winner is eight


def test_a_target_rate_picks_the_smallest_max_concurrency_that_serves_it_and_the_slo_rules_out():
    candidates = [_candidate(1, 4096, 2, 61, 5.0, 30), _candidate(2, 4096, 8, 61, 5.0, 120),
                  _candidate(3, 4096, 4, 62, 5.0, 60), _candidate(4, 2048, 4, 130, 4.9, 30, throttle=0.2)]
    rec = recommend(candidates, Objective(target_rps=50, slo_ms=100))
    assert rec.winner.index == 3
    assert rec.lost[1] == "serves at most 30.0 req/s < target 50 req/s"
    assert rec.lost[2] == ("ties with 4096 MB, MaxConcurrency 4 on $ per 1M and warm p95; MaxConcurrency 4 already "
                           "serves 50 req/s (this one takes 8 of the region's concurrency quota)")
    assert rec.lost[4] == "p95 130 ms warm > SLO 100 ms"
    assert "real-time" not in rec.reason  # no compare_instance
    none = recommend(candidates, Objective(target_rps=500))
    assert none.winner is None and none.reason.startswith("no serverless configuration meets the objective")


# -- bad input -------------------------------------------------------------------------------------------------

GOOD = {
    "serverless": "{memory_size_mb: [2048], max_concurrency: [2]}",
    "tests": "[stability, concurrency, cold_start]",
    "concurrency_multipliers": "[1, 2]",
}


@pytest.mark.e2e
@pytest.mark.parametrize("key, value, needle", [
    ("serverless", "{memory_size_mb: [2048, 1500], max_concurrency: [2]}",
     "serverless.memory_size_mb: memory size 1500 MB"),
    ("serverless", "{memory_size_mb: [7168], max_concurrency: [2]}", "1024-6144 in 1 GB steps"),
    ("serverless", "{memory_size_mb: [2048], max_concurrency: [0]}",
     "serverless.max_concurrency: MaxConcurrency 0 is outside"),
    ("serverless", "{memory_size_mb: [2048], max_concurrency: [201]}", "outside SageMaker's 1-200"),
    ("serverless", "{memory_size_mb: [2048]}", "serverless.max_concurrency: missing"),
    ("serverless", "{memory_size_mb: 2048, max_concurrency: 2, warm: true}", "serverless.warm: unknown key"),
    ("concurrency_multipliers", "[1, 0]", "concurrency_multipliers: a multiplier is a number above 0"),
    ("concurrency_multipliers", "[-1]", "got -1"),
    ("tests", "[stability, soak]", "tests: unknown test 'soak'; choose from: stability, concurrency, cold_start"),
])
def test_bad_serverless_input_is_one_line_exit_2_and_deploys_nothing(tmp_path, key, value, needle):
    keys = {**GOOD, key: value}
    text = "name: bad\n" + "".join(f"{k}: {v}\n" for k, v in keys.items()) + f"load: {{payload: {SAMPLE_PAYLOAD}}}\n"
    (tmp_path / "s.yaml").write_text(text)
    r = run_cli("sweep", "s.yaml", "--out", "out", cwd=tmp_path, timeout=60)
    assert_one_line_error(r, 2, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("extra, needle", [
    ("price_per_hour: 0.2\n", "price_per_hour: a serverless configuration is billed per use"),
    ("load: {payload: PAYLOAD, users: 4}\n", "load.users: the serverless tests decide the users"),
    ("compare_instance: {instance_type: ml.nope.large}\n",
     "compare_instance.instance_type: ml.nope.large is not in the price table"),
])
def test_keys_that_make_no_sense_for_serverless_are_refused(tmp_path, extra, needle):
    text = ("name: bad\nserverless: {memory_size_mb: 2048, max_concurrency: 2}\n"
            + extra.replace("PAYLOAD", str(SAMPLE_PAYLOAD)))
    if "load:" not in extra:
        text += f"load: {{payload: {SAMPLE_PAYLOAD}}}\n"
    (tmp_path / "s.yaml").write_text(text)
    assert_one_line_error(run_cli("sweep", "s.yaml", "--plan", cwd=tmp_path, timeout=60), 2, needle)


@pytest.mark.e2e
def test_serverless_keys_without_a_serverless_section_are_refused(tmp_path):
    (tmp_path / "s.yaml").write_text(f"name: bad\ngrid: {{max_concurrency: [2]}}\ntests: [stability]\n"
                                     f"load: {{payload: {SAMPLE_PAYLOAD}}}\n")
    assert_one_line_error(run_cli("sweep", "s.yaml", "--plan", cwd=tmp_path, timeout=60), 2,
                          "tests: applies to serverless sweeps only")


# -- end to end --------------------------------------------------------------------------------------------------

SWEEP = f"""\
name: sls-e2e
deploy: local
endpoint: {{service_time_ms: 60}}    # at 6144 MB: 2048 MB takes 180 ms, 4096 MB 90 ms
serverless:
  memory_size_mb: [2048, 4096]
  max_concurrency: 2
  cold_start_ms: 300
  idle_timeout_s: 1
tests: [stability, concurrency, cold_start]
concurrency_multipliers: [1, 2]
cold_start: {{rounds: 1}}
load: {{payload: {SAMPLE_PAYLOAD}, run_time: 6s}}    # each test: enough seconds for a 95 % interval
compare_instance: {{instance_type: ml.c5.large}}
report: false
"""


def _endpoints_running(out: str) -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if "serve" in (p.info["cmdline"] or []) and
            any(out in part for part in p.info["cmdline"] or [])]


@pytest.mark.e2e
def test_a_short_local_serverless_sweep_end_to_end(tmp_path):
    (tmp_path / "sls.yaml").write_text(SWEEP)
    r = run_cli("sweep", "sls.yaml", "--out", "out", cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "out"
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["kind"] == "serverless"
    assert doc["compare_instance"]["price_per_hour"] == load_prices().lookup("ml.c5.large").usd_per_hour  # the table's
    small, large = doc["configurations"]
    assert (small["label"], large["label"]) == ("memory_size_mb 2048", "memory_size_mb 4096")
    for c in (small, large):
        assert c["status"] == "ok"
        for key in ("settings", "throttle_rate", "cold_start_p50_ms", "cold_start_p99_ms", "warm_p50_ms", "warm_p95_ms",
                    "cost_per_1m", "break_even_rps"):
            assert c[key] is not None, key
        assert c["settings"]["serverless.max_concurrency"] == 2
        assert c["throttle_rate"]["1"] <= 0.05 and c["throttle_rate"]["2"] > 0.3  # 2 callers fit, 4 do not
        assert c["cold_start_p50_ms"] >= 300 and c["model_setup_time"]["count"] == 2  # 2 new instances
        assert c["model_setup_time"]["average_ms"] == 300.0
        assert c["stability"]["cold_requests"] == 1  # a fresh endpoint: the first request was cold
        assert c["cost"]["duration_source"].startswith("ModelLatency mean")
        assert (out / c["run_dir"] / "summary.json").exists() and (out / c["run_dir"] / "serverless.json").exists()
    # 60 ms x 6144 / memory: at least 180 and 90 ms, and the larger memory the faster (how close to the
    # nominal figures a quiet machine comes is not asserted: a busy one adds to both)
    assert small["warm_p50_ms"] >= 180 and large["warm_p50_ms"] >= 90 and large["warm_p50_ms"] < small["warm_p50_ms"]
    # CPU in proportion to memory: about the same $ per request, so the faster one wins when $ per 1M ties
    # within its interval. A busy machine adds a fixed latency to both, which makes the smaller memory
    # cheaper per request: when the measured costs are apart beyond their intervals, the cheaper is chosen.
    assert abs(small["cost_per_1m"] / large["cost_per_1m"] - 1) < 0.05
    assert "real-time ml.c5.large is cheaper above " in doc["recommendation"]["reason"]

    def cost(figures):
        return (figures.get("cost_per_1m") or figures["cost"]["cost_per_1m"],
                figures.get("cost_per_1m_ci95") or figures["cost"]["cost_per_1m_ci95"])

    def warm(figures):
        return figures["warm_p95_ms"], figures["warm_p95_ms_ci95"]

    def ranked(c, figure):
        """The interval the ranking reads: a configuration measured twice to confirm the ranking stands for
        both replicates, the hull of their intervals (sweep/replicates.py)."""
        first = (c.get("replicate") or {}).get("first_figures")
        return combine(*figure(c), *figure(first))[1] if first else figure(c)[1]

    (small_low, small_high), (large_low, large_high) = ranked(small, cost), ranked(large, cost)
    if small_high < large_low or large_high < small_low:
        winner = small if small_high < large_low else large
        assert doc["recommendation"]["label"] == winner["label"], (ranked(small, cost), ranked(large, cost))
    else:
        winner = large
        assert doc["recommendation"]["label"] == "memory_size_mb 4096"
        # $ per 1M ties within its interval; the warm p95 intervals of the last measurement are apart
        assert small["warm_p95_ms_ci95"][0] > large["warm_p95_ms_ci95"][1]
        if ranked(small, warm)[0] > ranked(large, warm)[1]:  # and decide, on both replicates when measured twice
            assert doc["why_not"]["memory_size_mb 2048"].startswith(
                "ties with 4096 MB, MaxConcurrency 2 on $ per 1M; warm p95 "), doc["why_not"]
        else:  # a replicate's warm p95 overlaps the other's: they tie on it too, and a later figure decides
            assert doc["why_not"]["memory_size_mb 2048"].startswith(
                "ties with 4096 MB, MaxConcurrency 2 on $ per 1M and warm p95; "), doc["why_not"]
    memory = winner["label"].split()[-1]
    assert doc["recommendation"]["reason"].startswith(f"serverless {memory} MB, MaxConcurrency 2: p95 ")
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["memory_size_mb"] for row in rows] == ["2048", "4096"] and "throttle_rate_x2" in rows[0]
    page = (out / "sweep.html").read_text()
    for marker in ('id="fig-sls-throttle"', 'id="fig-sls-cold"', 'id="fig-sls-cost"',
                   f"serverless {memory} MB, MaxConcurrency 2"):
        assert marker in page
    lines = r.stdout.splitlines()
    assert any(line.startswith("sm-locust sweep: [1/2] memory_size_mb 2048: warm p95 ") and "at x1 / x2" in line
               for line in lines)
    assert any(line.startswith(f"sm-locust sweep: recommendation: serverless {memory} MB") for line in lines)
    assert not _endpoints_running(str(out))

    again = run_cli("sweep", "sls.yaml", "--out", "out", cwd=tmp_path, timeout=60)  # resumes: nothing deployed
    assert again.returncode == 0, again.stderr
    assert "0 to run (2 measured before)" in again.stdout
    assert json.loads((out / "sweep.json").read_text())["recommendation"]["label"] == winner["label"]


@pytest.mark.e2e
def test_a_cold_start_only_sweep_times_first_requests_and_resumes(tmp_path, capsys, monkeypatch):
    (tmp_path / "cold.yaml").write_text(
        "name: cold\nserverless: {memory_size_mb: 6144, max_concurrency: 3, cold_start_ms: 200, idle_timeout_s: 0.5}\n"
        f"tests: [cold_start]\ncold_start: {{rounds: 2, gap_s: 1}}\nload: {{payload: {SAMPLE_PAYLOAD}}}\n"
        "report: false\n")
    r = run_cli("sweep", "cold.yaml", "--out", "out", cwd=tmp_path, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr  # measured, but no warm latency: nothing to recommend
    (c,) = json.loads((tmp_path / "out" / "sweep.json").read_text())["configurations"]
    assert c["status"] == "ok" and len(c["cold_start_samples_ms"]) == 6  # 2 rounds x 3 new instances
    assert min(c["cold_start_samples_ms"]) >= 200 + 20  # setup + 20 ms of model at 6144 MB
    assert c["model_setup_time"]["count"] == 6 and c["throttle_rate"] == {}
    assert c["lost_because"].startswith("no warm latency measured")
    monkeypatch.chdir(tmp_path)  # the rerun in this process, through the CLI's entry point
    assert main(["sweep", "cold.yaml", "--out", "out"]) == 1  # resumed; still nothing to recommend
    assert "0 to run (1 measured before)" in capsys.readouterr().out


def test_serverless_json_reads_typed_and_an_older_one_without_the_load_run_reads_as_none():
    from sm_locust.sweep.serverless.collect import ServerlessResults

    results = ServerlessResults.of({"phases": [{"name": "stability"}], "load_started": 10.0, "load_ended": 70.0,
                                    "cold_start": {"gap_s": 600, "start": 1.0, "end": 2.0, "requests": [{"code": "ok"}],
                                                   "rounds": 3}})
    assert (results.load_started, results.load_ended, results.phases) == (10.0, 70.0, [{"name": "stability"}])
    assert results.cold_start is not None and (results.cold_start.gap_s, results.cold_start.end) == (600, 2.0)
    assert results.cold_start.requests == [{"code": "ok"}] and results.cold_start.extra == {"rounds": 3}
    older = ServerlessResults.of({"cold_start": {"gap_s": 600}})
    assert (older.phases, older.endpoint_counters, older.load_started) == (None, None, None)
    assert older.cold_start is not None and older.cold_start.start is None


def test_the_counters_growth_over_a_phase_is_typed_from_the_last_samples_around_it():
    from sm_locust.sweep.serverless.counters import CounterGrowth, counters_between

    samples = [{"t": 1.0, "successes": 2, "model_latency_us_sum": 2000, "cold_starts": 1},
               {"t": 2.0, "successes": 5, "model_latency_us_sum": 5000, "cold_starts": 1, "ThrottlingException": 1},
               {"t": 3.0, "successes": 9, "model_latency_us_sum": 9500, "cold_starts": 2, "ThrottlingException": 1}]
    assert counters_between(samples, 1.5, 3.0) == CounterGrowth(successes=7, model_latency_us_sum=7500, cold_starts=1,
                                                                throttles=1)
    assert counters_between(samples, 0.0, 1.0) == CounterGrowth(2, 2000, 1, 0)  # from zero: no sample before
    assert counters_between(samples, 0.0, 0.5) is None
