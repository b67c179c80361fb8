"""`sm-locust run`'s closing lines for what a run's options asked (core/answers.py): a model mix's
hit rate with cold and warm latency, an LLM run's tokens at the verdict's step."""

from __future__ import annotations

from sm_locust.core.answers import answer_lines


def test_a_plain_run_has_nothing_to_add():
    assert answer_lines({"totals": {"requests": 10}}) == []


def test_a_model_mix_prints_its_hit_rate_and_cold_vs_warm():
    summary = {"model_cache": {"requests": 1000, "hit_rate": 0.9, "cold": {"requests": 100, "p95_ms": 1234.0},
                               "warm": {"requests": 900, "p95_ms": 35.2}}}
    assert answer_lines(summary) == [
        "cache: hit rate 90.0 % of 1,000 successful requests (100 cold); p95 cold 1,234 ms, warm 35.2 ms"]
    summary["model_cache"]["hit_rate_ci95"] = [0.88, 0.92]
    assert answer_lines(summary)[0].startswith("cache: hit rate 90.0 % (±2.0) of 1,000 successful requests")
    unsplit = {"model_cache": {"requests": 10, "hit_rate": None}}
    assert answer_lines(unsplit)[0].startswith("cache: cold and warm requests not told apart")


def test_an_llm_run_prints_its_tokens_at_the_verdicts_step():
    summary = {"llm": {"output_tokens_per_s": 75.0, "ttft_p95_ms": 400.0, "itl_p95_ms": 40.0},
               "plateau": {"users": 4},
               "steps": [{"users": 1, "llm": {"output_tokens_per_s": 36.0}},
                         {"users": 4, "llm": {"output_tokens_per_s": 116.4, "ttft_p95_ms": 227.0, "itl_p95_ms": 35.9}}]}
    assert answer_lines(summary) == [
        "tokens: 116.4 output tokens/s (at the verdict's step, 4 users); TTFT p95 227 ms, ITL p95 35.9 ms"]
    del summary["plateau"]
    assert answer_lines(summary)[0].startswith("tokens: 75.0 output tokens/s (whole run)")
    summary["llm"]["excluded"] = {"warmup_s": 3.0, "cooldown_s": 0.5, "applied": True, "requests": 9}
    assert answer_lines(summary)[0].startswith(
        "tokens: 75.0 output tokens/s (whole run without its first 3 s and last 0.5 s)")
    summary["llm"]["excluded"]["applied"] = False
    assert answer_lines(summary)[0].startswith("tokens: 75.0 output tokens/s (whole run)")


def test_a_multi_turn_run_prints_ttft_turn_by_turn():
    turns = [{"turn": k, "requests": 10, "input_tokens_mean": 64.0 + 80.0 * (k - 1), "ttft_p95_ms": ttft}
             for k, ttft in ((1, 68.0), (2, 75.4), (3, 1234.0))]
    lines = answer_lines({"llm": {"output_tokens_per_s": 75.0, "turns": turns}})
    assert lines[1] == "turns 1-3: TTFT p95 68 / 75.4 / 1,234 ms, prompt tokens 64 / 144 / 224"


def test_streams_to_lora_adapters_print_ttft_cold_and_warm():
    summary = {"model_cache": {"requests": 97, "hit_rate": 0.546, "cold": {"requests": 44, "p95_ms": 2100.0},
                               "warm": {"requests": 53, "p95_ms": 530.0},
                               "ttft_cold": {"requests": 44, "p50_ms": 460.0, "p95_ms": 1700.0},
                               "ttft_warm": {"requests": 55, "p50_ms": 68.0, "p95_ms": 76.0}}}
    lines = answer_lines(summary)
    assert lines[1] == "TTFT cold p50 / p95 460 / 1,700 ms (44 cold), warm 68 / 76 ms (55 warm)"
    del summary["model_cache"]["ttft_cold"], summary["model_cache"]["ttft_warm"]
    assert len(answer_lines(summary)) == 1  # no streams: no TTFT line
