"""Gate strategy objects: each one judges a single limit: pass, fail or inconclusive, with why.

The shape follows pytest-benchmark's regression checks: small objects, one public method
(`judge(run) -> Outcome`), a message that names the observed value, its interval and the limit. A
gate never sees Locust, only `RunData`. `evaluate` runs a list of gates and returns one `Verdict`
per gate, in order.

Threshold gates on a figure with a 95 % interval (p50/p95/p99 latency, goodput: summary.json
`totals.ci95`) are INCONCLUSIVE when the interval straddles the limit, and say how much longer a
run would decide them (`decide.py`). A figure with no interval recorded (one request name's, or a
run folder from before intervals), or whose interval could not be computed (a run too short for
one: summary.json's null), is judged on its point value, and the line says so. The error rate and
the request count are counts of this run's invocations, judged as counted.

A gate never judges the load generator: when a figure it reads was pooled over a client-bound step
(`clientmade.in_whole_run`: every whole-run figure, totals or a request name's, holds every step's
requests; a regression gate's baseline's too), `evaluate` answers INCONCLUSIVE (`Gate.held`), naming
the steps and the fix (add workers, raise the pod's CPU limit), so `--inconclusive` decides the exit
code as for any undecided gate. The request count is a fact of the run, not of the endpoint, and is
judged as counted.

What they count: logical invocations (a stream is one request, whatever TTFT / InterChunk entries
it fired), error rates per invocation, and throughput as goodput, successful invocations per
second: an endpoint answering errors fast, or a client retrying a dead one, does not pass a
throughput gate on its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

from sm_locust.gates.clientmade import ClientMade, in_whole_run
from sm_locust.gates.decide import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    WORDS,
    Bounds,
    judge,
    judge_point,
    longer_run_factor,
    longer_run_text,
)
from sm_locust.record.model import Interval, percentile_key
from sm_locust.record.runfolder import Metrics, RunData
from sm_locust.util.formatting import MISSING, compact, percent, with_interval


class _NoInterval(Enum):
    NO_INTERVAL = "no interval"


NO_INTERVAL: Final = _NoInterval.NO_INTERVAL  # summary.json records no interval for the figure (older run, one name)
Recorded = Interval | None | Literal[_NoInterval.NO_INTERVAL]  # what recorded_interval finds


@dataclass(frozen=True)
class Held:
    """A gate's figure the load generator made: why (`clientmade.ClientMade`), that run's client-bound
    steps named, and whether that run is the baseline (a regression gate's earlier run) or this one."""

    made: ClientMade
    where: str
    baseline: bool = False

    @classmethod
    def of(cls, run: RunData, baseline: bool = False) -> Held | None:
        made = in_whole_run(run.record)
        if made is None:
            return None
        return cls(made, made.where(run.record.steps), baseline)

    @property
    def fix(self) -> str:
        return self.made.fix

    @property
    def what(self) -> str:
        """What happened to the load generator ('the load generator was the bottleneck', a worker lost)."""
        return self.made.what

    @property
    def text(self) -> str:
        """The whole reason, once: a note before the gate lines, a JUnit property."""
        return f"the baseline: {self.made.text}" if self.baseline else self.made.text

    def words(self, observed: str) -> str:
        """A gate's line: the figure, the client-bound steps, the fix."""
        if self.baseline:
            where, whose, again = f"the baseline's {self.where}", "the baseline's", "measure the baseline again"
        else:
            where, whose, again = self.where, "the whole run's", "run again"
        return (f"{observed}, not judged: {self.made.what} in {where}, so {whose} figures "
                f"are partly the client's, not the endpoint's; {self.fix}, then {again}")


def _scope_label(name: str | None) -> str:
    return "all requests" if name is None else f"name {name!r}"


@dataclass(frozen=True)
class Outcome:
    """What a gate found: pass, fail or inconclusive, and (unless it passed plainly) why."""

    status: str
    message: str = ""

    @classmethod
    def of(cls, failure: str | None) -> Outcome:
        """A two-way gate's answer: None passes, a message fails."""
        return cls(PASS) if failure is None else cls(FAIL, failure)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one gate: its title, pass / fail / inconclusive, what was observed, and why."""

    gate: str
    status: str
    observed: str
    message: str = ""
    held: Held | None = None  # INCONCLUSIVE because the load generator made the figure: whose, why, the fix

    @property
    def client_fix(self) -> str | None:
        """What to do about the load generator when it made this gate's figure, else None."""
        return self.held.fix if self.held is not None else None

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def inconclusive(self) -> bool:
        return self.status == INCONCLUSIVE

    def fails(self, inconclusive_passes: bool = False) -> bool:
        """Whether this verdict fails the run: a FAIL, or an INCONCLUSIVE unless told to let it pass."""
        return self.status == FAIL or (self.status == INCONCLUSIVE and not inconclusive_passes)

    def line(self) -> str:
        detail = self.message if self.message else f"observed {self.observed}"
        return f"{WORDS[self.status]} {self.gate}: {detail}"


class Gate:
    """Base: a title (`name`) and `judge(run) -> Outcome`."""

    scope: str | None = None  # a request name, or None for the whole run
    reads_figures = True  # judges the endpoint's figures (False: a count of what the run did)

    @property
    def name(self) -> str:  # pragma: no cover - every gate defines it
        raise NotImplementedError

    def observed(self, run: RunData) -> str:
        return MISSING

    def judge(self, run: RunData) -> Outcome:  # pragma: no cover
        raise NotImplementedError

    def baseline_run(self) -> RunData | None:
        """The earlier run this gate compares with (regression gates), else None."""
        return None

    def held(self, run: RunData) -> Held | None:
        """Why the load generator made the figures this gate reads, or None: a client-bound step in
        this run, whose whole-run figures pooled it (`clientmade.in_whole_run`), else in its baseline's.
        Only a gate that reads figures, of a scope the run has requests in (else its own judge says
        there is nothing to judge)."""
        metrics = run.scope(self.scope)
        if not self.reads_figures or metrics is None or not metrics.requests:
            return None
        baseline = self.baseline_run()
        return Held.of(run) or (Held.of(baseline, baseline=True) if baseline is not None else None)

    def _metrics(self, run: RunData) -> Metrics | str:
        """The scope's figures, or why there are none."""
        metrics = run.scope(self.scope)
        if metrics is None:
            known = ", ".join(sorted(run.by_name)) or "none"
            return f"no requests named {self.scope!r} in the run (names: {known})"
        return metrics


@dataclass(frozen=True)
class MaxLatency(Gate):
    """A latency percentile (50, 95 or 99) must be at most `limit_ms`."""

    percentile: int
    limit_ms: float
    scope: str | None = None

    @property
    def name(self) -> str:
        return f"p{self.percentile} <= {self.limit_ms:g} ms ({_scope_label(self.scope)})"

    @property
    def key(self) -> str:
        return percentile_key(self.percentile)

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        if not metrics:
            return MISSING
        return _with_interval(metrics.percentile(self.percentile), recorded_interval(run, self.scope, self.key),
                              " ms")

    def judge(self, run: RunData) -> Outcome:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return Outcome(FAIL, metrics)
        value = metrics.percentile(self.percentile)
        if value is None:
            return Outcome(FAIL, f"no p{self.percentile} to check: the run has no requests")
        what = f"p{self.percentile}"
        return judge_figure(run, self.scope, self.key, float(value), self.limit_ms, upper=True,
                            over=f"{what} was {value:g} ms, over the limit of {self.limit_ms:g} ms", unit=" ms",
                            what=what)


@dataclass(frozen=True)
class MaxErrorRate(Gate):
    """failures / requests must be at most `limit` (a fraction: 0.01 = 1%)."""

    limit: float
    scope: str | None = None

    @property
    def name(self) -> str:
        return f"error rate <= {percent(self.limit, 2, unit='%')} ({_scope_label(self.scope)})"

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        if not metrics:
            return MISSING
        return f"{percent(metrics.error_rate, 2, unit='%')} ({metrics.failures}/{metrics.requests})"

    def judge(self, run: RunData) -> Outcome:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return Outcome(FAIL, metrics)
        if metrics.error_rate > self.limit:
            return Outcome(FAIL, f"error rate was {percent(metrics.error_rate, 2, unit='%')} ({metrics.failures} of "
                           f"{metrics.requests} requests failed), over the limit of {percent(self.limit, 2, unit='%')}")
        return Outcome(PASS)


@dataclass(frozen=True)
class MinRps(Gate):
    """Goodput (successful invocations / run duration) must be at least `limit`."""

    limit: float
    scope: str | None = None

    @property
    def name(self) -> str:
        return f"goodput >= {self.limit:g} req/s ({_scope_label(self.scope)})"

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        if not metrics:
            return MISSING
        goodput = _with_interval(metrics.goodput_rps or 0.0, recorded_interval(run, self.scope, "goodput_rps"),
                                 " req/s", digits=1)
        return f"{goodput} ({metrics.rps:.1f} attempted)"

    def judge(self, run: RunData) -> Outcome:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return Outcome(FAIL, metrics)
        goodput = metrics.goodput_rps or 0.0  # never None: Metrics derives it from rps and the error rate
        return judge_figure(run, self.scope, "goodput_rps", goodput, self.limit, upper=False,
                            over=(f"goodput was {goodput:.1f} req/s (successful invocations; {metrics.rps:.1f} "
                                  f"attempted), under the minimum of {self.limit:g} req/s"),
                            unit=" req/s", what="goodput", digits=1)


@dataclass(frozen=True)
class MinRequests(Gate):
    """The run sent at least `limit` requests: a smoke test that sent nothing did not pass."""

    limit: int = 1
    scope: str | None = None
    reads_figures = False  # what the run sent, whoever held it back

    @property
    def name(self) -> str:
        return f"requests >= {self.limit} ({_scope_label(self.scope)})"

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        return f"{metrics.requests} requests" if metrics else MISSING

    def judge(self, run: RunData) -> Outcome:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return Outcome(FAIL, metrics)
        if metrics.requests < self.limit:
            return Outcome(FAIL, f"the run sent {metrics.requests} requests, fewer than {self.limit}")
        return Outcome(PASS)


# metric name -> (attribute on Metrics, higher is better, unit)
REGRESSION_METRICS: dict[str, tuple[str, bool, str]] = {
    "p95": ("p95_ms", False, "ms"),
    "p99": ("p99_ms", False, "ms"),
    "goodput": ("goodput_rps", True, "req/s"),
    "error_rate": ("error_rate", False, ""),
}


@dataclass(frozen=True)
class NoRegression(Gate):
    """A metric must not be worse than the baseline's by more than `tolerance` (0.1 = 10%).

    Lower-is-better metrics may grow to baseline * (1 + tolerance); higher-is-better ones may fall
    to baseline * (1 - tolerance). The error rate may grow by `slack` (absolute) on top of that, so
    a baseline with 0 errors still allows a configurable few.
    """

    metric: str
    baseline: float
    tolerance: float
    slack: float = 0.0
    scope: str | None = None
    source: RunData | None = field(default=None, compare=False, repr=False)  # the baseline's run, when read

    def baseline_run(self) -> RunData | None:
        return self.source

    @property
    def name(self) -> str:
        return f"{self.metric} no worse than baseline {self._fmt(self.baseline)} by more than {self.tolerance * 100:g}%"

    def _fmt(self, value: float | None) -> str:
        if self.metric == "error_rate":
            return percent(value, 2, unit="%")
        attribute, _, unit = REGRESSION_METRICS[self.metric]
        return compact(value, f" {unit}")

    def _value(self, run: RunData) -> float | None:
        metrics = run.scope(self.scope)
        if metrics is None:
            return None
        return getattr(metrics, REGRESSION_METRICS[self.metric][0])

    def limit(self) -> float:
        _, higher_is_better, _ = REGRESSION_METRICS[self.metric]
        if higher_is_better:
            return self.baseline * (1 - self.tolerance)
        return self.baseline * (1 + self.tolerance) + self.slack

    def observed(self, run: RunData) -> str:
        return self._fmt(self._value(run))

    def judge(self, run: RunData) -> Outcome:
        value = self._value(run)
        if value is None:
            return Outcome(FAIL, f"no {self.metric} to compare: the run has no requests")
        limit = self.limit()
        _, higher_is_better, _ = REGRESSION_METRICS[self.metric]
        worse = value < limit if higher_is_better else value > limit
        if worse:
            bound = "under" if higher_is_better else "over"
            return Outcome(FAIL, f"{self.metric} was {self._fmt(value)}, {bound} the allowed {self._fmt(limit)} "
                           f"(baseline {self._fmt(self.baseline)}, tolerance {self.tolerance * 100:g}%)")
        return Outcome(PASS)


def recorded_interval(run: RunData, scope: str | None, key: str) -> Recorded:
    """The figure's 95 % interval as summary.json records it: (low, high); None when recorded as
    null (too few seconds to compute one); `NO_INTERVAL` when none is recorded at all (one request
    name's figures, or a run folder from before intervals)."""
    totals = run.record.totals
    if scope is not None or not totals.records_interval(key):
        return NO_INTERVAL
    pair = totals.interval(key)
    if pair is None or not all(isinstance(v, (int, float)) for v in pair):
        return None
    return float(pair[0]), float(pair[1])


def _number(value: float, digits: int | None) -> str:
    return compact(value) if digits is None else f"{value:.{digits}f}"


def _with_interval(value: float | None, interval: Recorded, unit: str, digits: int | None = None) -> str:
    """The figure as every surface shows it (`formatting.with_interval`: '48 ms [46, 51]', '45.0 req/s
    (±1.2)'), the interval widened to hold the figure; the figure alone when none is recorded."""
    if value is None:
        return MISSING
    if interval is NO_INTERVAL or interval is None:
        return with_interval(value, None, unit, digits or 0)
    bounds = Bounds.of(value, *interval)
    return with_interval(value, [bounds.low, bounds.high], unit, digits or 0)


def judge_figure(run: RunData, scope: str | None, key: str, value: float, limit: float, *, upper: bool, over: str,
                 unit: str, what: str, digits: int | None = None) -> Outcome:
    """A threshold gate on a figure with an interval (see the module docstring): `over` is the failure
    message on the point value, `what` the figure's name in the other messages."""
    interval = recorded_interval(run, scope, key)
    side = "over" if upper else "under"
    if interval is NO_INTERVAL or interval is None:
        if interval is None:
            why = "the run is too short for a 95 % interval (4 seconds of samples at least): run longer to decide"
        elif scope is not None:
            why = "no interval for one request name's figures"
        else:
            why = "this run folder records no interval"
        if judge_point(value, limit, upper=upper) == PASS:
            return Outcome(PASS, f"observed {_number(value, digits)}{unit} (point value: {why})")
        return Outcome(FAIL, f"{over} (point value: {why})")
    duration = _duration(run)
    bounds = Bounds.of(value, *interval)
    status = judge(bounds, limit, upper=upper)
    shown = _with_interval(value, interval, unit, digits)
    if status == PASS:
        return Outcome(PASS)
    if status == FAIL:
        return Outcome(FAIL, f"{what} {shown}: the whole interval is {side} the limit of {limit:g}{unit}")
    more = longer_run_text(longer_run_factor(bounds, limit), duration)
    return Outcome(INCONCLUSIVE, f"{what} {shown}: the interval straddles the limit of {limit:g}{unit}; {more}")


def _duration(run: RunData) -> float | None:
    value = run.record.duration_s
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def evaluate(gates: Iterable[Gate], run: RunData) -> list[Verdict]:
    """Judge every gate against the run; one Verdict each, in order. A gate that reads figures the load
    generator made (`Gate.held`) is INCONCLUSIVE, saying why, whatever its own judge says."""
    verdicts = []
    for gate in gates:
        observed = gate.observed(run)
        held = gate.held(run)
        if held is not None:
            verdicts.append(Verdict(gate=gate.name, status=INCONCLUSIVE, observed=observed,
                                    message=held.words(observed), held=held))
            continue
        outcome = gate.judge(run)
        verdicts.append(Verdict(gate=gate.name, status=outcome.status, observed=observed, message=outcome.message))
    return verdicts
