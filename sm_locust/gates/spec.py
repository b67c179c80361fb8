"""Gate limits as the command line gives them -> validated gate objects.

Each limit flag takes `VALUE` (whole run) or `NAME=VALUE` (one request name) and can be repeated.
Limits that cannot be met or contradict each other (latency <= 0, an error rate outside 0..1, a p95
limit above the p99 limit of the same scope) are usage errors naming the flag. `sm-locust smoke`
adds `DefaultMaxErrorRate` (no failed requests) unless a whole-run `--max-error-rate` or a
`--baseline` is given (`with_default_error_gate`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.gates.gates import Gate, MaxErrorRate, MaxLatency, MinRequests, MinRps

DEFAULT_MAX_ERROR_RATE = 0.0


@dataclass(frozen=True)
class DefaultMaxErrorRate(MaxErrorRate):
    """The error-rate gate smoke applies when none is given; its title says so and how to change it."""

    @property
    def name(self) -> str:
        return super().name.replace(")", ", default: --max-error-rate to change)", 1)


def with_default_error_gate(gates: Sequence[Gate], *, error_rate_given: bool, baseline: bool) -> list[Gate]:
    """`gates` plus `DefaultMaxErrorRate` when neither a whole-run error-rate limit nor a baseline was
    given (replacing the plain no-failure gate the gates add when nothing at all is asked)."""
    if error_rate_given or baseline:
        return list(gates)
    kept = [g for g in gates if not (type(g) is MaxErrorRate and g.scope is None)]
    return [*kept, DefaultMaxErrorRate(DEFAULT_MAX_ERROR_RATE)]


@dataclass(frozen=True)
class Limit:
    """One parsed `[NAME=]VALUE`."""

    flag: str
    value: float
    scope: str | None = None


def parse_limit(flag: str, text: str) -> Limit:
    """`"200"` -> Limit(flag, 200.0); `"ep=150"` -> Limit(flag, 150.0, "ep")."""
    scope, sep, number = str(text).rpartition("=")
    if sep and not scope:
        raise UsageError(f"{flag} {text!r}: the request name before '=' is empty; "
                         f"use {flag} NAME=VALUE or {flag} VALUE")
    try:
        value = float(number)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a number (use {flag} VALUE or {flag} NAME=VALUE)") from None
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{flag} {text!r} is not a finite number")
    return Limit(flag, value, scope or None)


@dataclass
class GateSpec:
    """The limits asked for, by flag; `build()` validates them and returns the gates."""

    max_p95_ms: Sequence[str] = field(default_factory=list)
    max_p99_ms: Sequence[str] = field(default_factory=list)
    max_error_rate: Sequence[str] = field(default_factory=list)
    min_rps: Sequence[str] = field(default_factory=list)
    min_requests: int = 1

    def is_empty(self) -> bool:
        return not (self.max_p95_ms or self.max_p99_ms or self.max_error_rate or self.min_rps)

    def build(self) -> list[Gate]:
        p95 = _limits("--max-p95-ms", self.max_p95_ms)
        p99 = _limits("--max-p99-ms", self.max_p99_ms)
        errors = _limits("--max-error-rate", self.max_error_rate)
        rps = _limits("--min-rps", self.min_rps)
        for limit in p95 + p99:
            if limit.value <= 0:
                raise UsageError(f"{limit.flag} {limit.value:g}: a latency limit must be more than 0 ms")
        for limit in errors:
            if not 0.0 <= limit.value <= 1.0:
                raise UsageError(f"{limit.flag} {limit.value:g}: an error rate is a "
                                 "fraction between 0 and 1 (0.01 = 1%)")
        for limit in rps:
            if limit.value < 0:
                raise UsageError(f"{limit.flag} {limit.value:g}: a throughput minimum cannot be negative")
        if self.min_requests < 0:
            raise UsageError(f"--min-requests {self.min_requests}: cannot be negative")
        p99_by_scope = {limit.scope: limit.value for limit in p99}
        for limit in p95:
            if limit.scope in p99_by_scope and limit.value > p99_by_scope[limit.scope]:
                where = "" if limit.scope is None else f" for {limit.scope!r}"
                raise UsageError(f"--max-p95-ms {limit.value:g} is above --max-p99-ms "
                                 f"{p99_by_scope[limit.scope]:g}{where}: "
                                 "contradictory limits (p95 is never above p99)")
        gates: list[Gate] = []
        if self.min_requests:
            gates.append(MinRequests(self.min_requests))
        gates += [MaxLatency(95, limit.value, limit.scope) for limit in p95]
        gates += [MaxLatency(99, limit.value, limit.scope) for limit in p99]
        gates += [MaxErrorRate(limit.value, limit.scope) for limit in errors]
        gates += [MinRps(limit.value, limit.scope) for limit in rps]
        return gates


def _limits(flag: str, values: Iterable[str]) -> list[Limit]:
    limits = [parse_limit(flag, v) for v in values or ()]
    seen: set[str | None] = set()
    for limit in limits:
        if limit.scope in seen:
            where = "the whole run" if limit.scope is None else repr(limit.scope)
            raise UsageError(f"{flag} is given twice for {where}; give one limit per request name")
        seen.add(limit.scope)
    return limits
