"""The figures a run's options asked for, in `sm-locust run`'s closing lines: a model mix's cache
hit rate with cold and warm latency, an LLM run's output tokens/s with TTFT and ITL, an async run's
time to result (`--async-result s3`).

Why: a multi-model run never printed its hit rate and an LLM run its tokens; both were only in
summary.json (and later the report). Pure: summary.json's dict in, lines out (the report adds the
priced figures, `report.render.closing_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sm_locust.record.asyncsummary import AsyncSummary
from sm_locust.util.formatting import latency, number, percent


def _verdict_llm(summary: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The token figures of the verdict's step when the search named one, else the whole run's."""
    plateau = summary.get("plateau") or {}
    users = plateau.get("users")
    for step in summary.get("steps") or []:
        if users is not None and step.get("users") == users and isinstance(step.get("llm"), dict):
            return step["llm"], f"at the verdict's step, {users} users"
    return summary.get("llm") or {}, "whole run"


def answer_lines(summary: Mapping[str, Any]) -> list[str]:
    """'cache: ...' for a run with a model cache, 'tokens: ...' for a run that counted tokens, 'async: ...'
    for one that waited for async results; [] else."""
    lines = []
    cache = summary.get("model_cache")
    if isinstance(cache, dict):
        if cache.get("hit_rate") is None:
            lines.append("cache: cold and warm requests not told apart (no marks, no two latency modes)")
        else:
            cold, warm = cache.get("cold") or {}, cache.get("warm") or {}
            lines.append(f"cache: hit rate {percent(cache['hit_rate'])} of {number(cache.get('requests'), 0)} "
                         f"successful requests ({number(cold.get('requests'), 0)} cold); p95 cold "
                         f"{latency(cold.get('p95_ms'), ' ms')}, warm {latency(warm.get('p95_ms'), ' ms')}")
    if isinstance(summary.get("llm"), dict):
        at, where = _verdict_llm(summary)
        lines.append(f"tokens: {number(at.get('output_tokens_per_s'))} output tokens/s ({where}); TTFT p95 "
                     f"{latency(at.get('ttft_p95_ms'), ' ms')}, ITL p95 {latency(at.get('itl_p95_ms'), ' ms')}")
    if isinstance(summary.get("async"), dict):
        lines.append(AsyncSummary.from_json(summary["async"]).closing_line())
    return lines
