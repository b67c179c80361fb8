"""The figures a run's options asked for, in `sm-locust run`'s closing lines: a model mix's cache
hit rate with cold and warm latency (for streams to LoRA adapters, cold and warm TTFT too), an LLM
run's output tokens/s with TTFT and ITL (and a `--turns` run's TTFT p95 turn by turn), an async
run's time to result (`--async-result s3`).

Why: a multi-model run never printed its hit rate and an LLM run its tokens; both were only in
summary.json (and later the report). Pure: summary.json's records in, lines out (the report adds the
priced figures, `report.render.closing_rows`).
"""

from __future__ import annotations

from sm_locust.record.asyncsummary import AsyncSummary
from sm_locust.record.model import CacheSide, JsonObject, Llm, Summary, load_words
from sm_locust.util.formatting import latency, number, percent_interval


def _verdict_llm(summary: Summary) -> tuple[Llm | None, str]:
    """The token figures of the verdict's step when the search named one, else the whole run's."""
    users = summary.plateau.users if summary.plateau is not None else None
    for step in summary.steps:
        if users is not None and step.users == users and step.llm is not None:
            return step.llm, f"at the verdict's step, {load_words(users, None)}"
    excluded = summary.llm.excluded if summary.llm is not None else None
    if excluded and excluded.get("applied"):  # --warmup-s / --cooldown-s left the run's edges out
        return summary.llm, (f"whole run without its first {float(excluded.get('warmup_s') or 0):g} s and last "
                             f"{float(excluded.get('cooldown_s') or 0):g} s")
    return summary.llm, "whole run"


def answer_lines(summary: Summary | JsonObject) -> list[str]:
    """'cache: ...' for a run with a model cache, 'tokens: ...' for a run that counted tokens, 'async: ...'
    for one that waited for async results; [] else."""
    record = Summary.of(summary)
    lines = []
    cache = record.model_cache
    if cache is not None:
        if cache.hit_rate is None:
            lines.append("cache: cold and warm requests not told apart (no marks, no two latency modes)")
        else:
            cold, warm = cache.cold or CacheSide(), cache.warm or CacheSide()
            hit = percent_interval(cache.hit_rate, cache.hit_rate_ci95)
            lines.append(f"cache: hit rate {hit} of {number(cache.requests, 0)} "
                         f"successful requests ({number(cold.requests, 0)} cold); p95 cold "
                         f"{latency(cold.p95_ms, ' ms')}, warm {latency(warm.p95_ms, ' ms')}")
        if cache.ttft_cold is not None or cache.ttft_warm is not None:  # streams (an LLM's LoRA adapters)
            cold, warm = cache.ttft_cold or CacheSide(), cache.ttft_warm or CacheSide()
            lines.append(f"TTFT cold p50 / p95 {latency(cold.p50_ms)} / {latency(cold.p95_ms, ' ms')} "
                         f"({number(cold.requests or 0, 0)} cold), warm {latency(warm.p50_ms)} / "
                         f"{latency(warm.p95_ms, ' ms')} ({number(warm.requests or 0, 0)} warm)")
    if record.llm is not None:
        at, where = _verdict_llm(record)
        lines.append(f"tokens: {number(at.output_tokens_per_s if at else None)} output tokens/s ({where}); TTFT p95 "
                     f"{latency(at.ttft_p95_ms if at else None, ' ms')}, ITL p95 "
                     f"{latency(at.itl_p95_ms if at else None, ' ms')}")
        if record.llm.turns:
            turns = record.llm.turns
            lines.append(f"turns 1-{len(turns)}: TTFT p95 {' / '.join(latency(t.ttft_p95_ms) for t in turns)} ms, "
                         f"prompt tokens {' / '.join(number(t.input_tokens_mean, 0) for t in turns)}")
    if record.async_ is not None:
        lines.append(AsyncSummary.from_json(record.async_.to_json()).closing_line())
    return lines
