"""LLM figures of a window, and the plateau objective on output tokens (`--objective output-tokens`).

Pure, like the rest of `sm_locust.plateau`. Two parts:

- `Bucket`: the LLM answers of one second or of a window (a few counters and ~2-significant-digit
  histograms of TTFT, ITL, time per output token, e2e latency, per-answer tokens/s) and `figures()`,
  summary.json's `llm` object. `sm_locust.record.llm` keeps one per second of a run and merges them
  for a step's steady window; the token objective judges steps with the same figures.
- The objective: `TokenStep` is a `StepMeasurement` whose judged throughput (`goodput_rps`, what the
  searches compare) is the step's output tokens/s, its request figures unchanged
  (`request_goodput_rps`); `TokenSLO` is a constraint on a TTFT or ITL percentile (`--ttft-slo-ms`,
  `--itl-slo-ms`, at `--slo-percentile`); `TokenDriver` measures each step with the token figures of
  its steady window and judges its stability on tokens/s (three sub-windows within 10 %, as requests
  are judged: long answers complete too rarely to be a clock); `TokenPlateauSearch` is
  `PlateauSearch` unchanged but for a verdict in tokens: "plateau: 1,840 output tokens/s at 24
  users, TTFT p95 610 ms, ITL p95 48 ms". Little's law holds in tokens as in requests (users =
  tokens/s x seconds per token per user), so the search's model-guided knee works unchanged.
  docs/llm.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.llm.tokens import COUNTED, SERVER, RequestTokens
from sm_locust.measure.steady import (
    DEFAULT_SLO_PERCENTILE,
    STABILITY_TOLERANCE,
    STABILITY_WINDOWS,
    StepMeasurement,
    histogram_percentile,
    parse_percentile,
    percentile_label,
    steady_window,
)
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import UNKNOWN, Interval, percentile_cis, rate_ci
from sm_locust.plateau.conditions import (
    KIND_CONSTRAINT,
    KIND_LIMIT,
    Condition,
    LatencySLO,
    constraint_undecided,
    constraint_violation,
    latency_slos,
)
from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import BOUND_ERRORS, BOUND_LATENCY, Decision, PlateauSearch, Verdict, step_name
from sm_locust.util.formatting import latency, with_interval

MIXED = "mixed"
OBJECTIVE = "output-tokens"
_HISTOGRAMS = ("ttft", "itl", "tpot", "e2e", "rate")
SERIES = {"ttft": "TTFT", "itl": "ITL"}


def _key(value: float) -> int:
    """A value (ms, or tokens/s) in tenths, rounded to ~2-3 significant digits (bounded histograms)."""
    if value < 100.0:
        return round(value * 10.0)
    if value < 1000.0:
        return round(value) * 10
    if value < 10000.0:
        return round(value / 10.0) * 100
    return round(value / 100.0) * 1000


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
                      self.unrecognised, self.arrived],
                "h": {name: dict(hist) for name, hist in self.hists.items() if hist}}

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


# -- intervals: the one definition of each token figure's 95 % interval ---------------------------

INTERVAL_SERIES = ("ttft", "itl")  # the latencies whose p50 and p95 get an interval in an `llm.ci95`
INTERVAL_PERCENTILES = (50.0, 95.0)


def tokens_rate_ci(samples: Sequence[tuple[float, Bucket]]) -> Interval:
    """95 % interval of the output tokens/s of `samples` ((seconds, bucket) in time order: a window's
    seconds, or a run's merged minutes and hours), by batch means (`uncertainty.rate_ci`)."""
    if not samples:
        return UNKNOWN
    return rate_ci([b.arrived for _, b in samples], [d for d, _ in samples])


def token_percentile_cis(samples: Sequence[tuple[float, Bucket]], series: str,
                         pcts: Sequence[float]) -> dict[float, Interval]:
    """95 % intervals (ms) of percentiles of histogram `series` ('ttft', 'itl', 'e2e', ...) over
    `samples`, by a block bootstrap (`uncertainty.percentile_cis`; the histograms count tenths of a
    millisecond)."""
    wanted = [float(p) for p in pcts]
    if not samples:
        return {p: UNKNOWN for p in wanted}
    cis = percentile_cis([b.hists.get(series, {}) for _, b in samples], wanted, intervals=[d for d, _ in samples])
    return {p: UNKNOWN if ci.low is None or ci.high is None else Interval(round(ci.low / 10.0, 3),
                                                                          round(ci.high / 10.0, 3))
            for p, ci in cis.items()}


def token_intervals(samples: Sequence[tuple[float, Bucket]],
                    series: Sequence[str] = INTERVAL_SERIES) -> dict[str, list[float] | None]:
    """An `llm.ci95` object (the run's, each step's, the token plateau's): `<series>_p50_ms`,
    `<series>_p95_ms` for each of `series`, and `output_tokens_per_s`, each [low, high] or None."""
    out: dict[str, list[float] | None] = {}
    for name in series:
        for pct, ci in token_percentile_cis(samples, name, INTERVAL_PERCENTILES).items():
            out[f"{name}_p{pct:g}_ms"] = ci.as_list()
    out["output_tokens_per_s"] = tokens_rate_ci(samples).as_list()
    return out


# -- the objective ------------------------------------------------------------------------------


@dataclass
class TokenStep(StepMeasurement):
    """A step judged on output tokens/s: `goodput_rps` (what the searches compare) is its tokens/s."""

    tokens: Bucket = field(default_factory=Bucket)
    tokens_s: float = 0.0
    """The length of the window the tokens were counted in (the step's steady window)."""
    per_second: list[tuple[float, Bucket]] = field(default_factory=list, repr=False, compare=False)
    """The window's answers second by second (duration, bucket): what the token intervals come from."""
    _token_cis: dict[tuple[str, float], Interval] = field(default_factory=dict, init=False, repr=False, compare=False)
    _intervals: dict[str, list[float] | None] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, step: StepMeasurement, tokens: Bucket, duration_s: float, stable: bool | None = None,
           spread: float = 0.0, unstable_reason: str | None = None,
           per_second: Sequence[tuple[float, Bucket]] = ()) -> TokenStep:
        """`step` judged on `tokens` (counted over `duration_s`); stability on tokens when given;
        `per_second`: the window's buckets one by one, for the intervals."""
        fields = {name: getattr(step, name) for name, f in step.__dataclass_fields__.items() if f.init}
        if stable is not None:
            fields.update(stable=stable, spread=spread, unstable_reason=unstable_reason)
        return cls(**fields, tokens=tokens, tokens_s=duration_s, per_second=list(per_second))

    @property
    def output_tokens_ci(self) -> Interval:
        """95 % interval of the output tokens/s (`tokens_rate_ci` over the window's seconds)."""
        return tokens_rate_ci(self.per_second)

    @property
    def goodput_ci(self) -> Interval:  # the searches' throughput: output tokens/s
        return self.output_tokens_ci

    def token_interval(self, series: str, pct: float) -> Interval:
        """95 % interval (ms) of a TTFT or ITL percentile (`uncertainty.percentile_ci` over the seconds),
        computed once per step (the searches ask for it at every tick)."""
        key = (series, float(pct))
        if key not in self._token_cis:
            self._token_cis[key] = self._token_interval(series, pct)
        return self._token_cis[key]

    def _token_interval(self, series: str, pct: float) -> Interval:
        return token_percentile_cis(self.per_second, series, (pct,))[float(pct)]

    def token_intervals(self) -> dict[str, list[float] | None]:
        """The step's `llm.ci95` (`token_intervals` over its seconds, computed once): what summary.json
        and the report show beside its tokens/s, TTFT and ITL, the intervals its decisions used."""
        if self._intervals is None:
            self._intervals = token_intervals(self.per_second)
        return dict(self._intervals)

    def llm_figures(self) -> dict | None:
        """The step's `llm` object: its window's figures (`Bucket.figures`) and their `ci95`
        (`token_intervals`), over the seconds the search judged it on. The one source of a judged
        step's token figures: summary.json's `steps[].llm` (`record.summary.step_summary`), the token
        plateau's `llm` and, through them, the report. None when no tokens were counted."""
        figures = self.tokens.figures(self.tokens_s)
        if figures is not None:
            figures["ci95"] = self.token_intervals()
        return figures

    def token_count(self, series: str) -> int:
        """How many values a TTFT (answers) or ITL (token gaps) percentile comes from."""
        return sum(self.tokens.hists.get(series, {}).values())

    @property
    def output_tokens_per_s(self) -> float:
        return self.tokens.arrived / self.tokens_s if self.tokens_s > 0 else 0.0

    @property
    def goodput_rps(self) -> float:  # the searches' throughput: output tokens/s
        return self.output_tokens_per_s

    def token_percentile(self, series: str, pct: float) -> float | None:
        """A percentile (ms) of `ttft` or `itl` over the step's answers."""
        return _percentile(self.tokens.hists.get(series, {}), pct)

    def describe_tokens(self, pct: float = DEFAULT_SLO_PERCENTILE) -> str:
        """'1,840 (±35) output tokens/s, TTFT p95 610 ms [580, 650], ITL p95 48 ms [45, 52]': each
        figure with its interval when the step has its seconds."""
        label = percentile_label(pct)
        parts = [f"{with_interval(self.output_tokens_per_s, self.output_tokens_ci)} output tokens/s"]
        for series, name in SERIES.items():
            value = self.token_percentile(series, pct)
            parts.append(f"{name} {label} {_ms(value, self.token_interval(series, pct))}")
        return ", ".join(parts)


def _ms(value: float | None, interval: Interval) -> str:
    """A token latency in a sentence, with its interval when there is one (`formatting.with_interval`)."""
    if value is None or not interval.known:
        return latency(value, " ms")
    return with_interval(value, interval, " ms", 0 if value >= 100 else 1)


class TokenSLO(LatencySLO):
    """A step is not acceptable when its TTFT or ITL percentile exceeds `max_ms` (any percentile); the
    check, violation line and description are LatencySLO's."""

    def __init__(self, series: str, percentile: float | str, max_ms: float):
        if series not in SERIES:
            raise UsageError(f"token SLO series {series!r} is not one of: {', '.join(SERIES)}")
        self.series = series
        self.percentile = parse_percentile(percentile)
        self.max_ms = float(max_ms)
        if not self.max_ms > 0:
            raise UsageError(f"--{series}-slo-ms must be more than 0 ms, got {max_ms!r}")

    @property
    def label(self) -> str:
        return f"{SERIES[self.series]} {percentile_label(self.percentile)}"

    def value(self, step: StepMeasurement) -> float | None:
        return step.token_percentile(self.series, self.percentile) if isinstance(step, TokenStep) else None

    def interval(self, step: StepMeasurement) -> Interval:
        return step.token_interval(self.series, self.percentile) if isinstance(step, TokenStep) else UNKNOWN

    def count(self, step: StepMeasurement) -> int:
        return step.token_count(self.series) if isinstance(step, TokenStep) else 0


def sub_windows(window: Sequence[Second], count: int = STABILITY_WINDOWS) -> list[list[Second]]:
    """`window` cut into `count` parts of equal duration (a second belongs to the part it ends in, as
    `measure.steady` judges request stability)."""
    total = sum(s.interval for s in window)
    bounds = [total * (i + 1) / count for i in range(count)]
    parts: list[list[Second]] = [[] for _ in range(count)]
    elapsed, index = 0.0, 0
    for second in window:
        elapsed += second.interval
        while index < count - 1 and elapsed > bounds[index] + 1e-9:
            index += 1
        parts[index].append(second)
    return parts


def token_stability(window: Sequence[Second], tokens: Callable[[Sequence[Second]], Bucket],
                    min_subwindow_s: float) -> tuple[bool, float, str | None]:
    """(stable, spread, reason) judged on output tokens/s: each sub-window's rate within
    `STABILITY_TOLERANCE` of their mean (answers long enough to span sub-windows make completions a
    poor clock, tokens flow every decode step)."""
    total = sum(s.interval for s in window)
    if total < STABILITY_WINDOWS * min_subwindow_s - 1e-9:
        return False, 0.0, (f"steady window {total:.3g} s is too short to judge stability"
                            f" (needs {STABILITY_WINDOWS} x {min_subwindow_s:g} s)")
    rates = []
    for part in sub_windows(window):
        duration = sum(s.interval for s in part)
        if duration > 0:
            rates.append(tokens(part).arrived / duration)
    mean = sum(rates) / len(rates) if rates else 0.0
    if mean <= 0:
        return False, 0.0, "no output tokens arrived in the steady window"
    spread = max(abs(r - mean) / mean for r in rates)
    if spread > STABILITY_TOLERANCE:
        return False, spread, (f"output tokens/s vary {spread * 100:.0f} % between sub-windows"
                               f" (> {STABILITY_TOLERANCE * 100:g} %)")
    return True, spread, None


SETTLE_MIN_S = 1.0
SETTLE_MAX_S = 30.0


def settle_s(step: StepMeasurement) -> float:
    """How long the users stay stopped after `step` before the next step starts: its p95 latency (by
    then the answers the stopped users left behind, queued ones included, are done or abandoned),
    within [`SETTLE_MIN_S`, `SETTLE_MAX_S`]."""
    p95 = step.p95_ms
    return min(SETTLE_MAX_S, max(SETTLE_MIN_S, (p95 or 0.0) / 1000.0))


ONE_AT_A_TIME = 1.9
"""The fastest spawn rate at which Locust starts users one by one: it starts floor(rate) users at once,
every floor(rate) / rate seconds (locust.dispatch.UsersDispatcher), and users started together enter
the batch in the same decode step."""


def spread_rate(users: int, last: StepMeasurement) -> float:
    """Users/s that start `users` one by one, evenly over `last`'s median answer time when that leaves
    them at least 1 / `ONE_AT_A_TIME` s apart, else that far apart: each enters the batch in its own
    decode step."""
    p50 = last.p50_ms
    if not users or not p50 or p50 <= 0:
        return ONE_AT_A_TIME
    return min(ONE_AT_A_TIME, users / (p50 / 1000.0))


class TokenDriver(SearchDriver):
    """`SearchDriver` whose steps are `TokenStep`s: `tokens(seconds)` gives the answers and tokens of
    those timeline seconds (`record.llm.LlmStats.over`); stability is judged on tokens/s.

    Every step starts from an idle endpoint: after a step, the users are stopped for `settle_s` (0
    users, seconds that belong to no step) and the next step's users start together. A continuous
    batch remembers its past: users that entered it in the same decode step stay in lockstep (equal
    answers, no think time), so their prompts' prefills share one step per cycle, while a step above
    the batch cap (a queue) spreads them over as many steps as there are users, and that spread
    outlives the step. The same load then read ITL p95 39 ms before a 32-user step and 84 ms after it
    (docs/llm.md): what a step reads must depend on its load, not on the path to it."""

    def __init__(self, search: PlateauSearch, tokens: Callable[[Sequence[Second]], Bucket], step_s: float, *,
                 settle: bool = True, **kwargs):
        super().__init__(search, step_s, **kwargs)
        self.tokens = tokens
        self.settle = settle
        self.settle_until: float | None = None
        """While set: the users are stopped until then (the next step's clock starts when it passes)."""
        self._spawn_rate: float | None = None

    @property
    def spawn_rate(self) -> float | None:
        """Users/s that start the step's users one by one (`spread_rate`; None for the first step: at once)."""
        return self._spawn_rate

    def tick(self, now: float, timeline: Sequence[Second]) -> Decision:
        """The driver's `tick`, with the users stopped for `settle_s` between two steps."""
        if self.settle_until is not None:
            if now < self.settle_until - 1e-9:
                return Decision(0.0, "settling: the endpoint works off the last step's answers")
            self.settle_until = None
            self.step_start = now
            assert self.decision is not None  # a step was fed before the settle began
            self._spawn_rate = spread_rate(self.decision.users or 0, self.measurements[-1])
            return self.decision
        measured = len(self.measurements)
        decision = super().tick(now, timeline)
        if self.settle and len(self.measurements) > measured and not decision.stop:
            self.settle_until = now + settle_s(self.measurements[-1])
            self._spawn_rate = None  # the users stop at once
            return Decision(0.0, "settling: the endpoint works off the last step's answers")
        return decision

    def finish(self, now: float, timeline: Sequence[Second], reason: str) -> Decision:
        if self.settle_until is not None:  # stopped while settling: no step is under way
            self.settle_until = None
            self.step_start = now
        return super().finish(now, timeline, reason)

    def _measure(self, seconds: Sequence[Second]) -> TokenStep:
        step = super()._measure(seconds)
        window = steady_window(seconds, self.warmup_s, self.warmup_fraction) or [s for s in seconds if not s.spawning] \
            or list(seconds)
        stable, spread, why = token_stability(window, self.tokens, self.min_subwindow_s)
        per_second = [(s.interval, self.tokens([s])) for s in window]
        return TokenStep.of(step, self.tokens(window), sum(s.interval for s in window), stable, spread, why,
                            per_second)


@dataclass
class TokenVerdict(Verdict):
    """The verdict in tokens: text and summary.json's `plateau` say output tokens/s, TTFT and ITL."""

    percentile: float = DEFAULT_SLO_PERCENTILE

    @classmethod
    def of(cls, verdict: Verdict, percentile: float) -> TokenVerdict:
        fields = {name: getattr(verdict, name) for name in verdict.__dataclass_fields__}
        return cls(**fields, percentile=percentile)

    def _describe(self, step: StepMeasurement, steps: Sequence[StepMeasurement] = ()) -> str:
        text = f"{step.load_label()}"
        if isinstance(step, TokenStep):
            tokens = step.describe_tokens(self.percentile)
            rate, rest = tokens.split(", ", 1)
            text = f"{rate} at {text}, {rest}"
        if not step.stable:
            text += " (unstable)"
        return step_name(step, steps) + text

    def _reached(self, best: str, steps: Sequence[StepMeasurement] = ()) -> str:
        uncertain = self.knee_uncertain or self.knee_open
        return f"{best} ({uncertain})" if uncertain is not None else best

    def as_dict(self, steps: Sequence[StepMeasurement] | None = None) -> dict:
        out = super().as_dict(steps)
        step, capacity = self.plateau, self.capacity
        out["objective"] = OBJECTIVE
        if isinstance(step, TokenStep):
            out["goodput_rps"] = round(step.request_goodput_rps, 3)
            out["output_tokens_per_s"] = round(step.output_tokens_per_s, 3)
            out["output_tokens_per_s_ci95"] = step.output_tokens_ci.as_list()
            out["llm"] = step.llm_figures()
        if isinstance(capacity, TokenStep):
            out["capacity_rps"] = round(capacity.request_goodput_rps, 3)
            out["capacity_output_tokens_per_s"] = round(capacity.output_tokens_per_s, 3)
            out["capacity_output_tokens_per_s_ci95"] = capacity.output_tokens_ci.as_list()
        out["text"] = self.text(self.steps if steps is None else steps)
        return out


def slo_figures(step: StepMeasurement, slos: Sequence[TokenSLO]) -> str:
    """'ITL p95 61 ms [52, 68], TTFT p95 820 ms [700, 950]': the figures a step's SLO decision rests on."""
    return ", ".join(f"{c.label} {_ms(c.value(step), c.interval(step))}" for c in slos)


MEETS, BREAKS, UNDECIDED = "meets", "breaks", "undecided"


def slo_decision(step: StepMeasurement, conditions: Sequence[Condition]) -> str:
    """What one step says of the constraints on its own: it surely breaks one, it cannot be said to meet
    one (an interval straddling its SLO, too few answers), or it surely meets them all."""
    if constraint_violation(conditions, step):
        return BREAKS
    return UNDECIDED if constraint_undecided(conditions, step) else MEETS


def replicates_disagree(replicates: Sequence[tuple[StepMeasurement, StepMeasurement]],
                        conditions: Sequence[Condition], slos: Sequence[TokenSLO]) -> str | None:
    """Why the knee is not confirmed, or None. Each pair is one deciding step's first measurement and
    its replicate. They disagree when one surely meets the constraints and the other surely breaks one,
    or when their decisions differ and an SLO's two intervals do not overlap (the machine moved by more
    than either step's own noise). An undecided replicate whose intervals overlap the first's adds no
    contradiction: it is the same answer, measured less precisely."""
    said = []
    for first, again in replicates:
        a, b = slo_decision(first, conditions), slo_decision(again, conditions)
        apart = [c for c in slos if c.interval(first).known and c.interval(again).known
                 and ((c.interval(first).high or 0.0) < (c.interval(again).low or 0.0)
                      or (c.interval(again).high or 0.0) < (c.interval(first).low or 0.0))]
        if {a, b} == {MEETS, BREAKS} or (a != b and apart):
            said.append(f"{first.load_label()}: {slo_figures(first, slos)} ({a}), then {slo_figures(again, slos)} "
                        f"({b})")
    if not said:
        return None
    return (f"the knee is not confirmed: its deciding steps disagree between replicates ({'; '.join(said)}): the "
            "machine drifted between them beyond the steps' intervals; measure on a quieter machine or with longer "
            "--step-seconds")


def broke_once(first: StepMeasurement, again: StepMeasurement, conditions: Sequence[Condition]) -> str | None:
    """'5 users broke ITL p95 60 ms in one of two measurements (39.6 ms [38.0, 39.6], then 76.5 ms [72.3, 78.6])'
    when one of a load's two measurements surely met the constraints and the other surely broke one, else
    None. Such a load does not reliably meet its SLOs: it is taken as breaking, on its breaking measurement."""
    decisions = slo_decision(first, conditions), slo_decision(again, conditions)
    if set(decisions) != {MEETS, BREAKS}:
        return None
    breaking = again if decisions[1] == BREAKS else first
    broken = next(c for c in conditions if c.kind == KIND_CONSTRAINT and c.check([breaking]))
    if isinstance(broken, LatencySLO):
        what = f"{broken.label} {latency(broken.max_ms, ' ms')}"
        figures = ", then ".join(_ms(broken.value(m), broken.interval(m)) for m in (first, again))
    else:
        what, figures = broken.describe(), f"{constraint_violation([broken], breaking)}"
    return f"{first.load_label()} broke {what} in one of two measurements ({figures})"


class TokenPlateauSearch(PlateauSearch):
    """`PlateauSearch` fed `TokenStep`s (it compares output tokens/s); the verdict says tokens.

    Before it stops, the steps that place the knee (the knee, the first load above it) are measured
    once more, the higher first (the reverse of their first order), and each load is judged on both
    measurements. A load that surely met the constraints in one and surely broke one in the other does
    not reliably meet them (`broke_once`): it is taken as breaking, on its breaking measurement. When
    that is the knee, the knee moves to the search's knee among the loads below (the highest that met
    them, on a rising curve), whose deciding steps not yet measured twice are measured once more: one
    such re-confirmation at most. The run is INCONCLUSIVE, saying why, never a confident other answer,
    when replicates disagree otherwise (`replicates_disagree`: an undecided one whose interval lies
    apart), when no lower load is acceptable, or when the moved knee's replicates disagree too; the
    knee stands where the measurements put it otherwise. Not when a budget (duration, invocations)
    stopped the search, or the client did."""

    max_confirmations = 2  # the knee's confirmation, then one more when a load that broke once moved it
    figure_unit = "output tokens/s"
    # Continuous batching lengthens every decode step with the batch (docs/llm.md, the local endpoint's
    # `--llm-step-ms-per-seq`), so below the knee tokens/s grows slower than n x one user's: 40 ms + 8 ms a
    # sequence reads 3 users 16 % under the closed-loop model's min(n / cycle, capacity) with no noise at all.
    # The model still places loads; only Little's law (which holds in tokens) judges a contradiction.
    model_contradicts = False

    def __init__(self, *args, percentile: float = DEFAULT_SLO_PERCENTILE, confirm: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.percentile = percentile
        self.confirm = confirm
        self._confirming: list[float] = []  # loads still to measure again
        self._first: dict[float, StepMeasurement] = {}  # each re-measured load's first measurement
        self._held: tuple[Decision, str | None] | None = None  # the stop decided before the confirmation
        self._moved: str | None = None
        self._rounds = 0  # confirmations started
        self._twice: set[float] = set()  # loads measured twice by a confirmation
        self._broke_once: dict[float, str] = {}  # loads taken as breaking, and why (`broke_once`)

    @property
    def slos(self) -> list[TokenSLO]:
        return [c for c in self.conditions if isinstance(c, TokenSLO)]

    def feed(self, step: StepMeasurement) -> Decision:
        if self._confirming and self._stop is None and self._pending == self._confirming[0]:
            return self._feed_replicate(step)
        decision = super().feed(step)
        if not decision.stop or not self.confirm or self._held is not None or self._client is not None \
                or self.budget_fired():
            return decision
        self._held = (decision, self._stop_kind)
        self._stop, self._stop_kind = None, None
        return self._confirm_knee("confirming the knee") or self._resume()

    def feed_final(self, step: StepMeasurement, reason: str) -> Decision:
        """A step cut short by an outside stop or a budget. During a confirmation it is recorded (it ran)
        but judges nothing: each load keeps its first measurement, and the stop is `reason`."""
        if not (self._confirming and self._stop is None and self._pending == self._confirming[0]):
            return super().feed_final(step, reason)
        step.load = self._confirming[0]
        step.latency_slos = latency_slos(self.conditions)
        self.steps.append(step)
        self._confirming = []
        self._by_load.update(self._first)
        return self.halt(reason)

    def _confirm_knee(self, why: str) -> Decision | None:
        """Measure the knee's deciding steps (the first load above it, then the knee) not yet measured
        twice once more, or None: no knee, or nothing left to measure."""
        knee = self._plateau()
        if knee is None:
            return None
        above = [m for m in self._by_load.values() if m.load > knee.load and not m.client_bound]
        loads = ([min(above, key=lambda m: m.load).load] if above else []) + [knee.load]
        loads = [load for load in loads if load not in self._twice]
        if not loads:
            return None
        self._rounds += 1
        self._first = {load: self._by_load[load] for load in loads}
        self._confirming = loads
        return self._run(loads[0], self._confirm_reason(loads, why))

    def _confirm_reason(self, loads: Sequence[float], why: str = "confirming the knee") -> str:
        steps = [self._first[load] for load in loads]
        return f"{why}: measuring {' then '.join(m.load_label() for m in steps)} again"

    def _resume(self) -> Decision:
        """The stop decided before the confirmation."""
        held, kind = self._held or (Decision(None, "confirmed"), None)
        self._stop, self._stop_kind, self._pending = held, kind, None
        return held

    def _feed_replicate(self, step: StepMeasurement) -> Decision:
        """Record a confirmation step (as `feed` records any), then the next one, or judge the round."""
        load = self._confirming.pop(0)
        step.load = load
        self.steps.append(step)
        self._by_load[load] = step
        self._twice.add(load)
        step.latency_slos = latency_slos(self.conditions)
        if step.client_bound:
            self._client = f"{step.client_bound_reason} at {step.load_label()}"
            self._confirming = []
            return self._halt(self._client, "client")
        budget = self.budget_fired()
        if budget:
            self._confirming = []
        elif self._confirming:
            return self._run(self._confirming[0], self._confirm_reason(self._confirming))
        again = self._judge_replicates(allow_move=not budget)
        if budget:
            return self._halt(budget, KIND_LIMIT)
        return again or self._resume()

    def _judge_replicates(self, allow_move: bool) -> Decision | None:
        """Judge the round just measured. A load that broke once is taken as breaking, on its breaking
        measurement (`broke_once`); the others keep their first measurement. Then the knee stands, or it
        moved below a load that broke once (its deciding steps are measured again: the Decision), or the
        run is INCONCLUSIVE (`_moved`), the knee where the round's first measurements put it."""
        replicates = [(self._first[m], self._by_load[m]) for m in sorted(self._first)
                      if self._by_load[m] is not self._first[m]]
        self._by_load.update(self._first)
        knee = self._plateau()
        disagree = replicates_disagree(replicates, self.conditions, self.slos)
        if disagree is None:
            return None
        broke = {a.load: (a, b) for a, b in replicates if broke_once(a, b, self.conditions)}
        if any(a.load not in broke and replicates_disagree([(a, b)], self.conditions, self.slos)
               for a, b in replicates):
            self._inconclusive(disagree)  # an undecided replicate apart from the first: nothing settles it
            return None
        for load, (a, b) in broke.items():
            self._by_load[load] = b if slo_decision(b, self.conditions) == BREAKS else a
        moved = self._plateau()
        if knee is None or moved is None or moved.load > knee.load:
            self._inconclusive(disagree)  # no acceptable load below the one that broke once
            return None
        said = "; ".join(broke_once(a, b, self.conditions) or "" for a, b in broke.values())
        if moved.load < knee.load and self._rounds >= self.max_confirmations:
            self._inconclusive(f"the knee is not confirmed: {said}: the machine drifted between the replicates "
                               "beyond the steps' intervals; measure on a quieter machine or with longer "
                               "--step-seconds")
            return None
        self._broke_once.update({load: broke_once(a, b, self.conditions) or "" for load, (a, b) in broke.items()})
        if moved.load == knee.load or not allow_move:
            return None  # the knee's own measurements agree (or a budget ended the run): it stands
        return self._confirm_knee(f"{said}: confirming the knee at {moved.load_label()}")

    def _inconclusive(self, reason: str) -> None:
        """The round's first measurements stand, and the run is INCONCLUSIVE for `reason` (after the
        earlier round's load that broke once, when the knee had moved below it)."""
        self._by_load.update(self._first)
        earlier = "; ".join(self._broke_once.values())
        self._moved = f"{earlier}, so the knee moved below it; then {reason}" if earlier else reason

    def _verdict(self) -> Verdict:
        """The search's verdict, its bound said as a load that broke once when it is one."""
        verdict = super()._verdict()
        knee = verdict.plateau
        if knee is not None and verdict.bound in (BOUND_LATENCY, BOUND_ERRORS):
            above = [m for m in self._violating() if m.load > knee.load]
            if above and above[0].load in self._broke_once:
                verdict.reason = self._broke_once[above[0].load]
        return verdict

    def _unsupported(self, verdict: Verdict) -> list[str]:
        """The search's own (`Search._unsupported`: "no acceptable step" resting on an SLO the lowest load
        could not decide, as an LLM's first steps of a handful of answers, is INCONCLUSIVE there), and
        replicates that disagree on the knee."""
        out = super()._unsupported(verdict)
        return out + [self._moved] if self._moved else out

    def verdict(self) -> TokenVerdict:
        return TokenVerdict.of(super().verdict(), self.percentile)
