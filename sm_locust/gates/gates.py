"""Gate strategy objects: each one checks a single limit and returns a failure message or None.

The shape follows pytest-benchmark's regression checks: small objects, one public method, a
message that names the observed value and the limit. A gate never sees Locust, only `RunData`.
`evaluate` runs a list of gates and returns one `Verdict` per gate, in order.

What they count: logical invocations (a stream is one request, whatever TTFT / InterChunk entries
it fired), error rates per invocation, and throughput as goodput, successful invocations per
second: an endpoint answering errors fast, or a client retrying a dead one, does not pass a
throughput gate on its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sm_locust.record.runfolder import Metrics, RunData
from sm_locust.util.formatting import MISSING, compact, percent


def _scope_label(name: str | None) -> str:
    return "all requests" if name is None else f"name {name!r}"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one gate: its title, pass or fail, what was observed, and why it failed."""

    gate: str
    passed: bool
    observed: str
    message: str = ""

    def line(self) -> str:
        word = "PASS" if self.passed else "FAIL"
        detail = f"observed {self.observed}" if self.passed else self.message
        return f"{word} {self.gate}: {detail}"


class Gate:
    """Base: a title (`name`) and `check(run) -> str | None` (None = pass)."""

    scope: str | None = None  # a request name, or None for the whole run

    @property
    def name(self) -> str:  # pragma: no cover - every gate defines it
        raise NotImplementedError

    def observed(self, run: RunData) -> str:
        return MISSING

    def check(self, run: RunData) -> str | None:  # pragma: no cover
        raise NotImplementedError

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

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        return compact(metrics.percentile(self.percentile), " ms") if metrics else MISSING

    def check(self, run: RunData) -> str | None:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return metrics
        value = metrics.percentile(self.percentile)
        if value is None:
            return f"no p{self.percentile} to check: the run has no requests"
        if value > self.limit_ms:
            return f"p{self.percentile} was {value:g} ms, over the limit of {self.limit_ms:g} ms"
        return None


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

    def check(self, run: RunData) -> str | None:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return metrics
        if metrics.error_rate > self.limit:
            return (f"error rate was {percent(metrics.error_rate, 2, unit='%')} ({metrics.failures} of "
                    f"{metrics.requests} requests failed), over the limit of {percent(self.limit, 2, unit='%')}")
        return None


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
        return f"{metrics.goodput_rps or 0.0:.1f} req/s ({metrics.rps:.1f} attempted)" if metrics else MISSING

    def check(self, run: RunData) -> str | None:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return metrics
        goodput = metrics.goodput_rps or 0.0  # never None: Metrics derives it from rps and the error rate
        if goodput < self.limit:
            return (f"goodput was {goodput:.1f} req/s (successful invocations; {metrics.rps:.1f} "
                    f"attempted), under the minimum of {self.limit:g} req/s")
        return None


@dataclass(frozen=True)
class MinRequests(Gate):
    """The run sent at least `limit` requests: a smoke test that sent nothing did not pass."""

    limit: int = 1
    scope: str | None = None

    @property
    def name(self) -> str:
        return f"requests >= {self.limit} ({_scope_label(self.scope)})"

    def observed(self, run: RunData) -> str:
        metrics = run.scope(self.scope)
        return f"{metrics.requests} requests" if metrics else MISSING

    def check(self, run: RunData) -> str | None:
        metrics = self._metrics(run)
        if isinstance(metrics, str):
            return metrics
        if metrics.requests < self.limit:
            return f"the run sent {metrics.requests} requests, fewer than {self.limit}"
        return None


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

    def check(self, run: RunData) -> str | None:
        value = self._value(run)
        if value is None:
            return f"no {self.metric} to compare: the run has no requests"
        limit = self.limit()
        _, higher_is_better, _ = REGRESSION_METRICS[self.metric]
        worse = value < limit if higher_is_better else value > limit
        if worse:
            bound = "under" if higher_is_better else "over"
            return (f"{self.metric} was {self._fmt(value)}, {bound} the allowed {self._fmt(limit)} "
                    f"(baseline {self._fmt(self.baseline)}, tolerance {self.tolerance * 100:g}%)")
        return None


def evaluate(gates: Iterable[Gate], run: RunData) -> list[Verdict]:
    """Check every gate against the run; one Verdict each, in order."""
    verdicts = []
    for gate in gates:
        failure = gate.check(run)
        verdicts.append(Verdict(gate=gate.name, passed=failure is None, observed=gate.observed(run),
                                message=failure or ""))
    return verdicts
