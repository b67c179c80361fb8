"""LLM figures of a run: tokens and per-token latencies, per second, per step and for the run.

`token_accounting(call, environment)` wraps the call a User makes (`client.invoke_stream`, or
`client.invoke` for LLM requests) and, for every answer that came back, counts its tokens
(`sm_locust.llm.tokens`: the server's counts preferred) and times them: TTFT, each inter-token gap
(ITL), time per output token, end-to-end latency, input / output tokens, output tokens/s. Failed
calls carry no tokens and are not counted here (the request entry counts them as usual). A stream
whose chunks carry no recognisable token is timed as any stream and said so once per process.

`LlmStats` (one per Locust process, `for_environment`) keeps those samples in per-second buckets
(keyed by the epoch second the answer completed in, as the recorder's master timeline is), each a
few counters and ~2-significant-digit histograms, so a long run stays small and a worker can ship
its buckets to the master inside Locust's own reports (`report_to_master` / `worker_report`).
`annotate(summary, seconds, ...)` adds the `llm` object to summary.json whenever tokens were
counted, for the run and for each step (over the step's steady window, the same seconds its rps
comes from): `ttft_p50_ms` .. `ttft_p99_ms`, `itl_p50_ms` .. `itl_p99_ms`, `tpot_p50_ms`,
`tpot_p95_ms`, `e2e_p50_ms`, `e2e_p95_ms`, `input_tokens` (the server's counts, else the sender's),
`output_tokens_per_s` (the output tokens that arrived in the window / its length: a stream's tokens
count in the second each arrived, so a step's rate does not jump with the few answers that happen
to complete in it), `output_tokens` (of the answers completed in the window),
`request_output_tokens_per_s_p50` (one answer's own rate), `requests`, `tokens_source`
(`server`, `counted`, or `mixed` when some answers had the server's counts and some did not) and
`unrecognised_streams`. docs/llm.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sm_locust.llm.tokens import (
    COUNTED,
    INPUT_TOKENS,
    SERVER,
    RequestTokens,
    count_response,
    count_stream,
    response_figures,
    stream_figures,
)
from sm_locust.options import option_value, parse_bool
from sm_locust.plateau.steady import histogram_percentile, split_steps, steady_window, timeline_mode
from sm_locust.plateau.timeline import Second

log = logging.getLogger(__name__)
REPORT_KEY = "sm_locust_llm"
MIXED = "mixed"
_HISTOGRAMS = ("ttft", "itl", "tpot", "e2e", "rate")


def _key(value: float) -> int:
    """A value (ms, or tokens/s) in tenths, rounded to ~2-3 significant digits (bounded histograms)."""
    if value < 100.0:
        return int(round(value * 10.0))
    if value < 1000.0:
        return int(round(value)) * 10
    if value < 10000.0:
        return int(round(value / 10.0)) * 100
    return int(round(value / 100.0)) * 1000


def _percentile(hist: Mapping[int, int], pct: float) -> float | None:
    value = histogram_percentile(hist, pct)
    return None if value is None else round(value / 10.0, 3)


@dataclass
class Bucket:
    """The LLM answers of one second (or, merged, of a window)."""

    requests: int = 0
    output_tokens: int = 0
    input_tokens: int = 0
    input_known: int = 0
    server: int = 0
    counted: int = 0
    unrecognised: int = 0
    arrived: float = 0.0
    """Output tokens that arrived in this second (a stream's tokens when each came; else at completion)."""
    hists: dict[str, dict[int, int]] = field(default_factory=lambda: {name: {} for name in _HISTOGRAMS})

    def add(self, sample: RequestTokens) -> None:
        if sample.source is None:
            self.unrecognised += 1
            return
        self.requests += 1
        self.output_tokens += sample.output_tokens or 0
        if sample.input_tokens is not None:
            self.input_tokens += sample.input_tokens
            self.input_known += 1
        if sample.source == SERVER:
            self.server += 1
        else:
            self.counted += 1
        values = {"ttft": [sample.ttft_ms] if sample.ttft_ms is not None else [], "itl": sample.itl_ms,
                  "tpot": [sample.tpot_ms] if sample.tpot_ms is not None else [], "e2e": [sample.e2e_ms],
                  "rate": [sample.output_tokens_per_s] if sample.output_tokens_per_s is not None else []}
        for name, series in values.items():
            hist = self.hists[name]
            for value in series:
                key = _key(value)
                hist[key] = hist.get(key, 0) + 1

    def merge(self, other: Bucket) -> Bucket:
        for name in ("requests", "output_tokens", "input_tokens", "input_known", "server", "counted", "unrecognised",
                     "arrived"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name, hist in other.hists.items():
            mine = self.hists.setdefault(name, {})
            for key, count in hist.items():
                mine[key] = mine.get(key, 0) + count
        return self

    def to_wire(self) -> dict:
        """Plain data for a worker report (msgpack: int keys are fine)."""
        return {"n": [self.requests, self.output_tokens, self.input_tokens, self.input_known, self.server, self.counted,
                      self.unrecognised, self.arrived], "h": {name: dict(hist) for name, hist in self.hists.items() if hist}}

    @classmethod
    def from_wire(cls, data: Mapping) -> Bucket:
        bucket = cls(*data["n"])
        for name, hist in (data.get("h") or {}).items():
            bucket.hists[name] = {int(k): int(v) for k, v in hist.items()}
        return bucket

    @property
    def source(self) -> str | None:
        if not self.requests:
            return None
        if self.server and self.counted:
            return MIXED
        return SERVER if self.server else COUNTED

    def figures(self, duration_s: float) -> dict | None:
        """summary.json's `llm` object for a window of `duration_s` seconds; None when no tokens were counted."""
        if not self.requests and not self.arrived:
            return None
        h = self.hists
        return {
            "requests": self.requests,
            "ttft_p50_ms": _percentile(h["ttft"], 50.0),
            "ttft_p95_ms": _percentile(h["ttft"], 95.0),
            "ttft_p99_ms": _percentile(h["ttft"], 99.0),
            "itl_p50_ms": _percentile(h["itl"], 50.0),
            "itl_p95_ms": _percentile(h["itl"], 95.0),
            "itl_p99_ms": _percentile(h["itl"], 99.0),
            "tpot_p50_ms": _percentile(h["tpot"], 50.0),
            "tpot_p95_ms": _percentile(h["tpot"], 95.0),
            "e2e_p50_ms": _percentile(h["e2e"], 50.0),
            "e2e_p95_ms": _percentile(h["e2e"], 95.0),
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens if self.input_known else None,
            "output_tokens_per_s": round(self.arrived / duration_s, 3) if duration_s > 0 else None,
            "request_output_tokens_per_s_p50": _percentile(h["rate"], 50.0),
            "tokens_source": self.source,
            "unrecognised_streams": self.unrecognised,
        }


def merged(buckets: Iterable[Bucket]) -> Bucket:
    out = Bucket()
    for bucket in buckets:
        out.merge(bucket)
    return out


def sample_of(result: Any, invocation: Any, e2e_ms: float, responses: bool = True) -> RequestTokens | None:
    """The LLM sample of one successful call's result (a StreamResult, or an InvokeResult when
    `responses`), or None when the result is not one to count."""
    input_tokens = getattr(invocation, "extra", {}).get(INPUT_TOKENS)
    if hasattr(result, "chunks"):  # a StreamResult
        count = count_stream(result.chunks)
        return stream_figures(count, result.ttft_ms, result.inter_chunk_ms, e2e_ms, input_tokens)
    if responses and hasattr(result, "body"):
        return response_figures(count_response(result.body), e2e_ms, input_tokens)
    return None


def step_windows(seconds: Sequence[Second]) -> list[tuple[float, float, float]]:
    """(start, end, duration) of each step's steady window, in the order summary.json lists steps
    (`split_steps` + `steady_window`, as `plateau.steady.measure_step` cuts them)."""
    out = []
    for step in split_steps(seconds, timeline_mode(seconds)):
        window = steady_window(step) or [s for s in step if not s.spawning] or list(step)
        out.append((window[0].t - window[0].interval, window[-1].t, sum(s.interval for s in window)))
    return out


class LlmStats:
    """One Locust process's LLM buckets; on a master also the workers' (registers its own handlers)."""

    def __init__(self, environment: Any = None):
        self.buckets: dict[int, Bucket] = {}
        self.warned = False
        if environment is not None:
            events = environment.events
            events.test_start.add_listener(self._on_test_start)
            events.report_to_master.add_listener(self._on_report_to_master)
            events.worker_report.add_listener(self._on_worker_report)

    @classmethod
    def for_environment(cls, environment: Any) -> LlmStats:
        stats = getattr(environment, "sm_locust_llm", None)
        if stats is None:
            stats = cls(environment)
            environment.sm_locust_llm = stats
        return stats

    # -- recording -------------------------------------------------------------------------------
    def add(self, sample: RequestTokens, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._bucket(int(now)).add(sample)
        if sample.output_tokens:
            times = sample.token_times_ms
            if times:  # each streamed token in the second it arrived (the server's count spread over them)
                start = now - sample.e2e_ms / 1000.0
                weight = sample.output_tokens / len(times)
                for t in times:
                    self._bucket(int(start + t / 1000.0)).arrived += weight
            else:
                self._bucket(int(now)).arrived += sample.output_tokens
        if sample.source is None and not self.warned:
            self.warned = True
            log.warning("sm-locust: a stream's chunks carry no recognisable tokens (TGI/LMI JSON lines with \"token\", "
                        "or OpenAI-style SSE choices[].delta); it is timed, its tokens are not counted")

    def _bucket(self, second: int) -> Bucket:
        bucket = self.buckets.get(second)
        if bucket is None:
            bucket = self.buckets[second] = Bucket()
        return bucket

    def _on_test_start(self, **_kw) -> None:
        self.buckets = {}

    def _on_report_to_master(self, client_id: str, data: dict, **_kw) -> None:  # worker side: ship, then forget
        if self.buckets:
            data[REPORT_KEY] = {second: bucket.to_wire() for second, bucket in self.buckets.items()}
            self.buckets = {}

    def _on_worker_report(self, client_id: str, data: dict, **_kw) -> None:  # master side
        for second, wire in (data.get(REPORT_KEY) or {}).items():
            second = int(second)
            bucket = self.buckets.get(second)
            if bucket is None:
                bucket = self.buckets[second] = Bucket()
            bucket.merge(Bucket.from_wire(wire))

    # -- reading ---------------------------------------------------------------------------------
    def window(self, start: float, end: float) -> Bucket:
        """The answers completed in (start, end]: the seconds whose middle lies in it."""
        return merged(b for s, b in self.buckets.items() if start < s + 0.5 <= end)

    def figures(self, start: float, end: float, duration_s: float | None = None) -> dict | None:
        return self.window(start, end).figures(end - start if duration_s is None else duration_s)

    def annotate(self, summary: dict, seconds: Sequence[Second], started_at: float, ended_at: float) -> dict:
        """Add `llm` to summary.json and to each of its steps when tokens were counted; returns it."""
        run = merged(self.buckets.values()).figures(max(1e-9, ended_at - started_at))
        if run is None:
            return summary
        summary["llm"] = run
        steps = summary.get("steps") or []
        windows = step_windows(seconds)
        if len(windows) == len(steps):
            for record, (start, end, duration) in zip(steps, windows):
                figures = self.figures(start, end, duration)
                if figures is not None:
                    record["llm"] = figures
        return summary


def token_accounting(call: Callable, environment: Any, *, responses: bool = False) -> Callable:
    """`call` (e.g. `client.invoke_stream`), recording each answer's tokens into the process's
    `LlmStats`. Streams are always counted; non-streamed answers with `responses=True` (LLM
    requests). The result is returned unchanged."""
    stats = LlmStats.for_environment(environment)
    clock = time.perf_counter

    def counted(invocation, *args, **kwargs):
        started = clock()
        result = call(invocation, *args, **kwargs)
        if result is not None:
            e2e_ms = (clock() - started) * 1000.0
            try:
                sample = sample_of(result, invocation, e2e_ms, responses)
            except Exception:  # never let accounting break the User
                log.exception("sm-locust: token accounting failed")
                sample = None
            if sample is not None:
                stats.add(sample)
        return result

    return counted


def accounting_for(call: Callable, environment: Any, options: Any) -> Callable:
    """The default locustfile's call with token accounting when the run is an LLM one (`--prompts`)
    or streams (`--stream`); else `call` itself."""
    stream = parse_bool(option_value(options, "stream"), "--stream")
    llm = bool(option_value(options, "prompts"))
    if not (stream or llm):
        return call
    return token_accounting(call, environment, responses=llm)
