"""A step's token intervals in summary.json are the token search's own: the record and `TokenStep`
compute them with the one function (`plateau.tokens.token_intervals`) over the same seconds."""

from __future__ import annotations

import json
import random

import pytest

from sm_locust.measure.timeline import Second
from sm_locust.plateau.tokens import Bucket, TokenDriver, TokenPlateauSearch, TokenVerdict, token_intervals
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.llm import LlmStats, one_second_pieces, step_windows
from sm_locust.record.llm_options import FigureTrim
from sm_locust.record.model import Summary
from sm_locust.record.summary import build_summary, step_records
from tests.llm.test_llm_metrics import sample, steady_timeline

T0 = 1_000_000.0


def noisy_stats(seconds: int = 20) -> LlmStats:
    """Answers whose count, TTFT and ITL vary second by second (so every interval has a width)."""
    stats, draw = LlmStats(), random.Random(1)
    for second in range(int(T0), int(T0) + seconds):
        for _ in range(draw.randint(4, 12)):
            stats.add(sample(draw.uniform(40.0, 200.0), [draw.uniform(8.0, 30.0) for _ in range(4)], 5, 250.0),
                      now=second + 0.5)
    return stats


def measured(stats: LlmStats, seconds: list[Second]):
    """The step as the token search measures it (`TokenDriver`, tokens read by `LlmStats.over`)."""
    driver = TokenDriver(TokenPlateauSearch(4, 8), stats.over, step_s=20.0)
    driver.decision = driver.search.first()
    return driver._measure(seconds)


def test_a_steps_recorded_token_intervals_are_the_token_searchs():
    seconds = steady_timeline(T0, users_per_step=(4,), step_s=20)
    stats = noisy_stats()
    summary = {"steps": step_records(seconds)}
    recorded = Summary.of(stats.annotate(summary, seconds, T0, T0 + 20)).steps[0].llm
    step = measured(stats, seconds)
    assert recorded is not None and recorded.output_tokens_per_s == round(step.output_tokens_per_s, 3)
    assert recorded.interval("output_tokens_per_s") == tuple(step.output_tokens_ci.as_list())
    for series in ("ttft", "itl"):
        for pct in (50, 95):
            assert recorded.interval(f"{series}_p{pct}_ms") == tuple(step.token_interval(series, pct).as_list())
    low, high = recorded.interval("output_tokens_per_s")
    assert low < recorded.output_tokens_per_s < high  # a real width: the equality above is not of two nulls
    low, high = recorded.interval("ttft_p95_ms")
    assert low <= recorded.ttft_p95_ms <= high and low < high
    assert set(recorded.ci95) == {"ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "output_tokens_per_s"}


def test_the_token_plateaus_llm_carries_the_intervals_it_decided_on():
    seconds = steady_timeline(T0, users_per_step=(4,), step_s=20)
    step = measured(noisy_stats(), seconds)
    search = TokenPlateauSearch(4, 8)
    search.first()
    search.feed(step)
    verdict = search.verdict()
    assert isinstance(verdict, TokenVerdict) and verdict.plateau is step
    out = verdict.as_dict()
    assert out["llm"]["ci95"] == step.token_intervals() == token_intervals(step.per_second)
    assert out["llm"]["ci95"]["itl_p95_ms"] == step.token_interval("itl", 95).as_list()
    assert out["llm"]["ci95"]["output_tokens_per_s"] == out["output_tokens_per_s_ci95"]


def test_a_window_too_short_for_an_interval_records_nulls_and_old_files_still_load():
    assert token_intervals([]) == {"ttft_p50_ms": None, "ttft_p95_ms": None, "itl_p50_ms": None,
                                   "itl_p95_ms": None, "output_tokens_per_s": None}
    one = Bucket()
    one.add(sample(50.0, [10.0], 2, 60.0))
    assert token_intervals([(1.0, one)])["ttft_p95_ms"] is None  # one sample: no interval
    old = Summary.of({"steps": [{"users": 2, "llm": {"output_tokens_per_s": 80.0, "ttft_p95_ms": 200.0}}]})
    assert old.steps[0].llm.interval("ttft_p95_ms") is None and not old.steps[0].llm.records_interval("ttft_p95_ms")


def test_the_recorders_merged_spans_give_the_same_intervals_as_the_seconds():
    """The recorder keeps a step's window as its contiguous spans (one `Second` of 16 s here): the
    intervals come from its seconds all the same, not from one sample (which has none)."""
    seconds = steady_timeline(T0, users_per_step=(4,), step_s=20)
    stats = noisy_stats()
    window = step_windows(seconds)[0]
    span = Second(t=window[-1].t, users=4, spawning=False, requests=0, failures=0,
                  interval=window[-1].t - (window[0].t - window[0].interval))
    by_second = stats.annotate({"steps": [{}]}, seconds, T0, T0 + 20, windows=[window])["steps"][0]["llm"]["ci95"]
    by_span = stats.annotate({"steps": [{}]}, seconds, T0, T0 + 20, windows=[[span]])["steps"][0]["llm"]["ci95"]
    assert by_span == by_second and by_span["output_tokens_per_s"] is not None and by_span["itl_p95_ms"] is not None
    assert one_second_pieces([span]) == [(w.t - w.interval, w.t) for w in window]
    assert one_second_pieces([Second(t=10.0, users=1, spawning=False, requests=0, failures=0, interval=2.4)]) == \
        [(7.6, 8.6), (8.6, 10.0)]  # a remainder under half a second joins the second before it


def _irregular_timeline() -> list[Second]:
    """One 4-user step of 20 s sampled every 0.6 s and 1.4 s by turns (a loaded master's samples are not
    one second long): the recorder's 1-s pieces of the window's span are not the search's samples."""
    seconds, t = [], T0
    for i in range(20):
        t += 0.6 if i % 2 == 0 else 1.4
        seconds.append(Second(t=t, users=4, spawning=False, requests=10, failures=0, hist={50: 10},
                              interval=0.6 if i % 2 == 0 else 1.4))
    return seconds


def _late(stats: LlmStats, step) -> None:
    """A worker's report arriving after the search judged the step: more answers in its window's seconds."""
    draw = random.Random(2)
    for s in step.window[::3]:
        for _ in range(draw.randint(5, 15)):
            stats.add(sample(draw.uniform(300.0, 600.0), [draw.uniform(40.0, 90.0)] * 4, 5, 700.0),
                      now=s.t - 0.5)


@pytest.mark.parametrize("case", ["irregular samples", "--cooldown-s", "late answers"])
def test_a_judged_token_steps_record_holds_the_interval_the_search_decided_on(case):
    """The recorder's own cut of a step's answers can differ from the search's: other samples, a
    `--cooldown-s` trim, answers reported after the step was judged. summary.json's step (and the report,
    and `tests/undecided.py`, reading it) must still hold the figures and intervals the search judged."""
    seconds = _irregular_timeline() if case == "irregular samples" else steady_timeline(T0, (4,), 20)
    stats = noisy_stats()
    step = measured(stats, seconds)
    if case == "late answers":
        _late(stats, step)
    if case == "--cooldown-s":
        stats.trim = FigureTrim(cooldown_s=3.0)
    timeline = RunTimeline()
    timeline.extend(seconds)
    timeline.judge(step)
    steps = timeline.measured_steps()
    assert len(steps) == 1
    recut = stats._step_figures(stats.trim.step_window(steps[0][1]))  # what the recorder alone would say
    judged = {**step.tokens.figures(step.tokens_s), "ci95": step.token_intervals()}
    assert recut is not None and recut["ci95"] != judged["ci95"]  # the two cuts differ here
    summary = stats.annotate(build_summary(endpoint="e", started_at=T0, ended_at=seconds[-1].t, totals={},
                                           errors={}, seconds=(), steps=[record for record, _ in steps]),
                             (), T0, seconds[-1].t, windows=[window for _, window in steps])
    recorded = json.loads(json.dumps(summary))["steps"][0]["llm"]
    assert recorded == json.loads(json.dumps(judged))
    low, high = recorded["ci95"]["output_tokens_per_s"]
    assert low < recorded["output_tokens_per_s"] < high  # a real width
    assert recorded["ci95"]["itl_p95_ms"] == step.token_interval("itl", 95).as_list()
    search = TokenPlateauSearch(4, 8)
    search.first()
    search.feed(step)
    assert search.verdict().as_dict()["llm"] == recorded  # the plateau's and the step's: one figure


def test_a_step_no_token_search_judged_is_cut_by_the_recorder_cooldown_and_all():
    """A step cut by user count (a step shape, a requests plateau) has its `llm` from the recorder, over
    the window it keeps (its contiguous span: one `Second` of 16 s here) less `--cooldown-s`: the cut ends
    the span 3 s early, it does not drop it."""
    seconds = steady_timeline(T0, users_per_step=(4,), step_s=20)
    stats = noisy_stats()
    stats.trim = FigureTrim(cooldown_s=3.0)
    timeline = RunTimeline()
    timeline.extend(seconds)
    (record, kept), = timeline.measured_steps()
    assert len(kept) == 1 and kept[0].interval == 16.0
    llm = stats.annotate({"steps": [record]}, (), T0, T0 + 20, windows=[kept])["steps"][0]["llm"]
    window = step_windows(seconds)[0][:-3]
    assert llm == stats._step_figures(window) and llm["requests"] == stats.over(window).requests > 0
    assert llm["requests"] < stats.over(step_windows(seconds)[0]).requests
    assert llm["ci95"]["output_tokens_per_s"] is not None
