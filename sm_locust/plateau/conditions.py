"""Stop conditions for a load search: small strategy objects that return a reason when they fire.

A search asks every condition after each step; a condition answers None (carry on) or a one-line
reason such as "p95 48 ms > SLO 40 ms" that ends up in the verdict and in summary.json. All are
optional and combine freely. Each has a `kind`, because the search treats them differently:

- `constraint`: a step that violates it is not acceptable (latency SLO, error rate). The plateau
  is never a violating step, and the adaptive search bisects below the first violation.
- `saturation`: throughput stopped growing (Triton model_analyzer's rule: the gain over the last
  `DEFAULT_GAIN_WINDOW` steps is under `DEFAULT_MIN_GAIN`).
- `limit`: a budget ran out (max users or rate, max duration, max invocations). The search stops
  and reports the best step so far; if throughput was still growing it says no plateau was reached.

Conditions look at a history of `StepMeasurement`s, oldest first; the saturation rule expects it
in increasing load (the searches pass it that way).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sm_locust.errors import UsageError
from sm_locust.measure.steady import MODE_RATE, MODE_USERS, MODES, StepMeasurement, parse_percentile, percentile_label
from sm_locust.measure.uncertainty import UNKNOWN, Interval
from sm_locust.plateau.significance import (
    ABOVE,
    BELOW,
    UNDECIDED,
    growth_interval,
    min_count,
    relative_half_width,
    side,
)
from sm_locust.util.formatting import latency, percent, with_interval

KIND_CONSTRAINT = "constraint"
KIND_SATURATION = "saturation"
KIND_LIMIT = "limit"

DEFAULT_MIN_GAIN = 0.05  # Triton model_analyzer THROUGHPUT_MINIMUM_GAIN
DEFAULT_GAIN_WINDOW = 4  # Triton model_analyzer THROUGHPUT_MINIMUM_CONSECUTIVE_PARAMETER_TRIES
DEFAULT_MAX_ERROR_RATE = 0.05
POINT_ONLY = "on its point only"  # a gain decided on its point: its interval straddled the threshold


class Condition:
    """Base stop condition: `check(history)` returns a reason string when it fires, else None."""

    kind = KIND_LIMIT

    def check(self, history: Sequence[StepMeasurement]) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}>"


class ThroughputGain(Condition):
    """Fires when the best goodput of the last `window - 1` steps beats every earlier step by < `min_gain`.

    Goodput (successful invocations/s), not completions: an endpoint that fails fast under load
    must not look like one that still grows. Comparing against the best earlier step (not only the
    one `window` steps back) keeps a noisy dip from looking like growth. Needs at least `window` steps.
    """

    kind = KIND_SATURATION

    def __init__(self, min_gain: float = DEFAULT_MIN_GAIN, window: int = DEFAULT_GAIN_WINDOW):
        if not 0.0 < min_gain < 10.0:
            raise UsageError(f"throughput gain threshold {min_gain!r} must be a fraction > 0, e.g. 0.05 for 5 %")
        if int(window) != window or window < 2:
            raise UsageError(f"throughput gain window {window!r} must be a whole number of steps >= 2")
        self.min_gain = float(min_gain)
        self.window = int(window)

    def _pair(self, history: Sequence[StepMeasurement]) -> tuple[StepMeasurement, StepMeasurement] | None:
        """(the best recent step, the best earlier one), or None with fewer than `window` steps."""
        if len(history) < self.window:
            return None
        cut = len(history) - (self.window - 1)
        return (max(history[cut:], key=lambda m: m.goodput_rps), max(history[:cut], key=lambda m: m.goodput_rps))

    def compared(self, history: Sequence[StepMeasurement]) -> tuple[StepMeasurement, StepMeasurement] | None:
        """The two steps the gain compares: (the best recent one, the best earlier one), or None."""
        return self._pair(history)

    def gain(self, history: Sequence[StepMeasurement]) -> float | None:
        pair = self._pair(history)
        if pair is None:
            return None
        recent, baseline = pair[0].goodput_rps, pair[1].goodput_rps
        if baseline <= 0:
            return None if recent <= 0 else float("inf")
        return recent / baseline - 1.0

    def gain_interval(self, history: Sequence[StepMeasurement]) -> Interval:
        """The gain's 95 % interval from the two steps' goodput intervals (unknown without them)."""
        pair = self._pair(history)
        if pair is None:
            return UNKNOWN
        recent, baseline = pair
        return growth_interval(recent.goodput_rps, recent.goodput_ci, baseline.goodput_rps, baseline.goodput_ci)

    def less_precise(self, history: Sequence[StepMeasurement]) -> StepMeasurement | None:
        """Of the two steps the gain compares, the one whose goodput is known worse (a longer
        measurement of it narrows the gain's interval most), or None without both intervals."""
        pair = self._pair(history)
        if pair is None:
            return None
        widths = [relative_half_width(m.goodput_rps, m.goodput_ci) for m in pair]
        if widths[0] is None or widths[1] is None:
            return None
        return pair[0] if widths[0] > widths[1] else pair[1]

    def straddles(self, history: Sequence[StepMeasurement]) -> bool:
        """The gain's interval is known and holds `min_gain`: the data cannot tell which side it is on."""
        interval = self.gain_interval(history)
        return interval.known and side(interval, self.min_gain) == UNDECIDED

    def undecided(self, history: Sequence[StepMeasurement], current: StepMeasurement | None = None) -> str | None:
        """Why the gain cannot be told from `min_gain` yet (its interval straddles it) while measuring
        `current` longer could still tell it (it is the less precise of the two compared), or None."""
        gain = self.gain(history)
        if gain is None or not self.straddles(history) or self.less_precise(history) is not current:
            return None
        interval = self.gain_interval(history)
        return f"throughput gain {self._gain_text(gain, interval)} straddles {percent(self.min_gain, 2, trim=True)}"

    @staticmethod
    def _gain_text(gain: float, interval: Interval) -> str:
        low, high = interval.low or 0.0, interval.high or 0.0
        return f"{gain * 100:+.1f} % [{low * 100:+.1f}, {high * 100:+.1f}]"

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        """Fires when the gain is under `min_gain`: its whole interval when known; an interval that still
        straddles it (the driver holds a step while measuring it longer could decide the gain) fires on
        its point, saying so (`POINT_ONLY`): the search then measures the less precise step again once,
        or its verdict says the decision was not supported. Its point when the steps have no interval."""
        gain = self.gain(history)
        if gain is None or gain >= self.min_gain:
            return None
        interval = self.gain_interval(history)
        reason = f"throughput gain < {percent(self.min_gain, 2, trim=True)} over {self.window} steps"
        if not interval.known:
            return reason
        if side(interval, self.min_gain) == BELOW:
            return f"{reason} ({self._gain_text(gain, interval)})"
        return f"{reason} {POINT_ONLY} ({self._gain_text(gain, interval)}: its interval straddles it)"

    def describe(self) -> str:
        return f"stop when throughput gains < {percent(self.min_gain, 2, trim=True)} over {self.window} steps"


class LatencySLO(Condition):
    """Fires when the latest step's percentile latency exceeds `max_ms` (any percentile in (0, 100))."""

    kind = KIND_CONSTRAINT

    def __init__(self, percentile: float | str, max_ms: float):
        self.percentile = parse_percentile(percentile)
        try:
            self.max_ms = float(max_ms)
        except (TypeError, ValueError):
            raise UsageError(f"latency SLO {max_ms!r} is not a number of milliseconds") from None
        if not self.max_ms > 0:
            raise UsageError(f"latency SLO {max_ms!r} ms must be > 0")

    @property
    def label(self) -> str:
        return percentile_label(self.percentile)

    def value(self, step: StepMeasurement) -> float | None:
        """The latency this SLO holds against `max_ms` (the token SLO reads TTFT or ITL instead)."""
        return step.percentile(self.percentile)

    def interval(self, step: StepMeasurement) -> Interval:
        """The 95 % interval of `value` over the step's window (unknown without its samples)."""
        return step.percentile_interval(self.percentile)

    def count(self, step: StepMeasurement) -> int:
        """How many samples the percentile comes from (requests; answers or token gaps for tokens)."""
        return step.requests

    def _text(self, step: StepMeasurement) -> str:
        return f"{self.label} {with_interval(self.value(step), self.interval(step), ' ms')}"

    def violation(self, step: StepMeasurement) -> str | None:
        """A breach only when the percentile's interval lies wholly above the SLO (its point when the
        step has no interval)."""
        value = self.value(step)
        if value is None or value <= self.max_ms:
            return None
        interval = self.interval(step)
        if interval.known and side(interval, self.max_ms) != ABOVE:
            return None
        return f"{self._text(step)} > SLO {latency(self.max_ms, ' ms')}"

    def undecided(self, step: StepMeasurement) -> str | None:
        """Why the step cannot be said to meet or break the SLO yet, or None: too few samples for the
        percentile (`significance.min_count`), or its interval straddles the SLO."""
        value = self.value(step)
        if value is None:
            return None
        count, needed = self.count(step), min_count(self.percentile)
        if count < needed:
            return f"{self.label} {latency(value, ' ms')} from {count} samples (needs {needed})"
        interval = self.interval(step)
        if interval.known and side(interval, self.max_ms) == UNDECIDED:
            return f"{self._text(step)} straddles SLO {latency(self.max_ms, ' ms')}"
        return None

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        return self.violation(history[-1]) if history else None

    def describe(self) -> str:
        return f"{self.label} <= {latency(self.max_ms, ' ms')}"


class ErrorRate(Condition):
    """Fires when the latest step's failures / requests exceed `max_rate` (a fraction)."""

    kind = KIND_CONSTRAINT

    def __init__(self, max_rate: float = DEFAULT_MAX_ERROR_RATE):
        if not 0.0 <= max_rate < 1.0:
            raise UsageError(f"error-rate threshold {max_rate!r} must be a fraction in [0, 1), e.g. 0.05 for 5 %")
        self.max_rate = float(max_rate)

    def violation(self, step: StepMeasurement) -> str | None:
        if step.requests and step.error_rate > self.max_rate:
            return f"error rate {percent(step.error_rate, 2, trim=True)} > {percent(self.max_rate, 2, trim=True)}"
        return None

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        return self.violation(history[-1]) if history else None

    def describe(self) -> str:
        return f"error rate <= {percent(self.max_rate, 2, trim=True)}"


class MaxLoad(Condition):
    """Fires once a step ran at (or above) the maximum users, or maximum target rate in open loop."""

    kind = KIND_LIMIT

    def __init__(self, max_load: float, mode: str = MODE_USERS):
        if mode not in MODES:
            raise UsageError(f"unknown load mode {mode!r}; choose one of: {', '.join(MODES)}")
        if not max_load > 0:
            raise UsageError(f"maximum {'users' if mode == MODE_USERS else 'rate'} {max_load!r} must be > 0")
        self.max_load = float(max_load)
        self.mode = mode

    def _label(self) -> str:
        return f"max users {self.max_load:g}" if self.mode == MODE_USERS else f"max rate {self.max_load:g} req/s"

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        if history and history[-1].load >= self.max_load - 1e-9:
            return f"reached {self._label()}"
        return None

    def describe(self) -> str:
        return self._label()


def MaxUsers(max_users: int) -> MaxLoad:  # noqa: N802 - reads as a condition class at call sites
    return MaxLoad(max_users, MODE_USERS)


def MaxRate(max_rate: float) -> MaxLoad:  # noqa: N802
    return MaxLoad(max_rate, MODE_RATE)


class MaxDuration(Condition):
    """Fires once the steps so far span `seconds` of wall time (first step start to last step end)."""

    kind = KIND_LIMIT

    def __init__(self, seconds: float):
        if not seconds > 0:
            raise UsageError(f"maximum duration {seconds!r} s must be > 0")
        self.seconds = float(seconds)

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        if history and history[-1].t_end - history[0].t_start >= self.seconds - 1e-9:
            return f"max duration {self.seconds:g} s reached"
        return None

    def describe(self) -> str:
        return f"max duration {self.seconds:g} s"


class MaxInvocations(Condition):
    """Fires once all steps together sent `count` requests (a total budget, warm-up included)."""

    kind = KIND_LIMIT

    def __init__(self, count: int):
        if int(count) != count or count <= 0:
            raise UsageError(f"maximum invocations {count!r} must be a whole number > 0")
        self.count = int(count)

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        sent = sum(m.total_requests for m in history)
        if sent >= self.count:
            return f"max invocations {self.count} reached ({sent} requests)"
        return None

    def describe(self) -> str:
        return f"max invocations {self.count}"


class MaxInvocationsPerMinute(Condition):
    """Inference Recommender's `MaxInvocations`: the expected peak, in requests per MINUTE.

    IR documents MaxInvocations as "the maximum number of requests per minute expected for the
    endpoint", not a total: once a step sustains that rate the endpoint is known to carry the
    expected traffic and the test can stop.
    """

    kind = KIND_LIMIT

    def __init__(self, per_minute: int):
        if int(per_minute) != per_minute or per_minute <= 0:
            raise UsageError(f"MaxInvocations {per_minute!r} must be a whole number of requests per minute > 0")
        self.per_minute = int(per_minute)

    def check(self, history: Sequence[StepMeasurement]) -> str | None:
        if history and history[-1].rps * 60.0 >= self.per_minute:
            return f"invocations {history[-1].rps * 60:.0f}/min >= MaxInvocations {self.per_minute}/min"
        return None

    def describe(self) -> str:
        return f"MaxInvocations {self.per_minute}/min"


@dataclass(frozen=True)
class Fired:
    """A condition that fired, with its reason."""

    condition: Condition
    reason: str

    @property
    def kind(self) -> str:
        return self.condition.kind


def check_all(conditions: Iterable[Condition], history: Sequence[StepMeasurement]) -> list[Fired]:
    """Every condition that fires on `history`, in the order given."""
    fired = []
    for condition in conditions:
        reason = condition.check(history)
        if reason:
            fired.append(Fired(condition, reason))
    return fired


def latency_slos(conditions: Iterable[Condition]) -> tuple[tuple[float, float], ...]:
    """The (percentile, max ms) of every latency SLO among `conditions`."""
    return tuple((c.percentile, c.max_ms) for c in conditions if isinstance(c, LatencySLO))


def constraint_undecided(conditions: Iterable[Condition], step: StepMeasurement) -> str | None:
    """The first latency SLO this step can neither be said to meet nor to break yet, or None."""
    for condition in conditions:
        if isinstance(condition, LatencySLO):
            reason = condition.undecided(step)
            if reason:
                return reason
    return None


def constraint_violation(conditions: Iterable[Condition], step: StepMeasurement) -> str | None:
    """The first constraint (SLO, error rate) this one step violates, or None."""
    for condition in conditions:
        if condition.kind == KIND_CONSTRAINT:
            reason = condition.check([step])
            if reason:
                return reason
    return None
