"""LLM figures of a run: tokens and per-token latencies, per second, per step and for the run.

`token_accounting(call, environment)` wraps a User's call and counts and times each answer's tokens
(`sm_locust.llm.tokens`); failed calls carry no tokens, and a stream's in-band error fails it.
`LlmStats` (one per process) keeps per-second buckets of counters and histograms that workers ship
to the master; memory is bounded (seconds merge into minutes, then hours) and the run's figures stay
exact. `annotate` adds summary.json's `llm` object for the run and each step's steady window (keys:
docs/summary.md); `output_tokens_per_s` counts each token in the second it arrived, and the run's
and each step's `ci95` hold the intervals (`plateau.tokens.token_intervals`). A step the token search
judged already carries its own `llm`, the figures it decided on (`TokenStep.llm_figures`): it is kept,
never recut. A `--turns` run's answers are also kept per turn index (an `LlmStats` each, the same
buckets and intervals), summary.json's `llm.turns`. docs/llm.md.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gevent import getcurrent

from sm_locust.config.options import Options
from sm_locust.invocation import InvocationError
from sm_locust.llm.tokenizer import text_counter
from sm_locust.llm.tokens import (
    INPUT_TOKENS,
    TURN,
    RequestTokens,
    StreamTokens,
    count_response,
    count_stream,
    estimate_tokens,
    response_figures,
    stream_figures,
)
from sm_locust.measure.steady import split_steps, steady_window, timeline_mode
from sm_locust.measure.timeline import Second
from sm_locust.plateau.tokens import INTERVAL_SERIES, Bucket, merged, token_intervals
from sm_locust.record.llm_options import NO_TRIM, FigureTrim
from sm_locust.record.model import LlmTurn
from sm_locust.record.requests_log import request_log_of
from sm_locust.util.shipped import WorkerShipped

log = logging.getLogger(__name__)
REPORT_KEY = "sm_locust_llm"
FINE_S = 600  # seconds kept one by one
MINUTE_S = 60
HOUR_S = 3600
HOURS_AFTER_S = 7200  # minutes older than this are merged into hours
SETTLED_S = 30  # a step window that ended this long ago has all its answers (workers report every 3 s)
TURNS_KEY = "turns"  # a worker report's per-turn buckets ({turn: its LlmStats' delta}); the seconds are ints
TURN_SERIES = ("ttft", "itl", "e2e")  # each turn's


def sample_of(result: Any, invocation: Any, e2e_ms: float, responses: bool = True,
              count_text: Callable[[str], int] = estimate_tokens) -> RequestTokens | None:
    """The LLM sample of one successful call's result (a StreamResult, or an InvokeResult when
    `responses`), or None when the result is not one to count; `count_text` counts a non-streamed
    answer's text when the server gives no count."""
    input_tokens = getattr(invocation, "extra", {}).get(INPUT_TOKENS)
    if hasattr(result, "chunks"):  # a StreamResult
        count = count_stream(result.chunks)
        if count.error is not None:  # failed in-band (a client without a chunk_listener reported it as a success)
            return None
        return stream_figures(count, result.ttft_ms, result.inter_chunk_ms, e2e_ms, input_tokens)
    if responses and hasattr(result, "body"):
        return response_figures(count_response(result.body, count_text), e2e_ms, input_tokens)
    return None


@dataclass
class Live:
    """One stream's tokens as they arrive: the parser, and what was counted in which second."""

    parser: StreamTokens = field(default_factory=StreamTokens)
    added: dict[int, float] = field(default_factory=dict)
    total: float = 0.0
    failure: InvocationError | None = None
    """The stream's in-band error as the failure its entry reports, once seen."""


def step_windows(seconds: Sequence[Second]) -> list[list[Second]]:
    """Each step's steady window, in the order summary.json lists steps (`split_steps` +
    `steady_window`, as `measure.steady.measure_step` cuts them)."""
    return [steady_window(step) or [s for s in step if not s.spawning] or list(step)
            for step in split_steps(seconds, timeline_mode(seconds))]


def one_second_pieces(window: Sequence[Second]) -> list[tuple[float, float]]:
    """The (start, end] of each second of a window, the samples its intervals come from: a timeline
    second as it is, a merged span (the recorder keeps a step's window as its contiguous spans) cut
    into seconds from its start, a remainder under half a second joined to the second before it."""
    pieces: list[tuple[float, float]] = []
    for second in window:
        start, end = second.t - second.interval, second.t
        cut = [start]
        while end - cut[-1] >= 1.5:
            cut.append(cut[-1] + 1.0)
        pieces += list(zip(cut, [*cut[1:], end], strict=True))
    return pieces


def _overlap(second: int, start: float, end: float, now: float) -> float:
    """The share of second `second`'s tokens that arrived in (start, end], arrivals taken as even over
    the second, or over its part so far when it is the current one (it is still filling up)."""
    filled = min(1.0, now - second)
    if filled <= 0:
        return 0.0
    return max(0.0, min(second + filled, end) - max(float(second), start)) / filled


class LlmStats(WorkerShipped):
    """One Locust process's LLM buckets; on a master also the workers' (registers its own handlers)."""

    ATTRIBUTE = "sm_locust_llm"
    REPORT_KEY = REPORT_KEY

    def __init__(self, environment: object = None):
        self.buckets: dict[int, Bucket] = {}
        """The per-second buckets of the last FINE_S seconds (and any later arrival for an older one)."""
        self.coarse: dict[tuple[int, int], Bucket] = {}
        """Older seconds merged: (start, width) -> bucket, width MINUTE_S or HOUR_S."""
        self._newest: int | None = None
        self._settled: dict[tuple[float, float, int], dict | None] = {}  # finished step windows' figures
        self.warned = False
        self._live: dict[Any, Live] = {}
        self.clock: Callable[[], float] = time.time
        self.trim: FigureTrim = NO_TRIM
        """`--warmup-s`, `--cooldown-s`: what the figures leave out (the locustfile sets it per test)."""
        self.turns: dict[int, LlmStats] = {}
        """`--turns`: the answers of each turn index (1 = a conversation's first), kept as the run's are."""
        if environment is not None:
            self.attach(environment)

    # -- recording -------------------------------------------------------------------------------
    def add(self, sample: RequestTokens, now: float | None = None, live: Live | None = None,
            turn: int | None = None) -> None:
        """One answer's figures, in the second it completed; its output tokens in the seconds they arrived:
        already counted live (`live`, then only the server's correction is added now), else spread over
        the stream's token times, else all now. `turn`: its conversation turn, kept per turn index too."""
        now = time.time() if now is None else now
        if turn is not None:
            self._turn(turn).add(sample, now)
        self._bucket(int(now)).add(sample)
        if live is not None:
            extra = (sample.output_tokens or 0) - live.total  # the server counted more (or fewer) than seen
            if extra:
                self._bucket(int(now)).arrived += extra
        elif sample.output_tokens:
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

    # -- live: tokens counted as each PayloadPart arrives (the client's chunk_listener) ----------
    def on_chunk(self, payload: bytes) -> InvocationError | None:
        """A PayloadPart of the stream the calling greenlet is reading: its tokens count now; returns
        the stream's in-band error once the parser has seen one (the client then fails the stream)."""
        key = getcurrent()
        live = self._live.get(key)
        if live is None:
            live = self._live[key] = Live()
        tokens = live.parser.feed(payload)
        if tokens:
            second = int(time.time())
            self._bucket(second).arrived += tokens
            live.added[second] = live.added.get(second, 0) + tokens
            live.total += tokens
        if live.failure is None and live.parser.error is not None:
            live.failure = InvocationError(live.parser.error.code, live.parser.error.message)
        return live.failure

    def take_live(self) -> Live | None:
        """The calling greenlet's live count of the stream it just finished (None when none ran)."""
        return self._live.pop(getcurrent(), None)

    def discard(self, live: Live) -> None:
        """A stream that failed: its tokens, counted as they came, are taken back (failures carry none)."""
        for second, tokens in live.added.items():
            self._bucket(second).arrived -= tokens

    def _turn(self, turn: int) -> LlmStats:
        stats = self.turns.get(turn)
        if stats is None:
            stats = self.turns[turn] = LlmStats()
            stats.clock = self.clock
        return stats

    def _bucket(self, second: int) -> Bucket:
        bucket = self.buckets.get(second)
        if bucket is None:
            bucket = self.buckets[second] = Bucket()
            if self._newest is None or second > self._newest:
                self._newest = second
                if second % MINUTE_S == 0:
                    self.compact()
        return bucket

    def compact(self) -> None:
        """Merge the seconds older than FINE_S (before the newest) into minutes, and the minutes older
        than HOURS_AFTER_S into hours: memory grows by an hour's bucket an hour, not a bucket a second."""
        if self._newest is None:
            return
        horizon = self._newest - FINE_S
        for second in [s for s in self.buckets if s < horizon]:
            key = (second - second % MINUTE_S, MINUTE_S)
            self.coarse.setdefault(key, Bucket()).merge(self.buckets.pop(second))
        hour_horizon = self._newest - HOURS_AFTER_S
        for key in [k for k in self.coarse if k[1] == MINUTE_S and k[0] + MINUTE_S <= hour_horizon]:
            start = key[0]
            self.coarse.setdefault((start - start % HOUR_S, HOUR_S), Bucket()).merge(self.coarse.pop(key))

    def reset(self) -> None:
        self.buckets = {}
        self.coarse = {}
        self._newest = None
        self._settled = {}
        self._live = {}  # streams of users stopped mid-answer never finished
        self.turns = {}

    def take_delta(self) -> dict | None:  # worker side: ship, then forget
        turns = {turn: d for turn, stats in self.turns.items() if (d := stats.take_delta()) is not None}
        if not self.buckets and not turns:
            return None
        wire: dict = {second: bucket.to_wire() for second, bucket in self.buckets.items()}
        if turns:
            wire[TURNS_KEY] = turns
        self.buckets = {}
        return wire

    def merge_delta(self, delta: dict, client_id: str) -> None:
        delta = dict(delta or {})
        for turn, turn_delta in (delta.pop(TURNS_KEY, None) or {}).items():
            self._turn(int(turn)).merge_delta(turn_delta, client_id)
        for second, wire in delta.items():
            second = int(second)
            bucket = self.buckets.get(second)
            if bucket is None:
                bucket = self.buckets[second] = Bucket()
            bucket.merge(Bucket.from_wire(wire))

    # -- reading ---------------------------------------------------------------------------------
    def spans(self, spans: Sequence[tuple[float, float]]) -> Bucket:
        """The answers completed in these (start, end] spans (the bucket seconds whose middle lies in
        one), and the tokens that arrived in them (each second's share by overlap, so a span of 2.5 s
        holds 2.5 s of tokens)."""
        now = self.clock()
        buckets = self.buckets
        oldest_fine = min(buckets, default=math.inf)
        touched: dict[tuple[float, float], list[int]] = {}
        coarse: dict[tuple[float, float], list[tuple[int, int]]] = {}
        for a, e in spans:  # the bucket seconds a span overlaps (walk whichever is shorter: the span or the buckets)
            seconds = range(math.floor(a), math.ceil(e)) if e - a <= len(buckets) else sorted(buckets)
            touched[(a, e)] = [s for s in seconds if s in buckets and s + 1.0 > a and s < e]
            if self.coarse and a < oldest_fine:  # the span reaches into merged time
                coarse[(a, e)] = [k for k in self.coarse if k[0] < e and k[0] + k[1] > a]
        completed = sorted({s for (a, e), seconds in touched.items() for s in seconds if a < s + 0.5 <= e})
        whole = sorted({k for (a, e), keys in coarse.items() for k in keys if a < k[0] + k[1] / 2 <= e})
        out = merged([*(buckets[s] for s in completed), *(self.coarse[k] for k in whole)])
        out.arrived = sum(buckets[s].arrived * _overlap(s, a, e, now) for (a, e), seconds in touched.items()
                          for s in seconds)
        out.arrived += sum(self.coarse[k].arrived * (min(k[0] + k[1], e) - max(k[0], a)) / k[1]
                           for (a, e), keys in coarse.items() for k in keys)
        return out

    def window(self, start: float, end: float) -> Bucket:
        """The answers completed in (start, end] and the tokens that arrived in it."""
        return self.spans([(start, end)])

    def over(self, seconds: Sequence[Second]) -> Bucket:
        """The answers and tokens of the timeline's `seconds` (a step's steady window, gaps and all)."""
        return self.spans([(s.t - s.interval, s.t) for s in seconds])

    def _step_figures(self, window: Sequence[Second]) -> dict | None:
        """A step window's figures and their `ci95` (from the window's seconds one by one): a step no token
        search judged; kept once the window has settled (its seconds may be merged later)."""
        if not window:
            return None
        key = (window[0].t, window[-1].t, len(window))
        if key in self._settled:
            return self._settled[key]
        figures = self.over(window).figures(sum(s.interval for s in window))
        if figures is not None:  # the one interval function, over the window's seconds
            figures["ci95"] = token_intervals([(e - a, self.spans([(a, e)])) for a, e in one_second_pieces(window)])
        if self._newest is not None and window[-1].t < self._newest - SETTLED_S:
            self._settled[key] = figures
        return figures

    def run_intervals(self, started_at: float, ended_at: float, within: bool = False,
                      series: Sequence[str] = INTERVAL_SERIES) -> dict[str, list[float] | None]:
        """The run's `llm.ci95`: each bucket (a second, or a merged minute / hour: its part inside the run)
        a sample; the seconds between the first and the last fine bucket that saw no answer count as
        samples of nothing. `series`: the latencies whose p50 and p95 get an interval (`Bucket` histograms)."""
        samples: list[tuple[float, Bucket]] = []
        coarse = sorted(self.coarse.items())
        fine = min(self.buckets, default=math.inf)
        for i, ((start, length), bucket) in enumerate(coarse):
            # a bucket covers its own span inside the run, up to the next one (an hour still being merged
            # holds only its minutes older than those after it; the run began inside a clock hour)
            upto = min(start + length, coarse[i + 1][0][0] if i + 1 < len(coarse) else math.inf, fine, ended_at)
            covered = upto - max(start, started_at)
            if covered > 0:
                samples.append((covered, bucket))
        if self.buckets:
            empty = Bucket()
            first, last = min(self.buckets), max(self.buckets)
            if within:  # only the seconds whose middle is in (started_at, ended_at]: a trimmed run
                first, last = max(first, math.ceil(started_at - 0.5)), min(last, math.floor(ended_at - 0.5))
            samples += [(1.0, self.buckets.get(second, empty)) for second in range(first, last + 1)]
        return token_intervals(samples, series)

    def annotate(self, summary: dict, seconds: Sequence[Second], started_at: float, ended_at: float,
                 windows: Sequence[Sequence[Second]] | None = None) -> dict:
        """Add `llm` to summary.json and to each of its steps when tokens were counted; returns it.
        `windows`: each step's steady window when already cut (the recorder keeps no whole timeline).
        `self.trim` (`--warmup-s`, `--cooldown-s`) leaves the run's first and last seconds, and each
        step's last, out of the figures; `llm.excluded` says what was left out. A step whose record
        already holds `llm` keeps it: the token search's step (`TokenStep.llm_figures`), whose figures
        and intervals are the ones it was judged on, over its own window and answers as they stood then."""
        everything = merged([*self.coarse.values(), *self.buckets.values()])
        trim = self.trim
        counted = trim.run_window(started_at, ended_at) if trim.active else None
        start, end = counted if counted is not None else (started_at, ended_at)
        bucket = self.window(start, end) if counted is not None else everything
        run = bucket.figures(max(1e-9, end - start))
        if run is None:
            return summary
        run["ci95"] = self.run_intervals(start, end, within=counted is not None)
        if trim.active:
            run["excluded"] = {"warmup_s": trim.warmup_s, "cooldown_s": trim.cooldown_s,
                               "applied": counted is not None,
                               "requests": everything.requests - bucket.requests,
                               "output_tokens": round(everything.arrived - bucket.arrived, 3)}
        if self.turns:
            run[TURNS_KEY] = [self.turns[turn].turn_figures(turn, start, end, counted is not None).to_json()
                              for turn in sorted(self.turns)]
        summary["llm"] = run
        steps = summary.get("steps") or []
        windows = step_windows(seconds) if windows is None else windows
        if len(windows) == len(steps):
            for record, window in zip(steps, windows, strict=True):
                if record.get("llm") is not None:  # a token search's step: the figures it was judged on
                    continue
                figures = self._step_figures(trim.step_window(window))
                if figures is not None:
                    record["llm"] = figures
        return summary

    def turn_figures(self, turn: int, start: float, end: float, within: bool) -> LlmTurn:
        """summary.json's `llm.turns[]` entry of this (one turn index's) stats: the answers completed in
        (start, end] when `within` (a trimmed run), else all, with the run's intervals (`run_intervals`)."""
        bucket = self.window(start, end) if within else merged([*self.coarse.values(), *self.buckets.values()])
        figures = bucket.figures(max(1e-9, end - start)) or {}
        ci = self.run_intervals(start, end, within=within, series=TURN_SERIES)
        mean = round(bucket.input_tokens / bucket.input_known, 3) if bucket.input_known else None
        return LlmTurn.make(turn=turn, requests=bucket.requests, input_tokens_mean=mean,
                            **{key: figures.get(key) for key in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms",
                                                                 "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms")},
                            output_tokens=bucket.output_tokens,
                            ci95={key: value for key, value in ci.items() if key != "output_tokens_per_s"})


def token_accounting(call: Callable, environment: object, *, responses: bool = False,
                     count_text: Callable[[str], int] = estimate_tokens) -> Callable:
    """`call` (e.g. `client.invoke_stream`), recording each answer's tokens into the process's
    `LlmStats`. Streams are always counted; non-streamed answers with `responses=True` (LLM
    requests), their text by `count_text` when the server gives no count. The result is returned
    unchanged."""
    stats = LlmStats.for_environment(environment)
    clock = time.perf_counter
    request_log = request_log_of(environment)
    if request_log is not None:
        request_log.accounted = True  # each row waits for its tokens (`complete` below)

    client = getattr(call, "__self__", None)
    if client is not None and hasattr(client, "chunk_listener"):
        client.chunk_listener = stats.on_chunk  # streamed tokens count as they arrive, not at the end

    def counted(invocation, *args, **kwargs):
        started = clock()
        result = call(invocation, *args, **kwargs)
        live = stats.take_live()
        turn = getattr(invocation, "extra", {}).get(TURN)
        if result is None:
            if live is not None:
                stats.discard(live)
            if request_log is not None:
                request_log.complete(None, turn)
            return None
        e2e_ms = (clock() - started) * 1000.0
        sample: RequestTokens | None
        try:
            if live is not None and hasattr(result, "chunks"):
                count = live.parser.finish()
                sample = stream_figures(count, result.ttft_ms, result.inter_chunk_ms, e2e_ms,
                                        getattr(invocation, "extra", {}).get(INPUT_TOKENS))
            else:
                live = None
                sample = sample_of(result, invocation, e2e_ms, responses, count_text)
        except Exception:  # never let accounting break the User
            log.exception("sm-locust: token accounting failed")
            sample = None
        if sample is not None:
            stats.add(sample, live=live, turn=turn)
        if request_log is not None:
            request_log.complete(sample, turn)
        return result

    return counted


def accounting_for(call: Callable, environment: object, options: Options) -> Callable:
    """The default locustfile's call with token accounting when the run is an LLM one (`--prompts`, `--trace`)
    or streams (`--stream`); else `call` itself."""
    llm = bool(options.prompts or options.trace)
    if not (options.stream or llm):
        return call
    return token_accounting(call, environment, responses=llm, count_text=text_counter(options.tokenizer))
