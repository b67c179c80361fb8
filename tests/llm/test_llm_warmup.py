"""`--warmup-s` / `--cooldown-s`: the run's first and last seconds (and each step's last) are sent but not counted
in summary.json `llm`, which says how many answers and tokens were left out."""

from __future__ import annotations

import locust  # noqa: F401  (gevent monkey-patching before the recorder's imports)

import pytest

from sm_locust.config.options import parse_options
from sm_locust.errors import UsageError
from sm_locust.llm.tokens import SERVER, RequestTokens
from sm_locust.measure.timeline import Second
from sm_locust.record.llm import LlmStats, step_windows
from sm_locust.record.llm_options import NO_TRIM, FigureTrim
from sm_locust.record.model import Summary
from sm_locust.record.summary import step_records

T0 = 1_000_000.0


def answer(ttft: float) -> RequestTokens:
    return RequestTokens(e2e_ms=100.0, ttft_ms=ttft, itl_ms=[10.0] * 4, output_tokens=5, input_tokens=10,
                         source=SERVER)


def run_of_20_seconds() -> tuple[LlmStats, list[Second]]:
    """10 answers a second for 20 s; the first 3 s and the last 2 s answer slowly (TTFT 900 ms, else 50 ms)."""
    stats = LlmStats()
    stats.clock = lambda: T0 + 60.0
    seconds = []
    for i in range(20):
        ttft = 900.0 if i < 3 or i >= 18 else 50.0
        for _ in range(10):
            stats.add(answer(ttft), now=T0 + i + 0.5)
        users = 2 if i < 10 else 4
        seconds.append(Second(t=T0 + i + 1, users=users, spawning=False, requests=10, failures=0, hist={50: 10}))
    return stats, seconds


def test_without_trims_every_answer_counts():
    stats, seconds = run_of_20_seconds()
    llm = stats.annotate({"steps": step_records(seconds)}, seconds, T0, T0 + 20)["llm"]
    assert llm["requests"] == 200 and "excluded" not in llm and llm["ttft_p95_ms"] > 800


def test_the_first_and_last_seconds_are_sent_but_not_counted():
    stats, seconds = run_of_20_seconds()
    stats.trim = FigureTrim(warmup_s=3.0, cooldown_s=2.0)
    summary = stats.annotate({"steps": step_records(seconds)}, seconds, T0, T0 + 20)
    llm = summary["llm"]
    assert llm["requests"] == 150 and llm["output_tokens"] == 750 and llm["output_tokens_per_s"] == 50.0
    assert llm["ttft_p95_ms"] < 100 and llm["ci95"]["ttft_p95_ms"][1] < 100  # the slow edges are gone, intervals too
    assert llm["excluded"] == {"warmup_s": 3.0, "cooldown_s": 2.0, "applied": True, "requests": 50,
                               "output_tokens": 250.0}
    # each step loses its last 2 s too (its start: the steady window's 20 %)
    windows = step_windows(seconds)
    assert [len(w) for w in windows] == [8, 8] and [len(stats.trim.step_window(w)) for w in windows] == [6, 6]
    assert [s["llm"]["requests"] for s in summary["steps"]] == [60, 60]
    assert Summary.from_json({"schema": 1, "llm": llm}, check=False).llm.excluded["requests"] == 50


def test_trims_longer_than_the_run_leave_the_figures_whole_and_say_so():
    stats, seconds = run_of_20_seconds()
    stats.trim = FigureTrim(warmup_s=15.0, cooldown_s=10.0)
    llm = stats.annotate({"steps": []}, seconds, T0, T0 + 20)["llm"]
    assert llm["requests"] == 200 and llm["excluded"]["applied"] is False and llm["excluded"]["requests"] == 0
    assert FigureTrim(15.0, 10.0).run_window(T0, T0 + 20) is None and FigureTrim(1.0, 1.0).run_window(0, 5) == (1, 4)
    assert not NO_TRIM.active and NO_TRIM.step_window(seconds[:3]) == seconds[:3]


def test_the_options_are_checked():
    options = parse_options({"warmup_s": "30", "cooldown_s": 5})
    assert FigureTrim.from_options(options) == FigureTrim(30.0, 5.0)
    with pytest.raises(UsageError, match="--cooldown-s"):
        parse_options({"cooldown_s": -1})
