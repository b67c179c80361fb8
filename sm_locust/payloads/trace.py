"""The requests of a trace replay (`--trace FILE`): one LLM invocation per traced row, built when it is due.

A trace of 20,000 rows of 12,000-token prompts would be gigabytes as bodies, so `TracePool` keeps the
rows and writes each row's body when asked (`invocation(i)`: `sm_locust.llm.trace.TracePrompts`, the
run's template, `output_length` asked as max_new_tokens / max_tokens). Everything that
can be wrong is checked when the pool is made: the file, each row's largest possible body against
SageMaker's 6 MB, the first row's prompt under `--tokenizer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.llm.tokenizer import Tokenizer, words_for
from sm_locust.llm.tokens import INPUT_TOKENS
from sm_locust.llm.trace import Trace, TracePrompts, read_trace

BODY_MARGIN = 1024
"""Bytes a request body adds around its prompt (the template's keys, max_new_tokens, stream options)."""


class TracePool:
    """A trace's invocations, in its time order; `invocation(i)` builds row i's."""

    selection = "trace"

    def __init__(self, trace: Trace, prompts: TracePrompts, make_body: Callable[[str, int], dict],
                 headers: dict[str, Any] | None = None):
        self.trace = trace
        self.prompts = prompts
        self.description = f"trace:{trace.source}"
        self.invocations: list[Invocation] = []  # built on demand (PreparedPayloads reads it for --split only)
        self._fields = {k: v for k, v in (headers or {}).items() if v is not None}
        self._body = make_body
        self._next = 0
        for row in trace.rows:
            if prompts.longest_body_bytes(row) + BODY_MARGIN > MAX_BODY_BYTES:
                raise UsageError(f"--trace {trace.source!r} line {row.line}: input_length {row.input_length:,} "
                                 f"makes a request body over {MAX_BODY_BYTES:,} bytes (6 MB), SageMaker's limit; "
                                 "drop that line")
        self.invocation(0)  # the tokenizer can write this trace's prompts: known now, not mid-run

    def __len__(self) -> int:
        return len(self.trace.rows)

    def invocation(self, index: int) -> Invocation:
        row = self.trace.rows[index]
        prompt = self.prompts.prompt(row, index)
        body = orjson.dumps(self._body(prompt, row.output_length))
        invocation = Invocation(body=body, content_type="application/json", rows=1, **self._fields)
        invocation.extra[INPUT_TOKENS] = row.input_length
        return invocation

    def next(self) -> Invocation:
        """The rows one after another, round and round (a closed-loop user given a trace)."""
        index, self._next = self._next, (self._next + 1) % len(self)
        return self.invocation(index)

    def sizes(self) -> dict:
        """summary.json's `payload` sizes: requests and tokens (bodies are built when sent)."""
        return {"count": len(self), "input_tokens": sum(r.input_length for r in self.trace.rows),
                "output_tokens": sum(r.output_length for r in self.trace.rows)}


def trace_pool(path: str, make_body: Callable[[str, int], dict], *, tokenizer: Tokenizer | None,
               english: list[str], seed: int = 0, headers: dict[str, Any] | None = None) -> TracePool:
    """The pool of `--trace path`: `make_body(prompt, output_length)` the request (the run's template), prompts
    of one-token words (`english`, or the tokenizer's own) checked by `tokenizer` when given."""
    trace = read_trace(path)
    words = words_for(tokenizer, english) if tokenizer is not None else english
    prompts = TracePrompts(words, seed, tokenizer.count if tokenizer is not None else None)
    return TracePool(trace, prompts, make_body, headers)
