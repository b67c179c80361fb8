"""A local LLM for the local endpoint (`sm-locust serve --llm`): continuous batching with real dynamics.

One loop runs decode steps; each gives one token to every sequence in the batch and lasts
step_ms + step_ms_per_seq x sequences + prefill_ms_per_token x prompt tokens admitted (less the
leading blocks a `--llm-prefix-cache-blocks` cache holds: endpoint/llm_prefix.py); at most
`max_sequences` run, the rest queue (docs/llm.md). `BatchModel` (cost model, closed-form
predictions) and `ContinuousBatcher` (the scheduler, `simulate` on a virtual clock) are pure;
`LlmEngine` runs it in real time per worker and streams tokens in a real container's bytes
(endpoint/llm_wire.py). Stream faults (`--llm-error-ratio`, `--stream-error-ratio`, or the
`sm-locust-fault` attribute) end a stream mid-way; a body that is not an LLM request is the model's
400 (ModelError 424).
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, fields, replace
from typing import Any

import orjson

from sm_locust.endpoint.adapters import AdapterSpec, parse_adapters
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.llm_prefix import PrefixCache, PrefixLookup, block_keys
from sm_locust.endpoint.llm_wire import (
    AUTO,
    FORMATS,
    RECORD_BLOCK_WORDS,
    BadLlmRequest,
    Formatter,
    LlmRequest,
    chat_counts,
    parse_request,
    request_record,
)
from sm_locust.errors import UsageError
from sm_locust.llm.lengths import LengthDistribution
from sm_locust.llm.tokenizer import Tokenizer, load_tokenizer
from sm_locust.transport import eventstream as es

DEFAULT_OUTPUT_TOKENS = 128
IN_BAND = "InBandError"
"""The stream fault that ends a stream with its format's in-band error (`--llm-error-ratio`, or the custom
attribute `sm-locust-fault=InBandError`)."""
STREAM_ERROR_MESSAGE = "model stream failure injected"


# -- the configuration --------------------------------------------------------------------------


@dataclass
class LlmConfig:
    """`sm-locust serve --llm` settings (times in ms)."""

    max_sequences: int = 16
    """Sequences decoded at once (vLLM's max_num_seqs, TGI's max batch); more wait in a queue."""
    step_ms: float = 25.0
    """A decode step's fixed time (weights read once per step)."""
    step_ms_per_seq: float = 0.6
    """What each sequence in the step adds."""
    prefill_ms_per_token: float = 0.1
    """What each prompt token admitted in the step adds (prefill)."""
    output_tokens: str = ""
    """Answer lengths as a distribution (`128`, `64-256`, `128~32`); empty = the request's max_new_tokens."""
    format: str = AUTO
    """Stream format (endpoint/llm_wire.py): `auto` (from the request schema), `tgi` (SSE), `lmi` (JSON
    lines) or `openai` (vLLM's SSE chat chunks)."""
    server_counts: bool = True
    """Answers carry the server's token counts when the request asks (TGI / LMI `details`, OpenAI
    `stream_options.include_usage`); false: never."""
    error_ratio: float = 0.0
    """Share of streams that end half-way with their format's in-band error (TGI's error event, LMI's error
    token, vLLM's error chunk)."""
    request_log: str = ""
    """A file each request received is appended to as one JSON line (`llm_wire.request_record`: arrival time,
    prompt tokens, answer length asked, prompt block hashes), and each streamed answer its token gaps: what the
    server saw and sent, for checking a replay or a client's ITL."""
    tokenizer: str = ""
    """A Hugging Face tokenizer.json (or the folder holding one): each prompt is counted by it (its prefill,
    usage counts and request log), as `run --tokenizer` counts it; empty: words and punctuation marks."""
    block_tokens: int = RECORD_BLOCK_WORDS
    """Prompt blocks of this many tokens: the request log's (a CRC-32 of each whole block) and the prefix
    cache's."""
    prefix_cache_blocks: int = 0
    """Automatic prefix caching (endpoint/llm_prefix.py): blocks each worker's cache holds, least recently
    used evicted first; a request's leading blocks found there are not prefilled. 0: no prefix cache."""
    adapters: str = ""
    """LoRA adapters as inference components on the base component (endpoint/adapters.py): a count N
    (adapter-1 ... adapter-N) or names; empty: none (InferenceComponentName refused)."""
    adapter_cache: int = 0
    """Adapters in memory at once; 0: every adapter (each loads once)."""
    adapter_load_ms: float = 500.0
    """What loading an adapter takes, before its request's prefill."""
    base_component: str = "base"
    """The base inference component's name: it answers without an adapter."""

    def validate(self) -> None:
        if self.max_sequences < 1:
            raise ValueError(f"--llm-max-sequences must be at least 1, got {self.max_sequences}")
        if self.request_log and not os.path.isdir(os.path.dirname(os.path.abspath(self.request_log))):
            raise ValueError(f"--llm-request-log {self.request_log!r}: its folder does not exist")
        if min(self.step_ms, self.step_ms_per_seq, self.prefill_ms_per_token) < 0:
            raise ValueError("--llm-step-ms, --llm-step-ms-per-seq and --llm-prefill-ms-per-token must not be negative")
        if self.step_ms + self.step_ms_per_seq <= 0:
            raise ValueError("a decode step must take some time: give --llm-step-ms or --llm-step-ms-per-seq")
        if self.format not in FORMATS:
            raise ValueError(f"--llm-format {self.format!r} is not one of: {', '.join(FORMATS)}")
        if not 0.0 <= self.error_ratio <= 1.0:
            raise ValueError(f"--llm-error-ratio must be between 0 and 1, got {self.error_ratio}")
        if self.output_tokens:
            try:
                LengthDistribution.parse(self.output_tokens, "--llm-output-tokens")
            except UsageError as exc:  # the serve command reports ValueErrors
                raise ValueError(str(exc)) from None
        if self.block_tokens < 1:
            raise ValueError(f"--llm-block-tokens must be at least 1, got {self.block_tokens}")
        if self.prefix_cache_blocks < 0:
            raise ValueError(f"--llm-prefix-cache-blocks must not be negative, got {self.prefix_cache_blocks}")
        self.prompt_tokenizer()
        given = [flag for flag, on in (("--llm-adapter-cache", self.adapter_cache != 0),
                                       ("--llm-adapter-load-ms", self.adapter_load_ms != 500.0),
                                       ("--llm-base-component", self.base_component != "base")) if on]
        if given and not self.adapters:
            raise ValueError(f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} the LoRA adapters; add "
                             "--llm-adapters N (or names)")
        spec = self.adapter_spec()
        problems = spec.problems() if spec is not None else []
        if problems:
            raise ValueError(problems[0])

    def adapter_spec(self) -> AdapterSpec | None:
        """`--llm-adapters` as an AdapterSpec (None without it); a ValueError saying what is wrong."""
        if not self.adapters:
            return None
        names = parse_adapters(self.adapters)
        return AdapterSpec(self.base_component, names, self.adapter_cache or len(names), float(self.adapter_load_ms))

    def prompt_tokenizer(self) -> Tokenizer | None:
        """`--llm-tokenizer` loaded (None without it); a ValueError saying what is wrong."""
        if not self.tokenizer:
            return None
        try:
            return load_tokenizer(self.tokenizer)
        except UsageError as exc:  # the serve command reports ValueErrors
            raise ValueError(str(exc).replace("--tokenizer", "--llm-tokenizer", 1)) from None

    def prefix_cache(self) -> PrefixCache | None:
        """A worker's prefix cache (None without `--llm-prefix-cache-blocks`)."""
        return PrefixCache(self.prefix_cache_blocks, self.block_tokens) if self.prefix_cache_blocks else None

    def model(self) -> BatchModel:
        return BatchModel(self.max_sequences, self.step_ms, self.step_ms_per_seq, self.prefill_ms_per_token)

    def flags(self) -> list[str]:
        """The `sm-locust serve` flags that give this configuration (LocalEndpoint's command line)."""
        args = ["--llm"]
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                args += [f"--llm-{f.name.replace('_', '-')}",
                         str(value).lower() if isinstance(value, bool) else str(value)]
        return args


# -- the cost model (pure) ----------------------------------------------------------------------


@dataclass(frozen=True)
class BatchModel:
    """Decode-step cost and what it predicts for closed-loop users (docs/llm.md, "The model")."""

    max_sequences: int
    step_ms: float
    step_ms_per_seq: float
    prefill_ms_per_token: float = 0.0

    def step_s(self, sequences: int, prefill_tokens: float = 0) -> float:
        """Seconds one decode step takes with `sequences` in the batch and `prefill_tokens` admitted."""
        return (self.step_ms + self.step_ms_per_seq * sequences + self.prefill_ms_per_token * prefill_tokens) / 1000.0

    def mean_step_s(self, active: float, prompt_tokens: float, output_tokens: float) -> float:
        """A step's mean time with `active` sequences of `output_tokens` each (each admits its prompt once)."""
        return self.step_s(0) + active * (self.step_ms_per_seq
                                          + self.prefill_ms_per_token * prompt_tokens / output_tokens) / 1000.0

    def active(self, users: int, prompt_tokens: float, output_tokens: float, idle_s: float = 0.0) -> float:
        """Sequences in the batch on average: each user's request spends `output_tokens` steps in it and
        `idle_s` out of it (its client's turnaround and the wait for the running step), capped."""
        active = float(min(users, self.max_sequences))
        if idle_s > 0:
            for _ in range(50):  # the step time depends on the batch: a fixed point, reached in a few rounds
                busy = output_tokens * self.mean_step_s(active, prompt_tokens, output_tokens)
                active = min(float(self.max_sequences), users * busy / (busy + idle_s))
        return active

    def tokens_per_s(self, users: int, prompt_tokens: float, output_tokens: float, idle_s: float = 0.0) -> float:
        """Output tokens/s of `users` closed-loop users (no think time): the active sequences, one token
        each per step."""
        active = self.active(users, prompt_tokens, output_tokens, idle_s)
        return active / self.mean_step_s(active, prompt_tokens, output_tokens)

    def capacity(self, prompt_tokens: float, output_tokens: float) -> float:
        """The most output tokens/s: the batch full."""
        return self.tokens_per_s(self.max_sequences, prompt_tokens, output_tokens)

    def knee_users(self, prompt_tokens: float, output_tokens: float, idle_s: float = 0.0,
                   tolerance: float = 0.05) -> int:
        """The fewest users within `tolerance` of the capacity (what the plateau search reports): the
        sequence cap when answers are long next to `idle_s`, a little above it when they are short."""
        target = (1.0 - tolerance) * self.capacity(prompt_tokens, output_tokens)
        users = 1
        while self.tokens_per_s(users, prompt_tokens, output_tokens, idle_s) < target - 1e-9:
            users += 1
        return users

    def itl_ms(self, users: int, prompt_tokens: float, output_tokens: float) -> float:
        """Mean inter-token latency: one mean step."""
        active = min(users, self.max_sequences)
        return self.mean_step_s(active, prompt_tokens, output_tokens) * 1000.0

    def ttft_bounds_ms(self, users: int, prompt_tokens: float, output_tokens: float) -> tuple[float, float]:
        """Time to first token, (least, most): the queue for a slot (past the cap: a slot frees every
        output_tokens / cap steps), then up to one running step (none for a lone user: the loop is
        idle), then the step that prefills the prompt and makes the first token."""
        active = min(users, self.max_sequences)
        step = self.mean_step_s(active, prompt_tokens, output_tokens)
        queued = max(0, users - self.max_sequences)
        queue_s = queued / self.max_sequences * output_tokens * step
        prefill = self.step_s(active, prompt_tokens)
        running = step if users > 1 else 0.0
        return (queue_s + prefill) * 1000.0, (queue_s + running + prefill) * 1000.0

    def ttft_ms(self, users: int, prompt_tokens: float, output_tokens: float) -> float:
        """Mean time to first token for requests arriving at random times: the middle of the bounds."""
        low, high = self.ttft_bounds_ms(users, prompt_tokens, output_tokens)
        return (low + high) / 2.0


# -- the scheduler (pure) -----------------------------------------------------------------------


@dataclass(eq=False)
class Sequence:
    """One request being generated."""

    prompt_tokens: int
    output_tokens: int
    arrived: float = 0.0
    generated: int = 0
    first_token_at: float | None = None
    token_times: list[float] = field(default_factory=list)
    cancelled: bool = False
    tokens: Any = None  # the live engine's queue of produced tokens
    blocks: tuple[bytes, ...] = ()
    """The prompt's full blocks' chain keys (endpoint/llm_prefix.py), for the prefix cache."""
    block_units: int = 0
    """The prompt's length in the units its blocks are cut from (token ids, or words)."""
    cached_tokens: int = 0
    """Prompt tokens the prefix cache supplied when it was admitted: not prefilled."""
    lookup: PrefixLookup | None = None

    @property
    def done(self) -> bool:
        return self.generated >= self.output_tokens or self.cancelled

    @property
    def prefill_tokens(self) -> int:
        """What its admission adds to the step: its prompt less the tokens the prefix cache had."""
        return self.prompt_tokens - self.cached_tokens


@dataclass
class Step:
    """One planned decode step."""

    duration_s: float
    sequences: list[Sequence]
    admitted: list[Sequence]


class ContinuousBatcher:
    """The continuous-batching scheduler: a FIFO queue in front of a batch capped at `max_sequences`."""

    def __init__(self, model: BatchModel, prefix_cache: PrefixCache | None = None):
        self.model = model
        self.prefix_cache = prefix_cache
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.active: list[Sequence] = []

    def submit(self, sequence: Sequence) -> None:
        self.waiting.append(sequence)

    def cancel(self, sequence: Sequence) -> None:
        """A client that went away: its sequence leaves the queue now, the batch after this step."""
        sequence.cancelled = True
        try:
            self.waiting.remove(sequence)
        except ValueError:
            pass

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.active

    def plan(self) -> Step | None:
        """Admit waiting sequences up to the cap and return the next step (None when there is no work)."""
        self.active = [s for s in self.active if not s.done]
        admitted = []
        while self.waiting and len(self.active) < self.model.max_sequences:
            sequence = self.waiting.popleft()
            if not sequence.cancelled:
                self._look_up(sequence)
                self.active.append(sequence)
                admitted.append(sequence)
        if not self.active:
            return None
        prefill = sum(s.prefill_tokens for s in admitted)
        return Step(self.model.step_s(len(self.active), prefill), list(self.active), admitted)

    def _look_up(self, sequence: Sequence) -> None:
        """Its prompt's leading blocks the prefix cache holds are not prefilled (at least one token is)."""
        if self.prefix_cache is None or not sequence.blocks:
            return
        sequence.lookup = self.prefix_cache.admit(sequence.blocks, sequence.block_units)
        cached = sequence.lookup.hits * self.prefix_cache.block_tokens
        sequence.cached_tokens = max(0, min(cached, sequence.prompt_tokens - 1))

    def finish(self, step: Step, now: float) -> list[Sequence]:
        """The step ran until `now`: one token for each of its sequences; returns those now complete."""
        complete = []
        for sequence in step.sequences:
            if sequence.cancelled:
                continue
            sequence.generated += 1
            sequence.token_times.append(now)
            if sequence.first_token_at is None:
                sequence.first_token_at = now
            if sequence.done:
                complete.append(sequence)
        self.active = [s for s in self.active if not s.done]
        return complete


@dataclass
class Simulation:
    """What `simulate` measured (seconds; tokens)."""

    duration_s: float
    output_tokens: int
    ttft_s: list[float]
    itl_s: list[float]
    completed: int

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s

    @staticmethod
    def _mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    @property
    def mean_ttft_ms(self) -> float:
        return self._mean(self.ttft_s) * 1000.0

    @property
    def mean_itl_ms(self) -> float:
        return self._mean(self.itl_s) * 1000.0


def simulate(model: BatchModel, users: int, prompt_tokens: int, output_tokens: int, duration_s: float,
             warmup_s: float = 0.0, client_gap_s: float = 0.0) -> Simulation:
    """Closed-loop users on a virtual clock: each sends its next request `client_gap_s` after its answer ends.

    The users start spread over one request's time (as Locust spawns them over time), so their
    prefills do not all land in the same step. Counts what completes after `warmup_s` (tokens
    produced, TTFT and ITL of the requests that arrived after it).
    """
    batcher = ContinuousBatcher(model)
    now = 0.0
    request_s = output_tokens * model.step_s(min(users, model.max_sequences))
    arrivals: list[tuple[float, int]] = [(u / users * request_s, u) for u in range(users)]  # (time, user)
    tokens = 0
    ttft: list[float] = []
    itl: list[float] = []
    completed = 0
    while now < duration_s:
        for when, _user in [a for a in arrivals if a[0] <= now]:
            batcher.submit(Sequence(prompt_tokens, output_tokens, arrived=when))
        arrivals = [a for a in arrivals if a[0] > now]
        step = batcher.plan()
        if step is None:
            now = min(a[0] for a in arrivals)
            continue
        now += step.duration_s
        if now > warmup_s:
            tokens += len([s for s in step.sequences if not s.cancelled])
        for sequence in batcher.finish(step, now):
            if sequence.arrived >= warmup_s and sequence.first_token_at is not None:  # finished: it has one
                ttft.append(sequence.first_token_at - sequence.arrived)
                itl.extend(b - a for a, b in itertools.pairwise(sequence.token_times))
                completed += 1
            arrivals.append((now + client_gap_s, 0))
    return Simulation(duration_s - warmup_s, tokens, ttft, itl, completed)


# -- the live engine ----------------------------------------------------------------------------


class LlmEngine:
    """The scheduler in real time: one loop per worker process, started on the first request.

    Uses `threading` primitives, which gevent's monkey-patching makes cooperative in gevent
    workers (the loop is a greenlet) and which are real threads in gthread workers.
    """

    def __init__(self, config: LlmConfig, seed: int | None = None, sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter, counters: SharedCounters | None = None):
        config.validate()
        self.config = config
        self.model = config.model()
        self.batcher = ContinuousBatcher(self.model, config.prefix_cache())
        self.counters = counters  # the endpoint's SharedCounters: prefill and prefix-cache counts (or None)
        self.lengths = (LengthDistribution.parse(config.output_tokens, "--llm-output-tokens")
                        if config.output_tokens else None)
        self.rng = random.Random(seed)
        self._sleep = sleep or _sleep
        self._clock = clock
        self._work = threading.Condition()
        self._loop: threading.Thread | None = None
        self.steps = itertools.count()
        self._log_fd: int | None = None
        self.tokenizer = config.prompt_tokenizer()

    # -- requests --
    def start(self, body: bytes, component: str | None = None) -> tuple[Formatter, Sequence]:
        """Parse a request (BadLlmRequest when it is not an LLM request) and queue its sequence; `component`:
        the InferenceComponentName it named (an adapter's prompt blocks are its own in the prefix cache)."""
        request, ids = self._receive(body)
        fmt = request.format if self.config.format == AUTO else self.config.format
        length = self.output_length(request.max_new_tokens)
        sequence = Sequence(request.prompt_tokens, length, arrived=self._clock(), tokens=queue.SimpleQueue())
        if self.batcher.prefix_cache is not None:
            units: list[int] | list[str] = ids if ids is not None else request.prompt.split()
            adapter = component if self.config.adapters and component != self.config.base_component else None
            sequence.blocks = block_keys(units, self.config.block_tokens, adapter or "")
            sequence.block_units = len(units)
        formatter = Formatter(fmt, request, length, self.config.server_counts)
        with self._work:
            self.batcher.submit(sequence)
            self._work.notify()
        self._ensure_loop()
        return formatter, sequence

    def received(self, body: bytes) -> LlmRequest:
        """A request as the emulation reads it (BadLlmRequest when it is not an LLM request): its prompt
        counted by `--llm-tokenizer` when given, and logged to `--llm-request-log`."""
        return self._receive(body)[0]

    def _receive(self, body: bytes) -> tuple[LlmRequest, list[int] | None]:
        """The request, and its prompt's token ids by `--llm-tokenizer` (None without one)."""
        arrived = time.time()
        request = parse_request(body)
        ids = None
        if self.tokenizer is not None:  # the prompt counted as the client's --tokenizer counts it
            ids = self.tokenizer.backend.encode(request.prompt, add_special_tokens=False).ids
            request = replace(request, prompt_tokens=len(ids))
        if self.config.request_log:
            self._log(request_record(request, arrived, self.config.block_tokens, ids))
        return request, ids

    def _log(self, line: bytes) -> None:
        """One whole line per write, appended (O_APPEND: the workers' lines never interleave)."""
        if self._log_fd is None:
            self._log_fd = os.open(self.config.request_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                                   0o600)
        os.write(self._log_fd, line)

    def log_answer(self, written: list[float], generated: list[float]) -> None:
        """`--llm-request-log`: a streamed answer's gaps between tokens (ms), as written to the socket and as
        the batch made them, one line (`"answer": true`)."""
        self._log(orjson.dumps({"answer": True, "written_itl_ms": _gaps(written),
                                "generated_itl_ms": _gaps(generated)}) + b"\n")

    def output_length(self, asked: int | None) -> int:
        if self.lengths is not None:
            drawn = self.lengths.sample(self.rng)
            return min(drawn, asked) if asked else drawn
        return asked or DEFAULT_OUTPUT_TOKENS

    def cancel(self, sequence: Sequence) -> None:
        with self._work:
            self.batcher.cancel(sequence)

    def tokens(self, formatter: Formatter, sequence: Sequence,
               limit: int | None = None) -> Generator[bytes, None, None]:
        """Each token's stream bytes as the loop produces it (the first `limit` only, when given: a stream that
        fails half-way); the sequence is cancelled if not read to its end."""
        count = sequence.output_tokens if limit is None else min(limit, sequence.output_tokens)
        try:
            for index in range(count):
                sequence.tokens.get()
                yield formatter.token(index)
        finally:
            if not sequence.done:
                self.cancel(sequence)

    # -- the loop --
    def _ensure_loop(self) -> None:
        if self._loop is None:
            with self._work:
                if self._loop is None:
                    self._loop = threading.Thread(target=self._run, name="sm-locust-llm", daemon=True)
                    self._loop.start()

    def _run(self) -> None:
        deadline = self._clock()
        while True:
            with self._work:
                step = self.batcher.plan()
                while step is None:
                    self._work.wait()
                    step = self.batcher.plan()
            if step.admitted and self.counters is not None:
                self.counters.add(**admission_counts(step.admitted))
            now = self._clock()
            deadline = max(deadline, now) + step.duration_s  # an overslept step delays the next, as a slow GPU
            if deadline > now:
                self._sleep(deadline - now)
            with self._work:
                self.batcher.finish(step, self._clock())
            next(self.steps)
            for sequence in step.sequences:
                if not sequence.cancelled:
                    sequence.tokens.put(True)


def admission_counts(admitted: list[Sequence]) -> dict[str, int]:
    """The endpoint's counters for the sequences a step admitted: the prompt tokens prefilled and, with a
    prefix cache, the blocks it supplied (hits) and those prefilled (misses)."""
    counts = {"llm_prefill_tokens": sum(s.prefill_tokens for s in admitted)}
    lookups = [s.lookup for s in admitted if s.lookup is not None]
    if lookups:
        counts.update(llm_prefix_cache_hit_blocks=sum(x.hits for x in lookups),
                      llm_prefix_cache_miss_blocks=sum(x.misses for x in lookups))
    return counts


def _gaps(times: list[float]) -> list[float]:
    return [round((b - a) * 1000.0, 3) for a, b in itertools.pairwise(times)]


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up per call: gevent-patched in the worker (the module is imported before the patch)


def engine_for(config: object, counters: SharedCounters | None = None) -> LlmEngine | None:
    """The engine an endpoint worker runs when `config.llm` (an LlmConfig) is set, else None; it adds its
    prefill and prefix-cache counts to `counters` (the endpoint's SharedCounters)."""
    llm = getattr(config, "llm", None)
    return LlmEngine(llm, getattr(config, "seed", None), counters=counters) if llm is not None else None


# -- the endpoint's handlers --------------------------------------------------------------------


def stream_fault(engine: LlmEngine, forced: str | None, model_stream_ratio: float,
                 draw: Callable[[], float]) -> str | None:
    """How a stream ends: None (complete), `IN_BAND` (its format's in-band error) or a SageMaker stream
    exception (`ModelStreamError`, `InternalStreamFailure`); forced by the request's custom attribute, else
    one draw against `--stream-error-ratio` then `--llm-error-ratio`."""
    if forced:
        return forced
    in_band = engine.config.error_ratio
    if not (model_stream_ratio or in_band):
        return None
    value = draw()
    if value < model_stream_ratio:
        return es.MODEL_STREAM_ERROR
    return IN_BAND if value < model_stream_ratio + in_band else None


def invoke_stream(app: Any, engine: LlmEngine, start_response: Callable, body: bytes, variant: str,
                  attributes_header: str | None, fault: str | None = None, component: str | None = None):
    """InvokeEndpointWithResponseStream on the LLM: one PayloadPart per token as the batch makes them; a
    `fault` ends the stream half-way (endpoint/streaming.py decides it: `stream_fault`); `component`: the
    InferenceComponentName the request named."""
    try:
        formatter, sequence = engine.start(body, component)
    except BadLlmRequest as exc:
        return app.reject(start_response, exc)  # ModelError 424, before the stream starts
    _count_chat(app, formatter)
    headers = [("Content-Type", es.CONTENT_TYPE), ("X-Amzn-SageMaker-Content-Type", formatter.content_type),
               ("x-Amzn-Invoked-Production-Variant", variant), ("x-amzn-RequestId", str(uuid.uuid4()))]
    if attributes_header:
        headers.append(("X-Amzn-SageMaker-Custom-Attributes", attributes_header))
    start_response("200 OK", headers)
    return _frames(app, engine, formatter, sequence, fault)


def _count_chat(app: Any, formatter: Formatter) -> None:
    counts = chat_counts(formatter.request)
    if counts:
        app.counters.add(**counts)


def _frames(app: Any, engine: LlmEngine, formatter: Formatter, sequence: Sequence, fault: str | None):
    started = time.perf_counter()
    fail_at = sequence.output_tokens // 2 if fault else None
    tokens = engine.tokens(formatter, sequence, fail_at)
    written: list[float] = []
    try:
        for part in tokens:
            written.append(time.perf_counter())  # handed to the socket: the ITL this server delivers
            yield es.encode_payload_part(part)
    finally:  # a client that went away: its sequence leaves the batch
        tokens.close()
    model_us = (time.perf_counter() - started) * 1e6
    if fault is None:
        app.counters.add(invocations=1, successes=1, model_latency_us_sum=model_us)
        if engine.config.request_log:
            engine.log_answer(written, sequence.token_times)
        return
    if fault == IN_BAND:
        yield es.encode_payload_part(formatter.error(fail_at or 0))
        app.counters.add(invocations=1, in_band_errors=1, model_latency_us_sum=model_us)  # counted once written
        return
    yield es.encode_exception(fault, STREAM_ERROR_MESSAGE, "sm-locust-injected")
    app.counters.add(invocations=1, stream_errors=1, model_latency_us_sum=model_us)


def invoke(app: Any, engine: LlmEngine, start_response: Callable, body: bytes, headers: list,
           component: str | None = None):
    """InvokeEndpoint on the LLM: the whole answer once every token is made (`component`: the
    InferenceComponentName the request named)."""
    started = time.perf_counter()
    try:
        formatter, sequence = engine.start(body, component)
    except BadLlmRequest as exc:
        return app.reject(start_response, exc)
    _count_chat(app, formatter)
    for _ in engine.tokens(formatter, sequence):
        pass
    app.counters.add(invocations=1, successes=1, model_latency_us_sum=(time.perf_counter() - started) * 1e6)
    return app._respond(start_response, 200, formatter.body(), "application/json", headers)
