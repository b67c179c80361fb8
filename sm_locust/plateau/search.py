"""Which load to run next, and when to stop: the plateau searches as pure objects fed one step at a time.

A shape asks `first()`, runs the load, hands the measured step to `feed()` and gets the next
`Decision`; `verdict()` names the plateau. `StepSearch` steps linearly, `ScheduleSearch` judges
levels chosen from outside (a traffic pattern), `PlateauSearch` doubles until saturation, places the
knee by Little's law (`model.py`) and confirms it, bisecting only when contradicted. Throughput is
goodput; the plateau is the lowest acceptable load within `PLATEAU_TOLERANCE` of the best acceptable
goodput, acceptable meaning no constraint violated and not client-bound; a client-bound step is measured
once more (the load generator's stall may pass), then stops the search; it is never the plateau
(docs/plateau.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.measure.looplag import FIX_WORKERS, bottleneck_reason, generator_fix
from sm_locust.measure.steady import MODE_RATE, MODE_USERS, MODES, STABILITY_TOLERANCE, StepMeasurement
from sm_locust.measure.uncertainty import UNKNOWN
from sm_locust.plateau.conditions import (
    KIND_CONSTRAINT,
    KIND_LIMIT,
    POINT_ONLY,
    Condition,
    ErrorRate,
    LatencySLO,
    MaxLoad,
    ThroughputGain,
    check_all,
    constraint_undecided,
    constraint_violation,
    latency_slos,
)
from sm_locust.plateau.model import ClosedLoopModel, cycle_time_s
from sm_locust.plateau.significance import BELOW, Support, growth_interval, precise, side
from sm_locust.util.formatting import latency, number, with_interval

PLATEAU_TOLERANCE = 0.05  # the plateau step is within 5 % of the best acceptable throughput
GROWTH_FACTOR = 2.0  # PlateauSearch doubles the load while throughput keeps growing
GEOMETRIC_GAIN_WINDOW = 2  # one doubling that gains < 5 % is as telling as 3 flat linear steps
REFINE_TOLERANCE = 0.05  # the knee's resolution: 5 % of its load (users: to the nearest whole user) ...
LOAD_GRANULARITY = 1.0  # ... and never finer than 1 user / 1 req/s
MAX_REFINE_STEPS = 12  # safety net: bisection of any sane range ends well before this
MAX_EXTENSIONS = 1  # an unstable step is re-run once at the same load, then kept as "unstable"
MODEL_TARGET = 1.0 - PLATEAU_TOLERANCE  # the model's knee: the fewest users it says reach the plateau
MAX_MODEL_PROBES = 3  # loads placed by the model before the search falls back on bisection
MODEL_MARGIN = 0.15  # a model-placed step reading this far under the model's figure contradicts it
MAX_REMEASURES = 1  # a step that contradicts Little's law beyond its interval is measured once more
MAX_CLIENT_REMEASURES = 1  # a client-bound step is measured once more (the generator's stall may pass)
DEFER_QUEUE = 1.5  # a growth step whose cycle is under this x the unqueued one is not held for its own precision
MAX_GAIN_SPLITS = 2  # loads measured between two steps whose growth still straddles the threshold

# why a step measures a load already measured once more (summary.json's steps[].measured_again)
AGAIN_CLIENT_BOUND, AGAIN_UNSTABLE, AGAIN_CONTRADICTED, AGAIN_GAIN = "client-bound", "unstable", "contradicted", "gain"
AGAIN_IMPRECISE = "imprecise"  # a growth step not held for its own precision turned out to be one the verdict rests on

IMPRECISE = "goodput "  # how a step's own precision reason starts (Search.undecided)
GAIN_OPEN = "throughput gain "  # how an undecided growth's reason starts (ThroughputGain.undecided)
UNDECIDED_PREFIX = "undecided: "  # a constraint a step can neither be said to meet nor to break

BOUND_THROUGHPUT = "throughput"
BOUND_LATENCY = "latency"
BOUND_ERRORS = "errors"
BOUND_LIMIT = "limit"
BOUND_CLIENT = "client"
BOUND_NONE = "none"
BOUND_BELOW = "below-lowest-load"  # the lowest load measured surely broke a constraint: the capacity is below it


@dataclass(frozen=True)
class Decision:
    """The search's answer after a step: run `load` next, or stop (`load` is None) and why."""

    load: float | None
    reason: str
    mode: str = MODE_USERS
    extend: bool = False  # the same load again: the last step was unstable

    @property
    def stop(self) -> bool:
        return self.load is None

    @property
    def users(self) -> int | None:
        """Closed loop: the user count to run (None when stopping or in open loop)."""
        return int(round(self.load)) if self.load is not None and self.mode == MODE_USERS else None

    @property
    def rate(self) -> float | None:
        """Open loop: the target req/s to offer (None when stopping or in closed loop)."""
        return self.load if self.load is not None and self.mode == MODE_RATE else None


@dataclass
class Verdict:
    """Where the plateau is, how sure we are, and why the search stopped."""

    plateau: StepMeasurement | None
    reached: bool
    bound: str
    reason: str
    stop_reason: str
    client_bound: bool = False
    client_reason: str | None = None
    mode: str = MODE_USERS
    steps: list[StepMeasurement] = field(default_factory=list)
    capacity: StepMeasurement | None = None  # the best stable goodput at or beyond the knee
    model_knee: float | None = None  # closed loop: Little's law knee (capacity x unqueued cycle), users
    undecided: list[str] = field(default_factory=list)  # decisions the measurement could not support, with why
    knee_loads: tuple[float, float] | None = None  # the knee's interval in loads, against the capacity's interval
    client_fix: str = FIX_WORKERS  # what to do about the load generator when it was the bottleneck
    knee_granule: float = LOAD_GRANULARITY  # the search's resolution at the knee (knee_uncertain)
    knee_undecided: list[str] = field(default_factory=list)  # left open, placing only the knee within knee_loads

    @property
    def knee_uncertain(self) -> str | None:
        """'uncertain: 5 to 16 users' when a load more than the search's resolution at the knee
        (`knee_granule`) below it may be the knee too (`knee_loads`' low end: measured, or not measured
        and within Little's law's reach): another run may place the knee anywhere from there. None
        otherwise. (The high end, the least load measured surely on the plateau, is often a growth
        step far above a knee whose own interval straddles the 95 % line: it says how precise the knee
        step is, not where another run would put the knee.)"""
        if self.knee_loads is None or self.plateau is None \
                or self.plateau.load - self.knee_loads[0] <= self.knee_granule + 1e-9:
            return None
        low, high = self.knee_loads[0], self.plateau.load
        unit = "users" if self.mode == MODE_USERS else "req/s"
        return f"uncertain: {low:g} to {high:g} {unit}"

    @property
    def knee_open(self) -> str | None:
        """'uncertain: 4 to 5 users, the knee only: 5 users still undecided at its step budget: ...' when a
        decision the step budget left open (`knee_undecided`) places only the knee, within its interval in
        loads (`knee_loads`, at most the search's resolution at the knee wide): the capacity and the
        constraints stand, and the verdict is not INCONCLUSIVE for it. None otherwise."""
        if not self.knee_undecided or self.knee_loads is None:
            return None
        low, high = self.knee_loads
        unit = "users" if self.mode == MODE_USERS else "req/s"
        where = f"{low:g} to {high:g} {unit}" if high > low else f"{low:g} {unit}"
        return f"uncertain: {where}, the knee only: {'; '.join(self.knee_undecided)}"

    @property
    def capacity_rps(self) -> float | None:
        return self.capacity.goodput_rps if self.capacity else None

    @property
    def inconclusive_reason(self) -> str | None:
        """Why the answer cannot be trusted, or None: the load generator, not the endpoint, was the
        bottleneck at a step that decides it (the search stopped there, or the capacity or knee step
        itself was measured client-bound), or a decision the answer rests on was not supported by the
        measurement (`undecided`: a figure's interval still straddled its line at the step budget, the
        capacity known to worse than the tolerance, a step that contradicted Little's law twice).
        Never a pass or fail of the endpoint."""
        if self.client_bound:
            return bottleneck_reason(self.client_reason or "", self.client_fix)
        for what, step in (("capacity", self.capacity), ("knee", self.plateau)):
            if step is not None and step.client_bound:
                return f"the {what} step ({step.load_label()}) was client-bound: {step.client_bound_reason}"
        if self.undecided:
            return "; ".join(self.undecided)
        return None

    @property
    def inconclusive(self) -> bool:
        return self.inconclusive_reason is not None

    def text(self, steps: Sequence[StepMeasurement] | None = None) -> str:
        """One line for the console and the report. Each step it quotes is named (`step N`, its
        place in `steps`: summary.json's list, the search's own steps by default) with that step's
        own rate, load and percentile; the capacity carries its 95 % interval."""
        listed = list(self.steps if steps is None else steps)
        best = self._describe(self.plateau, listed) if self.plateau else None
        if self.client_bound:
            tail = f"; best endpoint-bound {best}" if best else ""
            return f"INCONCLUSIVE: {bottleneck_reason(self.client_reason or '', self.client_fix)}{tail}"
        prefix = f"INCONCLUSIVE ({self.inconclusive_reason}): " if self.inconclusive else ""
        if best is None:
            return f"{prefix}no acceptable step: {self.reason}"
        falling = self.falling(listed)
        tail = f"; WARNING: {falling}" if falling else ""
        if self.reached:
            return f"{prefix}plateau: {self._reached(best, listed)} \u2014 {self.reason}{tail}"
        return f"{prefix}no plateau reached ({self.reason}): best {best}{tail}"

    def falling(self, steps: Sequence[StepMeasurement] = ()) -> str | None:
        """'throughput falls as load grows: ...' when a step at more load than the capacity (else the
        knee) served less goodput, their 95 % intervals apart (without intervals: under 90 % of it);
        None otherwise. More load made the endpoint slower: contention, not a plateau."""
        peak = self.capacity or self.plateau
        if peak is None:
            return None
        listed = list(steps) or list(self.steps)
        peak_ci = peak.ci95.get("goodput_rps")
        for step in sorted((s for s in self.steps if s.load > peak.load and not s.client_bound),
                           key=lambda s: -s.load):
            ci = step.ci95.get("goodput_rps")
            if peak_ci is not None and ci is not None and peak_ci.known and ci.known:
                below = ci.high < peak_ci.low  # type: ignore[operator]
            else:
                below = step.goodput_rps < (1.0 - STABILITY_TOLERANCE) * peak.goodput_rps
            if below:
                return (f"throughput falls as load grows: {number(peak.goodput_rps, 1)} req/s at "
                        f"{step_name(peak, listed)}{peak.load_label()}, {number(step.goodput_rps, 1)} req/s at "
                        f"{step_name(step, listed)}{step.load_label()} (more load served less: contention, "
                        "not a plateau; size for the lower load)")
        return None

    def _describe(self, step: StepMeasurement, steps: Sequence[StepMeasurement] = ()) -> str:
        """One step in the verdict's line (the token search words it in tokens)."""
        return step_name(step, steps) + _describe_step(step)

    def _reached(self, best: str, steps: Sequence[StepMeasurement] = ()) -> str:
        """What a reached plateau's line says before its reason: the capacity (its step, its interval,
        its own load and percentile), then the knee."""
        capacity = self.capacity
        uncertain = self.knee_uncertain or self.knee_open
        if uncertain is not None:
            best += f" ({uncertain})"
        if capacity is None:
            return f"knee {best}"
        figure = with_interval(capacity.goodput_rps, capacity.ci95["goodput_rps"], " req/s")
        where = f"{step_name(capacity, steps)}{capacity.load_label()}"
        if capacity.p95_ms is not None:
            where += f", p95 {latency(capacity.p95_ms, ' ms')}"
        return f"capacity {figure} at {where}; knee {best}"

    def as_dict(self, steps: Sequence[StepMeasurement] | None = None) -> dict:
        """The `plateau` object of summary.json. `steps`: the step records summary.json lists (the
        shape's measurements; the search's own steps by default): `capacity_step` and `knee_step`
        index them."""
        step = self.plateau
        capacity = self.capacity
        listed = list(self.steps if steps is None else steps)
        return {
            "capacity_rps": round(capacity.goodput_rps, 3) if capacity else None,
            "capacity_ci95": capacity.ci95["goodput_rps"].as_list() if capacity else None,
            "capacity_step": _index_of(capacity, listed),
            "knee_step": _index_of(step, listed),
            "inconclusive": self.inconclusive,
            "inconclusive_reason": self.inconclusive_reason,
            "capacity_load": capacity.load if capacity else None,
            "capacity_stable": capacity.stable if capacity else None,
            "users": step.users if step else None,
            "rps": round(step.rps, 3) if step else None,
            "goodput_rps": round(step.goodput_rps, 3) if step else None,
            "p50_ms": step.p50_ms if step else None,
            "p95_ms": step.p95_ms if step else None,
            "p99_ms": step.p99_ms if step else None,
            "reason": self.reason,
            "stable": step.stable if step else None,
            "reached": self.reached,
            "bound": self.bound,
            "client_bound": self.client_bound,
            "client_reason": self.client_reason,
            "stop_reason": self.stop_reason,
            "mode": self.mode,
            "load": step.load if step else None,
            "rate": step.intended_rps if step else None,
            "error_rate": round(step.error_rate, 6) if step else None,
            "model_knee_users": round(self.model_knee, 2) if self.model_knee is not None else None,
            "steps": len(self.steps),
            "text": self.text(listed),
            **self.support().to_json(),
        }

    def support(self) -> Support:
        """How far the measurement supports this verdict (summary.json `plateau`: knee_ci95, knee_loads,
        undecided, knee_undecided, knee_granule)."""
        knee = self.plateau.ci95["goodput_rps"] if self.plateau is not None else UNKNOWN
        return Support(knee, self.knee_loads, tuple(self.undecided), tuple(self.knee_undecided),
                       self.knee_granule if self.plateau is not None else None)


def step_name(step: StepMeasurement, steps: Sequence[StepMeasurement]) -> str:
    """'step 5: ' when `step` is listed in `steps` (1-based, as every surface numbers steps), else ''."""
    index = _index_of(step, steps)
    return "" if index is None else f"step {index + 1}: "


def _index_of(step: StepMeasurement | None, steps: Sequence[StepMeasurement]) -> int | None:
    """The position of this very measurement (not an equal one) in `steps`, or None."""
    return next((i for i, listed in enumerate(steps) if listed is step), None) if step is not None else None


def _describe_step(step: StepMeasurement) -> str:
    text = f"{step.goodput_rps:.0f} req/s at {step.load_label()}"
    if step.p95_ms is not None:
        text += f", p95 {latency(step.p95_ms, ' ms')}"
    if not step.stable:
        text += " (unstable)"
    return text


class Search:
    """The base of the step, plateau and schedule searches (what a driver runs). What they share:
    bookkeeping, constraints, client-bound rule, limits, the verdict."""

    default_gain_window = 4

    def __init__(
        self,
        *,
        mode: str,
        max_load: float,
        conditions: Iterable[Condition] | None,
        extend_unstable: bool,
    ):
        if mode not in MODES:
            raise UsageError(f"unknown load mode {mode!r}; choose one of: {', '.join(MODES)}")
        self.mode = mode
        self.max_load = self._check_load(max_load, "maximum")
        conditions = list(conditions or [])
        gains = [c for c in conditions if isinstance(c, ThroughputGain)]
        self.gain = gains[0] if gains else ThroughputGain(window=self.default_gain_window)
        self.conditions = [c for c in conditions if not isinstance(c, ThroughputGain)]
        self.extend_unstable = extend_unstable
        self.steps: list[StepMeasurement] = []  # every step fed, in time order
        self._by_load: dict[float, StepMeasurement] = {}  # latest measurement per load
        self._extensions: dict[float, int] = {}
        self._pending: float | None = None
        self._again: str | None = None  # why the pending load is measured once more
        self._stop: Decision | None = None
        self._stop_kind: str | None = None
        self._client: str | None = None
        self._remeasured: dict[float, int] = {}
        self._imprecise_remeasured: dict[float, int] = {}  # steps not held for their goodput, measured again for it
        self._client_remeasured: dict[float, int] = {}
        self._gain_splits = 0
        self._grown_to_decide = False  # one step above the highest load measured to decide a straddling growth
        self._client_fix = FIX_WORKERS
        self.granule = LOAD_GRANULARITY  # the load resolution the knee is placed to (StepSearch: its step)
        self._model_loads: set[float] = set()  # loads the closed-loop model placed (PlateauSearch)
        self._contradicted: list[str] = []  # each step read under the model twice: what it read, against what

    # -- helpers ---------------------------------------------------------------------------------
    def _resolution(self, load: float) -> float:
        """How finely the search places a knee near `load` (PlateauSearch: also its tolerance)."""
        return self.granule

    def _check_load(self, value: float, what: str) -> float:
        try:
            load = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{what} load {value!r} is not a number") from None
        if not load > 0 or math.isinf(load):
            raise UsageError(f"{what} {'users' if self.mode == MODE_USERS else 'rate'} {value!r} must be > 0")
        if self.mode == MODE_USERS and load != int(load):
            raise UsageError(f"{what} users {value!r} must be a whole number")
        return load

    def _run(self, load: float, reason: str, again: str | None = None) -> Decision:
        """Run `load` next; `again`: why it is a load already measured, run once more (AGAIN_*), or None."""
        self._pending = load
        self._again = again
        return Decision(load, reason, self.mode, again is not None)

    def _halt(self, reason: str, kind: str) -> Decision:
        self._pending = None
        self._stop = Decision(None, reason, self.mode)
        self._stop_kind = kind
        return self._stop

    def _violation(self, step: StepMeasurement) -> str | None:
        """The constraint the step breaks, or one it cannot be said to meet (an undecided SLO: such a
        step is not acceptable, and bounds the plateau like a breach, saying so, unless a higher load
        surely meets every constraint: latency grows with load)."""
        violation = constraint_violation(self.conditions, step)
        if violation:
            return violation
        undecided = constraint_undecided(self.conditions, step)
        if undecided is None:
            return None
        # latency grows with load: a higher load that surely meets every constraint vouches for this one
        if any(m.load > step.load and not m.client_bound and constraint_violation(self.conditions, m) is None
               and constraint_undecided(self.conditions, m) is None for m in self._by_load.values()):
            return None
        return f"{UNDECIDED_PREFIX}{undecided}"

    def _blocking(self, step: StepMeasurement) -> str | None:
        """What stops growth at this step: a breach, not an undecided constraint (the next load decides
        it: a breach there bounds the plateau below, a pass there vouches for this step)."""
        violation = self._violation(step)
        return None if violation is None or violation.startswith(UNDECIDED_PREFIX) else violation

    def undecided(self, step: StepMeasurement) -> list[str]:
        """What this step's figures cannot decide yet (sequential measurement: the driver holds the step
        while the list is not empty, up to its budget): its goodput known to worse than
        +-`PLATEAU_TOLERANCE`; a latency SLO it can neither be said to meet nor to break, unless the
        step surely gained nothing over the acceptable load below it (`_flat`: saturated, it bounds the
        plateau either way); whether throughput stopped growing (the gain over the best earlier step
        straddles the threshold).
        Judged only on a step measured with its window (none can be said of a bare figure)."""
        if not step.window or step.client_bound:
            return []
        reasons = []
        if not precise(step.goodput_rps, step.goodput_ci, PLATEAU_TOLERANCE) and not self._surely_growing(step):
            reasons.append(f"{IMPRECISE}{self._figure(step)} not known to +-{PLATEAU_TOLERANCE * 100:g} %")
        slo = constraint_undecided(self.conditions, step)
        lower = [m for m in self._acceptable() if m.load < step.load]
        if slo and not (lower and self._flat(max(lower, key=lambda m: m.load), step)):
            reasons.append(slo)  # (past saturation its side moves neither the knee nor the capacity)
        if constraint_violation(self.conditions, step) is None and slo is None:
            history = sorted([m for m in self._acceptable() if m.load != step.load] + [step], key=lambda m: m.load)
            gain = self.gain.undecided(history, step)
            if gain:
                reasons.append(gain)
        return reasons

    def _surely_growing(self, step: StepMeasurement) -> bool:
        """The step's own goodput decides nothing yet, so it is not held for it (PlateauSearch: growing,
        and it surely grew past the gain threshold). Should the verdict come to rest on it, it is measured
        again (`_remeasure_imprecise`). The step and schedule searches hold every step for it."""
        return False

    def _flat(self, lower: StepMeasurement, higher: StepMeasurement) -> bool:
        """Closed loop: `higher` surely gained less than the gain threshold over `lower` (the growth's
        whole interval below it; on its point when the steps carry no interval): the endpoint was
        saturated at `lower` already, so a constraint that breaks between them bounds latency only."""
        if self.mode != MODE_USERS or not lower.goodput_rps > 0:
            return False
        growth = growth_interval(higher.goodput_rps, higher.goodput_ci, lower.goodput_rps, lower.goodput_ci)
        if growth.high is not None:
            return growth.high < self.gain.min_gain
        return higher.goodput_rps / lower.goodput_rps - 1.0 < self.gain.min_gain

    figure_unit = "req/s"  # what `goodput_rps` counts in this search's sentences
    model_contradicts = True  # a model-placed step far under the closed-loop model's figure contradicts it

    @staticmethod
    def _figure(step: StepMeasurement) -> str:
        return with_interval(step.goodput_rps, step.goodput_ci, "", 1)

    def _contradiction(self, step: StepMeasurement) -> str | None:
        """Closed loop: a step whose goodput interval lies wholly below what the measured steps imply,
        beyond a margin (a stall, a busy neighbour, a noisy plateau), or None. Two bounds: fewer users
        cannot lose more than their share of a larger step's throughput, less the tolerance (Little's
        law: a user's cycle only lengthens with load, so X(n) >= X(m) x n / m for n < m); and, where
        `model_contradicts`, a load the model placed cannot read more than `MODEL_MARGIN` under the
        model's own prediction (a knee that bends early loses less)."""
        high = step.goodput_ci.high
        if self.mode != MODE_USERS or high is None:
            return None
        for other in self._acceptable():
            low = other.goodput_ci.low
            if other is step or other.load <= step.load or low is None:
                continue
            bound = low * step.load / other.load * (1.0 - PLATEAU_TOLERANCE)
            if high < bound:
                return (f"{step.load_label()} read {self._figure(step)} {self.figure_unit}, its 95 % interval "
                        f"{(1 - high / bound) * 100:.0f} % under the {bound:.1f} that the {other.load_label()} "
                        f"step's {self._figure(other)} imply by Little's law")
        if self.model_contradicts and step.load in self._model_loads:
            model = ClosedLoopModel.from_steps(self._acceptable(), self.level_of(self._acceptable()) or 0.0)
            if model is not None and high < (1.0 - MODEL_MARGIN) * model.predict(step.load):
                return (f"{step.load_label()} read {self._figure(step)} {self.figure_unit}, its 95 % interval "
                        f"{(1 - high / model.predict(step.load)) * 100:.0f} % under the "
                        f"{model.predict(step.load):.1f} the model predicts there (> {MODEL_MARGIN * 100:g} %)")
        return None

    def _acceptable(self) -> list[StepMeasurement]:
        steps = [m for m in self._by_load.values()
                 if not m.client_bound and not m.failure_dominated and self._violation(m) is None]
        return sorted(steps, key=lambda m: m.load)

    def _violating(self) -> list[StepMeasurement]:
        steps = [m for m in self._by_load.values() if not m.client_bound and self._violation(m) is not None]
        return sorted(steps, key=lambda m: m.load)

    def _saturation(self) -> str | None:
        return self.gain.check(self._acceptable())

    @staticmethod
    def served_ratio(step: StepMeasurement) -> float | None:
        """Open loop: goodput / offered rate (None in closed loop)."""
        return step.goodput_rps / step.intended_rps if step.intended_rps else None

    def _is_served(self, step: StepMeasurement) -> bool:
        ratio = self.served_ratio(step)
        return ratio is not None and ratio >= 1.0 - PLATEAU_TOLERANCE

    def _served(self) -> list[StepMeasurement]:
        """Open loop: acceptable steps whose offered rate was (nearly) all completed successfully."""
        return [m for m in self._acceptable() if self._is_served(m)]

    def _unserved_above(self, plateau: StepMeasurement | None) -> str | None:
        """Open loop: why the offered rate above the plateau was not served, if one was tried."""
        if self.mode != MODE_RATE or plateau is None:
            return None
        above = [m for m in self._acceptable() if m.load > plateau.load and self.served_ratio(m) is not None
                 and not self._is_served(m)]
        if not above:
            return None
        m = above[0]
        served = self.served_ratio(m) or 0.0  # not None: `above` keeps only steps with a ratio
        return f"{m.load_label()} not served: {m.goodput_rps:.0f} req/s completed ({served * 100:.0f} %)"

    def _plateau(self) -> StepMeasurement | None:
        """Closed loop: `plateau_of` the acceptable steps. Open loop: the highest offered rate the
        endpoint still served (completed >= 95 % of it): past it completions stop following the offer
        and the queue, hence latency, grows without bound."""
        if self.mode == MODE_RATE:
            served = self._served()
            if served:
                return max(served, key=lambda m: m.load)
        return self.plateau_of(self._acceptable())

    @staticmethod
    def level_of(steps: Sequence[StepMeasurement]) -> float | None:
        """The plateau level: the median goodput of the steps within PLATEAU_TOLERANCE of the best one."""
        if not steps:
            return None
        best = max(m.goodput_rps for m in steps)
        return statistics.median(m.goodput_rps for m in steps if m.goodput_rps >= (1.0 - PLATEAU_TOLERANCE) * best)

    @classmethod
    def plateau_of(cls, steps: Sequence[StepMeasurement]) -> StepMeasurement | None:
        """The knee: the lowest-load stable step whose goodput is within PLATEAU_TOLERANCE of the
        plateau level (the lowest-load such step when none of them is stable).

        The level is the median goodput of the steps within PLATEAU_TOLERANCE of the best one, not
        the best one alone: on a noisy plateau the single best step is an outlier, and measuring
        against it would push the plateau to a needlessly high load. An unstable step (its
        sub-windows disagree) does not place the knee while a stable one can: its rate is noise, and
        every surface quotes the knee this returns (summary.json `knee_step`).
        """
        level = cls.level_of(steps)
        if level is None:
            return None
        floor = (1.0 - PLATEAU_TOLERANCE) * level
        on = [m for m in steps if m.goodput_rps >= floor]
        return min([m for m in on if m.stable] or on, key=lambda m: m.load)

    def _capacity(self, plateau: StepMeasurement | None) -> StepMeasurement | None:
        """The best stable goodput at or beyond the knee (any such step when none was stable).

        The knee is the least load that already gets (nearly) all the throughput; the capacity is
        what the endpoint sustains once saturated, measured beyond the knee where it is not
        diluted by users that still wait on the client side.
        """
        if plateau is None:
            return None
        beyond = [m for m in self._acceptable() if m.load >= plateau.load]
        stable = [m for m in beyond if m.stable]
        return max(stable or beyond, key=lambda m: m.goodput_rps)

    def _model_knee(self, capacity: StepMeasurement | None) -> float | None:
        if self.mode != MODE_USERS or capacity is None:
            return None
        model = ClosedLoopModel.from_steps(self._acceptable(), capacity.goodput_rps)
        return model.knee if model else None

    # -- the protocol ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._stop is not None

    def first(self) -> Decision:  # pragma: no cover - each search defines it
        raise NotImplementedError

    def _next(self, step: StepMeasurement) -> Decision:  # pragma: no cover
        raise NotImplementedError

    def feed(self, step: StepMeasurement) -> Decision:
        """Record the step just run (at the load last decided) and decide what comes next."""
        if self._stop is not None:
            return self._stop
        if self._pending is None:
            raise UsageError("feed() called before first(): ask the search for a load first")
        if step.mode != self.mode:
            raise UsageError(f"a {step.mode!r} step was fed to a search stepping {self.mode!r}")
        load = self._pending
        step.load = load
        step.measured_again = self._again
        self.steps.append(step)
        self._by_load[load] = step
        step.latency_slos = latency_slos(self.conditions)  # a breach within the client's loop lag is client-bound
        if step.failure_dominated:  # the failures are the answer: no further load is worth sending
            return self._halt(f"{step.failure_reason()} at {step.load_label()}", KIND_CONSTRAINT)
        if step.client_bound:
            if self.remeasures_client and self._client_remeasured.get(load, 0) < MAX_CLIENT_REMEASURES:
                self._client_remeasured[load] = self._client_remeasured.get(load, 0) + 1
                return self._run(load, f"{step.load_label()} client-bound ({step.client_bound_reason}): measuring it "
                                       "again (the load generator's stall may be transient)", AGAIN_CLIENT_BOUND)
            twice = " (measured twice)" if self._client_remeasured.get(load, 0) else ""
            self._client = f"{step.client_bound_reason} at {step.load_label()}{twice}"
            self._client_fix = generator_fix(step.loop_lag)
            return self._halt(self._client, "client")
        if not step.stable and self.extend_unstable and self._extensions.get(load, 0) < MAX_EXTENSIONS:
            self._extensions[load] = self._extensions.get(load, 0) + 1
            return self._run(load, f"step at {step.load_label()} unstable ({step.unstable_reason}): extending",
                             AGAIN_UNSTABLE)
        contradiction = self._contradiction(step) if self._violation(step) is None else None
        if contradiction is not None:
            if self._remeasured.get(load, 0) < MAX_REMEASURES:
                self._remeasured[load] = self._remeasured.get(load, 0) + 1
                return self._run(load, f"{contradiction}: measuring it again", AGAIN_CONTRADICTED)
            self._contradicted.append(contradiction)
        decision = self._next(step)
        if decision.stop and self._stop_kind == "saturation":
            again = self._remeasure_gain()
            if again is not None:
                return again
        budget = self.budget_fired()
        if decision.stop and not budget:
            again = self._remeasure_imprecise()
            if again is not None:
                return again
        if decision.stop and self._stop_kind != KIND_LIMIT:
            return decision  # a constraint or saturation: the plateau's own reason
        if budget:  # a budget that fired is the condition that stopped the run, not the end of the schedule
            return self._halt(budget, KIND_LIMIT)
        return decision

    remeasures_client = True  # a client-bound step is measured once more before the search gives up
    remeasures_gain = False  # PlateauSearch: its refinement judges the bracket whatever load ran last
    remeasures_imprecise = False  # PlateauSearch: a step it did not hold for its goodput (`_surely_growing`)

    def _remeasure_gain(self) -> Decision | None:
        """The search would stop on a growth whose interval straddles the threshold: measure the less
        precise of the two steps it compares once more (the driver holds it until the gain is decided
        or its budget runs out), when that step had not run to its budget; else a load between them, else
        one above the highest (`_grow_to_decide`), after which nothing more. None: stop as decided."""
        acceptable = self._acceptable()
        if not self.remeasures_gain or self._grown_to_decide or not self.gain.straddles(acceptable):
            return None
        step = self.gain.less_precise(acceptable)
        if step is None or step.undecided or self._remeasured.get(step.load, 0) >= MAX_REMEASURES:
            return self._split_gain(acceptable) or self._grow_to_decide(acceptable)
        self._remeasured[step.load] = self._remeasured.get(step.load, 0) + 1
        self._stop, self._stop_kind = None, None
        return self._run(step.load, f"throughput gain straddles {self.gain.min_gain * 100:g} %: "
                                    f"measuring {step.load_label()} again to decide it", AGAIN_GAIN)

    def _remeasure_imprecise(self) -> Decision | None:
        """The search would stop on a step whose goodput is known to worse than +-`PLATEAU_TOLERANCE`,
        not held for it (it surely grew while the search was growing: `_surely_growing`), that the verdict
        rests on: the capacity, or a load below the knee whose interval reaches the knee's floor (95 % of
        the plateau level: it may be on the plateau, the knee at or below it). Measure it once more, held
        until its goodput is known (the search no longer grows), instead of ending INCONCLUSIVE on the
        capacity's precision or placing the knee on a point. Once per load. None: stop as decided."""
        if not self.remeasures_imprecise:
            return None
        verdict = self._verdict()
        if verdict.client_bound or verdict.plateau is None:
            return None
        knee = verdict.plateau
        floor = (1.0 - PLATEAU_TOLERANCE) * (self.level_of(self._acceptable()) or 0.0)
        below = [m for m in self._acceptable() if m.load < knee.load and (m.goodput_ci.high or 0.0) >= floor]
        capacity = self._capacity(knee)
        for step in ([capacity] if capacity is not None else []) + sorted(below, key=lambda m: -m.load):
            if (not step.window or precise(step.goodput_rps, step.goodput_ci, PLATEAU_TOLERANCE)
                    or any(r.startswith(IMPRECISE) for r in step.undecided)
                    or self._imprecise_remeasured.get(step.load, 0) >= MAX_REMEASURES):
                continue
            self._imprecise_remeasured[step.load] = self._imprecise_remeasured.get(step.load, 0) + 1
            self._stop, self._stop_kind = None, None
            what = "the capacity" if step is capacity else "below the knee,"
            figure = f"{self._figure(step)} {self.figure_unit}"
            return self._run(step.load, f"{what} {figure} at {step.load_label()} is not known to "
                                        f"+-{PLATEAU_TOLERANCE * 100:g} %: measuring it again", AGAIN_IMPRECISE)
        return None

    def _split_gain(self, acceptable: list[StepMeasurement]) -> Decision | None:
        """The growth between the two steps compared still straddles the threshold once measured again:
        when a load between them is unmeasured, measure it. The plateau begins between them, so the
        growth from a load inside it is near zero and decides (a knee at the threshold, e.g. 4 slots
        read +4.8 % [+0.3, +9.4] from 4 to 16 users: the client's own time per request). None: stop."""
        pair = self.gain.compared(acceptable)
        if pair is None or self._gain_splits >= MAX_GAIN_SPLITS:
            return None
        lo, hi = sorted((pair[0].load, pair[1].load))
        mid = self._between(lo, hi)
        if mid is None:
            return None
        self._gain_splits += 1
        self._stop, self._stop_kind = None, None
        return self._run(mid, f"throughput gain from {lo:g} to {hi:g} straddles {self.gain.min_gain * 100:g} % "
                              f"measured twice: measuring {mid:g} between them")

    def _between(self, lo: float, hi: float) -> float | None:
        """An unmeasured load between `lo` and `hi` wider apart than the search's resolution, or None."""
        return None

    def _grow_to_decide(self, acceptable: list[StepMeasurement]) -> Decision | None:
        """The growth still straddles the threshold with its steps measured again and nothing left to
        measure between them: measure once above the highest load (PlateauSearch). None: stop."""
        return None

    @property
    def budgets(self) -> list[Condition]:
        """Its budgets (max duration, invocations, IR's MaxInvocations per minute): the limits but the
        maximum load."""
        return [c for c in self.conditions if c.kind == KIND_LIMIT and not isinstance(c, MaxLoad)]

    def budget_fired(self, step: StepMeasurement | None = None) -> str | None:
        """The first budget that fires on the steps so far, plus `step` when given (a step still running),
        or None."""
        history = self.steps + ([step] if step is not None else [])
        fired = check_all(self.budgets, history)
        return fired[0].reason if fired else None

    def halt(self, reason: str) -> Decision:
        """Stop from outside (a run-time limit, the user): `reason` becomes the stop reason, unless the
        search had already stopped on its own."""
        if self._stop is not None:
            return self._stop
        return self._halt(reason, KIND_LIMIT)

    def feed_final(self, step: StepMeasurement, reason: str) -> Decision:
        """Record the step cut short by an outside stop (it counts in the verdict), then `halt(reason)`."""
        if self._stop is None and self._pending is not None and step.mode == self.mode:
            step.load = self._pending
            step.measured_again = self._again
            self.steps.append(step)
            self._by_load[step.load] = step
            step.latency_slos = latency_slos(self.conditions)
            if step.client_bound:
                self._client = f"{step.client_bound_reason} at {step.load_label()}"
                self._client_fix = generator_fix(step.loop_lag)
        return self.halt(reason)

    def verdict(self) -> Verdict:
        """Name the plateau from everything measured so far (callable at any time)."""
        verdict = self._verdict()
        verdict.capacity = self._capacity(verdict.plateau)
        verdict.model_knee = self._model_knee(verdict.capacity)
        verdict.knee_loads = self._knee_loads(verdict.capacity)
        verdict.knee_granule = self._resolution(verdict.plateau.load) if verdict.plateau else self.granule
        if not verdict.client_bound:
            verdict.undecided = self._unsupported(verdict)
            verdict.knee_undecided = self._knee_only(verdict)
        return verdict

    def _knee_loads(self, capacity: StepMeasurement | None) -> tuple[float, float] | None:
        """The knee's interval in loads, against the capacity's interval (docs/plateau.md): from the
        least load whose goodput MAY be within the tolerance of the capacity (a measured one whose
        interval reaches (1 - tolerance) x the capacity interval's low end, or one not measured that
        Little's law lets reach it) to the least measured that surely is (its whole interval does).
        None without the intervals, or when no step surely is."""
        if capacity is None or capacity.goodput_ci.low is None:
            return None
        floor = (1.0 - PLATEAU_TOLERANCE) * capacity.goodput_ci.low
        acceptable = [m for m in self._acceptable() if m.goodput_ci.known]
        may = [m.load for m in acceptable if (m.goodput_ci.high or 0.0) >= floor]
        sure = [m.load for m in acceptable if (m.goodput_ci.low or 0.0) >= floor]
        if not may or not sure:
            return None
        # A load not measured may be the knee too, from one granule above the highest load measured
        # surely short of it, if it can reach the floor at all: closed loop, n users complete at most
        # n x the best goodput per user measured (a user's cycle only lengthens with load).
        low = min(may)
        short = [m.load for m in acceptable if m.load < low]
        if short and self.mode == MODE_USERS:
            per_user = max((m.goodput_ci.high or 0.0) / m.load for m in acceptable)
            reach = math.ceil(floor / per_user / self.granule - 1e-9) * self.granule if per_user > 0 else low
            low = min(low, max(max(short) + self.granule, reach))
        return low, min(sure)

    def _unsupported(self, verdict: Verdict) -> list[str]:
        """The decisions the verdict rests on that the measurement did not support: the capacity's
        goodput known to worse than +-`PLATEAU_TOLERANCE`; the knee step, the capacity step or the
        step just above the knee (it bounds the knee) still undecided at its budget; a step that
        contradicted Little's law twice."""
        out: list[str] = []
        capacity = verdict.capacity
        if capacity is not None and capacity.window and not precise(capacity.goodput_rps, capacity.goodput_ci,
                                                                    PLATEAU_TOLERANCE):
            out.append(f"the capacity {self._figure(capacity)} at {capacity.load_label()} is not known to "
                       f"+-{PLATEAU_TOLERANCE * 100:g} % (lengthen --step-seconds)")
        knee = verdict.plateau
        deciding: list[StepMeasurement] = [m for m in (knee, capacity) if m is not None]
        if knee is not None:
            above = [m for m in self._by_load.values() if m.load > knee.load and not m.client_bound]
            if above:
                deciding.append(min(above, key=lambda m: m.load))
        seen: set[int] = set()
        for step in deciding:
            # a step's own precision matters for the capacity (above); elsewhere, the decisions it left open
            reasons = [r for r in step.undecided if not r.startswith(IMPRECISE)]
            if id(step) in seen or not reasons or self._places_knee_only(verdict, step):
                continue
            seen.add(id(step))
            out.append(self._open(step))
        stop = self._stop.reason if self._stop else ""
        if POINT_ONLY in stop:
            out.append(f"the search stopped on {stop}")
        if verdict.plateau is None and verdict.bound != BOUND_BELOW:
            out.append(self._nothing_acceptable(verdict))
        if self._contradicted:  # one clause, each step's reading in it: the claim is said once
            many = len(self._contradicted) > 1
            head = (f"{len(self._contradicted)} steps contradicted the closed-loop model, each measured twice" if many
                    else "a step contradicted the closed-loop model, measured twice")
            out.append(f"{head}: {'; '.join(self._contradicted)}")
        return out

    @staticmethod
    def _open(step: StepMeasurement) -> str:
        reasons = [r for r in step.undecided if not r.startswith(IMPRECISE)]
        return f"{step.load_label()} still undecided at its step budget: {'; '.join(reasons)}"

    def _knee_neighbours(self, knee: StepMeasurement) -> list[StepMeasurement]:
        """The knee step and the step just above it (it bounds the knee), as measured last."""
        above = [m for m in self._by_load.values() if m.load > knee.load and not m.client_bound]
        return [knee] + ([min(above, key=lambda m: m.load)] if above else [])

    def _places_knee_only(self, verdict: Verdict, step: StepMeasurement) -> bool:
        """What `step` left open at its budget moves only the knee, and by no more than the search's
        resolution there: the step is the knee or the one just above it, all it left open is whether
        throughput still grew (no SLO), a higher acceptable load was measured (so it is not whether the
        endpoint saturated at all), the plateau was reached with a capacity known to the tolerance, and
        the knee's interval in loads (`knee_loads`, against the capacity's interval) holds the knee and
        spans at most `knee_granule`. Another run would then place the knee within that interval: the
        verdict says so (`knee_undecided`) instead of INCONCLUSIVE."""
        knee, capacity, loads = verdict.plateau, verdict.capacity, verdict.knee_loads
        reasons = [r for r in step.undecided if not r.startswith(IMPRECISE)]
        if knee is None or capacity is None or loads is None or not verdict.reached or not reasons:
            return False
        if not all(r.startswith(GAIN_OPEN) for r in reasons):
            return False
        if not any(step is m for m in self._knee_neighbours(knee)):
            return False
        if not any(m.load > step.load for m in self._acceptable()):
            return False
        if capacity.window and not precise(capacity.goodput_rps, capacity.goodput_ci, PLATEAU_TOLERANCE):
            return False
        low, high = loads
        return low <= knee.load <= high and high - low <= verdict.knee_granule + 1e-9

    def _knee_only(self, verdict: Verdict) -> list[str]:
        """The decisions left open at the step budget that place only the knee (`_places_knee_only`)."""
        if verdict.plateau is None:
            return []
        return [self._open(step) for step in self._knee_neighbours(verdict.plateau)
                if self._places_knee_only(verdict, step)]

    def _lowest(self) -> StepMeasurement | None:
        """The lowest load measured on the endpoint (client-bound steps measured the load generator)."""
        measured = [m for m in self._by_load.values() if not m.client_bound]
        return min(measured, key=lambda m: m.load) if measured else None

    def _nothing_acceptable(self, verdict: Verdict) -> str:
        """Why a search with no acceptable step and no load surely breaking a constraint knows nothing of
        the capacity: no step measured, or the lowest load's constraint undecided (a handful of answers),
        or its failures dominating without a constraint on them."""
        lowest = self._lowest()
        if lowest is None:
            return f"no step was measured on the endpoint ({verdict.stop_reason})"
        why = self._violation(lowest)
        if why is not None and why.startswith(UNDECIDED_PREFIX):
            return f"no load surely met the constraints: {why[len(UNDECIDED_PREFIX):]} at {lowest.load_label()}"
        return f"no load was acceptable and none surely broke a constraint: {verdict.reason}"

    def _verdict(self) -> Verdict:
        acceptable = self._acceptable()
        plateau = self._plateau()
        saturated = self._saturation()
        violating = [m for m in self._violating() if plateau is None or m.load > plateau.load]
        stop_reason = self._stop.reason if self._stop else "search not finished"
        if self._client is not None:
            return Verdict(plateau, False, BOUND_CLIENT, self._client, stop_reason, True, self._client,
                           self.mode, list(self.steps), client_fix=self._client_fix)
        if plateau is None:
            first_bad = self._violating()
            lowest = self._lowest()
            why = self._violation(lowest) if lowest is not None else None
            if lowest is not None and why is None and lowest.failure_dominated:
                why = lowest.failure_reason()  # more than half its requests failed: goodput is their rest
            if lowest is not None and why is not None and not why.startswith(UNDECIDED_PREFIX):
                where = lowest.load_label()
                return Verdict(None, False, BOUND_BELOW, f"the capacity within the constraints is below the lowest "
                               f"load measured, {where} ({why} at {where})", stop_reason, mode=self.mode,
                               steps=list(self.steps))
            reason = (f"{self._violation(first_bad[0])} at {first_bad[0].load_label()}" if first_bad
                      else stop_reason)
            return Verdict(None, False, BOUND_NONE, reason, stop_reason, mode=self.mode, steps=list(self.steps))
        if saturated:
            return Verdict(plateau, True, BOUND_THROUGHPUT, saturated, stop_reason, mode=self.mode,
                           steps=list(self.steps))
        unserved = self._unserved_above(plateau)
        if unserved is not None:
            return Verdict(plateau, True, BOUND_THROUGHPUT, unserved, stop_reason, mode=self.mode,
                           steps=list(self.steps))
        if violating:
            bad = violating[0]
            reason = f"{self._violation(bad)} at {bad.load_label()}"
            bound = BOUND_ERRORS if self._violation_kind(bad) is ErrorRate else BOUND_LATENCY
            return Verdict(plateau, True, bound, reason, stop_reason, mode=self.mode, steps=list(self.steps))
        reason = stop_reason
        if len(acceptable) >= 2 and acceptable[-2].goodput_rps > 0:
            growth = acceptable[-1].goodput_rps / acceptable[-2].goodput_rps - 1.0
            if growth < PLATEAU_TOLERANCE:
                reason += (f"; throughput flat over the last step ({growth * 100:+.0f} %) but not yet over enough "
                           "steps to call it a plateau: raise the maximum or step finer")
            else:
                reason += f"; throughput still growing ({growth * 100:+.0f} % over the last step)"
        return Verdict(plateau, False, BOUND_LIMIT, reason, stop_reason, mode=self.mode, steps=list(self.steps))

    def _violation_kind(self, step: StepMeasurement) -> type | None:
        for condition in self.conditions:
            if condition.kind == KIND_CONSTRAINT and condition.check([step]):
                return type(condition)
        return None


class StepSearch(Search):
    """Linear steps: start, start + step, ... up to `max_load`; optionally stop at the knee."""

    default_gain_window = 4

    def __init__(
        self,
        start: float = 1,
        step: float = 1,
        max_load: float = 64,
        *,
        mode: str = MODE_USERS,
        conditions: Iterable[Condition] | None = None,
        stop_at_knee: bool = True,
        extend_unstable: bool = True,
    ):
        super().__init__(mode=mode, max_load=max_load, conditions=conditions, extend_unstable=extend_unstable)
        self.start = self._check_load(start, "start")
        self.step = self._check_load(step, "step")
        self.granule = self.step
        if self.start > self.max_load:
            raise UsageError(f"start load {start!r} is above the maximum {max_load!r}")
        self.stop_at_knee = stop_at_knee

    def first(self) -> Decision:
        return self._run(self.start, "first step")

    def _next(self, step: StepMeasurement) -> Decision:
        violation = self._blocking(step)
        if violation:
            return self._halt(f"{violation} at {step.load_label()}", KIND_CONSTRAINT)
        saturated = self._saturation()
        if saturated and self.stop_at_knee:
            return self._halt(saturated, "saturation")
        if step.load >= self.max_load:
            return self._halt(MaxLoad(self.max_load, self.mode).check([step]) or "reached maximum", KIND_LIMIT)
        return self._run(min(step.load + self.step, self.max_load), "next step")


class PlateauSearch(Search):
    """Adaptive: grow x`factor` until saturation or a violation, then place the knee with closed-loop
    theory and confirm it (bisecting only where the model has nothing to say or is contradicted)."""

    default_gain_window = GEOMETRIC_GAIN_WINDOW
    remeasures_gain = True
    remeasures_imprecise = True

    def __init__(
        self,
        start: float = 1,
        max_load: float = 256,
        *,
        mode: str = MODE_USERS,
        conditions: Iterable[Condition] | None = None,
        factor: float = GROWTH_FACTOR,
        tolerance: float = REFINE_TOLERANCE,
        granularity: float = LOAD_GRANULARITY,
        extend_unstable: bool = True,
        use_model: bool = True,
    ):
        super().__init__(mode=mode, max_load=max_load, conditions=conditions, extend_unstable=extend_unstable)
        self.start = self._check_load(start, "start")
        if self.start > self.max_load:
            raise UsageError(f"start load {start!r} is above the maximum {max_load!r}")
        if not factor > 1.0:
            raise UsageError(f"growth factor {factor!r} must be > 1 (2 doubles the load each step)")
        if not 0.0 < tolerance < 1.0:
            raise UsageError(f"refinement tolerance {tolerance!r} must be a fraction in (0, 1), e.g. 0.05")
        if not granularity > 0:
            raise UsageError(f"load granularity {granularity!r} must be > 0")
        self.factor = float(factor)
        self.tolerance = float(tolerance)
        self.granularity = max(float(granularity), 1.0) if mode == MODE_USERS else float(granularity)
        self.granule = self.granularity
        self.use_model = use_model
        self.phase = "grow"
        self._refine_steps = 0
        self._model_probes = 0
        self._model_loads: set[float] = set()
        self._confirms: set[float] = set()  # model-placed loads that confirm a knee from below (meant to read short)

    def first(self) -> Decision:
        return self._run(self.start, "first step")

    def _surely_growing(self, step: StepMeasurement) -> bool:
        """Closed loop, growing below the maximum: the step's growth over every acceptable load below it
        (`growth_interval`, from both intervals) lies wholly above the gain threshold, and it surely bent:
        its interval wholly under the linear bound (`_on_linear_bound`: so it grows x`factor`, and its
        cycle is not the unqueued one the model is built on), its cycle under `DEFER_QUEUE` x the
        unqueued one. The next move is the same whatever its goodput reads within its interval, so the
        step is not held to narrow it. A step that queued more is likely on the plateau already, where
        its goodput is what the next step's growth is measured from, or the best one read (the
        capacity): measured again later it would cost a whole step, so it is held now."""
        if self.mode != MODE_USERS or self.phase != "grow" or step.load >= self.max_load or not step.goodput_rps > 0:
            return False
        lower = [m for m in self._acceptable() if m.load < step.load]
        cycle = cycle_time_s(lower)
        if not lower or cycle is None or step.users / step.goodput_rps >= DEFER_QUEUE * cycle:
            return False
        bound = (1.0 - PLATEAU_TOLERANCE) * step.users / cycle  # `_on_linear_bound`: x4 above it, x2 below
        if side(step.goodput_ci, bound) != BELOW:
            return False  # its goodput decides how far to grow, or its cycle is the model's unqueued one
        for m in lower:
            growth = growth_interval(step.goodput_rps, step.goodput_ci, m.goodput_rps, m.goodput_ci)
            if growth.low is None or not growth.low > self.gain.min_gain:
                return False
        return True

    def _on_linear_bound(self, step: StepMeasurement) -> bool:
        """Closed loop: the step still gets what Little's law allows with no queueing (within 5 %):
        users / unqueued cycle. The knee is then still ahead, at least a factor away."""
        cycle = cycle_time_s(self._acceptable())
        return cycle is not None and step.goodput_rps >= (1.0 - PLATEAU_TOLERANCE) * step.users / cycle

    def _grow_to(self, step: StepMeasurement) -> tuple[float, str]:
        """x`factor`, or x`factor`^2 while throughput follows the linear bound (users mode, with the model)."""
        factor, why = self.factor, "throughput still growing"
        if self.use_model and self.mode == MODE_USERS and self._on_linear_bound(step):
            factor, why = self.factor ** 2, "throughput linear in users (no queueing yet)"
        nxt = step.load * factor
        if self.mode == MODE_USERS:
            nxt = math.ceil(nxt)
        return min(nxt, self.max_load), f"{why}: x{factor:g}"

    def _next(self, step: StepMeasurement) -> Decision:
        if self.phase == "grow":
            violation = self._blocking(step)
            unserved = self.mode == MODE_RATE and self.served_ratio(step) is not None and not self._is_served(step)
            if not violation and not unserved and not self._saturation():
                if step.load >= self.max_load:
                    between = self._below_maximum(step)
                    if between is not None:
                        return self._run(*between)
                    return self._halt(MaxLoad(self.max_load, self.mode).check([step]) or "reached maximum", KIND_LIMIT)
                load, why = self._grow_to(step)
                top = self._by_load.get(load)
                if top is not None and load >= self.max_load:  # the maximum, measured before this load below it
                    return self._halt(MaxLoad(self.max_load, self.mode).check([top]) or "reached maximum", KIND_LIMIT)
                return self._run(load, why)
            self.phase = "refine"
        return self._refine()

    def _below_maximum(self, top: StepMeasurement) -> tuple[float, str] | None:
        """Closed loop: growth reached the maximum load, `top`, with throughput still more than 5 % over the
        load below it, yet `top` queued (its cycle over the unqueued one by twice the tolerance): the knee
        lies below the maximum, the jump to it skipped the loads that would show throughput stop growing
        (x4 from 64 users to 256). The load halfway between them (geometric) shows it: (load, reason).
        None when `top` still follows the linear bound (the knee is beyond the maximum: no plateau
        reached, as said) or that load is measured already."""
        if self.mode != MODE_USERS or not self.use_model or not top.goodput_rps > 0:
            return None
        cycle = cycle_time_s(self._acceptable())
        lower = [m.load for m in self._acceptable() if m.load < top.load]
        if cycle is None or not lower or top.load / top.goodput_rps <= cycle * (1.0 + 2 * self.tolerance):
            return None
        mid = float(round(math.sqrt(max(lower) * top.load)))
        if not max(lower) < mid < top.load or mid in self._by_load:
            return None
        return mid, (f"{top.load_label()} (the maximum) queued: {top.load / top.goodput_rps * 1000:.0f} ms cycle, "
                     f"{cycle * 1000:.0f} unqueued: measuring {mid:g} to see throughput stop growing below it")

    def bracket(self) -> tuple[float | None, float | None, str]:
        """(lo, hi, why): the last load below the boundary, the first load past it, and the boundary's reason."""
        acceptable = self._acceptable()
        saturated = self._saturation()
        lo = self._plateau() if self.mode == MODE_RATE and self._served() else None
        if lo is not None:
            # Open loop: between the highest rate served and the lowest one above it that was not
            # (saturated, or breaking a constraint).
            above = [m for m in self._by_load.values() if not m.client_bound and m.load > lo.load]
            if above:
                hi = min(above, key=lambda m: m.load)
                why = saturated or (f"{self._violation(hi)} at {hi.load_label()}" if self._violation(hi)
                                    else f"{hi.load_label()} not served ({hi.goodput_rps:.0f} req/s completed)")
                return lo.load, hi.load, why
        plateau = self.plateau_of(acceptable) if saturated else None
        if saturated and plateau is not None:
            below = [m.load for m in acceptable if m.load < plateau.load]
            return (max(below) if below else None), plateau.load, saturated
        violating = self._violating()
        if violating:
            hi = violating[0]
            below = [m.load for m in acceptable if m.load < hi.load]
            why = f"{self._violation(hi)} at {hi.load_label()}"
            if below and self._flat(self._by_load[max(below)], hi):
                knee = self.knee_bracket()  # saturated before the constraint broke: the knee lies below
                if knee is not None:
                    return knee[0], knee[1], f"{why}, throughput already flat from {max(below):g} users"
            return (max(below) if below else None), hi.load, why
        return None, None, "no boundary"

    def knee_bracket(self) -> tuple[float, float] | None:
        """Closed loop: (the highest acceptable load below the knee, the knee) while a load between them,
        not measured, may be the knee: the gap is wider than the refinement's resolution (`_narrow`) and
        Little's law lets a load in it reach 95 % of the plateau level (n users complete at most n x the
        best goodput per user measured: a user's cycle only lengthens with load). None when the knee is
        bracketed, when it is a constraint's last load with throughput still linear below it, or in
        open loop (its plateau is the highest rate served)."""
        if self.mode != MODE_USERS:
            return None
        acceptable = self._acceptable()
        knee = self.plateau_of(acceptable)
        below = [m.load for m in acceptable if knee is not None and m.load < knee.load]
        if knee is None or not below or self._narrow(max(below), knee.load):
            return None
        per_user = max(m.goodput_rps / m.load for m in acceptable)
        floor = (1.0 - PLATEAU_TOLERANCE) * (self.level_of(acceptable) or 0.0)
        reach = math.ceil(floor / per_user / self.granule - 1e-9) * self.granule if per_user > 0 else knee.load
        # the least load that may be the knee is max(below) + 1 granule or `reach`: placed once within the resolution
        if self._narrow(max(max(below), reach - self.granule), knee.load):
            return None
        return max(below), knee.load

    def _grow_to_decide(self, acceptable: list[StepMeasurement]) -> Decision | None:
        """Closed loop, once: the growth to the highest load still straddles the threshold after both steps
        were measured again and the loads between them split, so whether throughput stopped growing is open
        (and with it the capacity). One step x`factor` above the highest load decides it: the growth from
        the highest load to it is what the saturation rule then compares (on a plateau it is near zero, the
        two steps' intervals narrow). Not when a load above the highest acceptable one was measured (it
        broke a constraint) or at the maximum. None: stop as decided."""
        if self.mode != MODE_USERS or self._grown_to_decide or not acceptable:
            return None
        highest = acceptable[-1]
        if highest.load >= self.max_load or any(m.load > highest.load for m in self._by_load.values()):
            return None
        load = min(float(math.ceil(highest.load * self.factor)), self.max_load)
        self._grown_to_decide = True
        self._stop, self._stop_kind = None, None
        return self._run(load, f"throughput gain to {highest.load:g} straddles {self.gain.min_gain * 100:g} % "
                               f"measured twice: measuring {load:g} above it to decide whether throughput stopped "
                               "growing")

    def _resolution(self, load: float) -> float:
        """How finely a boundary near `load` is placed: the refinement tolerance of it (5 %), in users to
        the nearest whole user, never under the granularity (1 user): 1 user below 30 users, 2 from 30,
        3 from 50, 5 from 90. One definition for the bracket that ends the refinement (`_narrow`), the
        step that confirms a knee from below (`_below`), the least step above a load short of the knee
        (`_guided_users`), the knee's bracket (`knee_bracket`) and the verdict's `knee_granule`: a knee
        placed within it is the same knee in another run."""
        width = self.tolerance * load
        return max(self.granularity, float(math.floor(width + 0.5 + 1e-9)) if self.mode == MODE_USERS else width)

    def _narrow(self, lo: float, hi: float) -> bool:
        """The boundary between `lo` and `hi` is placed: they are at most the resolution at `hi` apart."""
        return hi - lo <= self._resolution(hi) + 1e-9

    def _between(self, lo: float, hi: float) -> float | None:
        if self._narrow(lo, hi):
            return None
        mid = (lo + hi) / 2.0
        mid = float(round(mid)) if self.mode == MODE_USERS else self._quantum(mid)
        return mid if lo < mid < hi and mid not in self._by_load else None

    def _refine(self) -> Decision:
        lo, hi, why = self.bracket()
        if hi is None and self.knee_bracket() is None:
            # the boundary seen is gone (a step measured again no longer reads saturated): grow on
            highest = max(self._acceptable(), key=lambda m: m.load, default=None)
            if highest is None or highest.load >= self.max_load:
                return self._halt(why, KIND_LIMIT)
            self.phase = "grow"
            return self._run(*self._grow_to(highest))
        kind = "saturation" if self._saturation() or self._unserved_above(self._plateau()) else KIND_CONSTRAINT
        knee = self.knee_bracket()
        guide = kind == "saturation" or (knee is not None and (lo, hi) == knee)
        if (lo is None or hi is None or self._narrow(lo, hi)) and knee is not None:
            # the constraint's boundary is found (or starts at the first step), but the knee below it
            # is not: refine the knee, else its place is the search's path, not the endpoint's
            (lo, hi), guide = knee, True
        if lo is None or hi is None:
            return self._halt(why, kind)
        if self._narrow(lo, hi) or self._refine_steps >= MAX_REFINE_STEPS:
            return self._halt(why, kind)
        guided = None
        if self.use_model and guide and self._model_probes < MAX_MODEL_PROBES:
            guided = self._guided(lo, hi)
        if guided is not None:
            self._model_probes += 1
            self._model_loads.add(guided[0])
            self._refine_steps += 1
            return self._run(*guided)
        mid = (lo + hi) / 2.0
        mid = float(round(mid)) if self.mode == MODE_USERS else self._quantum(mid)  # rates: whole tokens
        if mid <= lo or mid >= hi:
            return self._halt(why, kind)
        self._refine_steps += 1
        return self._run(mid, f"bisecting between {lo:g} and {hi:g}")

    # -- model-guided refinement --------------------------------------------------------------------
    def _untried(self, load: float, lo: float, hi: float) -> bool:
        return lo < load < hi and load not in self._by_load

    def _guided(self, lo: float, hi: float) -> tuple[float, str] | None:
        """(load, reason) placed by what was measured, or None to bisect."""
        return self._guided_users(lo, hi) if self.mode == MODE_USERS else self._guided_rate(lo, hi)

    def _below(self, hi: float) -> float:
        """The load one resolution below `hi` (`_resolution`): read short of the plateau, it closes the bracket."""
        return hi - self._resolution(hi)

    def _above(self, lo: float) -> float:
        """The load just above `lo` that closes the bracket."""
        width = max(self.granularity, self.tolerance * lo)
        return lo + (math.floor(width) if self.mode == MODE_USERS else self._quantum(width))

    def _guided_users(self, lo: float, hi: float) -> tuple[float, str] | None:
        """Closed loop: Little's law puts the knee at capacity x cycle time. Run the fewest users the
        model says reach the plateau (95 % of its level), with the cycle measured at `lo`, the highest
        load below the plateau (cycles grow with load before the knee: client and endpoint CPU, queues
        in front of the slots; never shorter than the unqueued cycle). A load that falls just short
        re-fits the cycle there (a Newton step), at least one resolution (`_resolution`) above `lo`
        (closer, it would narrow the bracket by less). Once the plateau starts where the model says
        (within one resolution of `hi`) and `lo` did not queue, the load one resolution below `hi`
        confirms the knee (it is meant to read short: it never counts as a miss). After a load fell
        short by more than the tolerance (a knee that bends early, or noise), the model's load is
        blended with the bracket's midpoint. None (bisect) when the plateau starts more than one
        resolution below the model's load, or at it from a `lo` that queued (its cycle over the
        unqueued one by twice the tolerance): the model's load bounds the knee from below only if no
        user above `lo` cycles faster than at `lo`, and a `lo` that queued may have read slow (the
        1,500 req/s bench profile: 32 users cycled 28 ms, 34 users 23 ms; confirming from below each
        load found on the plateau walked the knee down about a user a step, 43, 41, 39, 36, 34, 33).
        Such a `lo`, while the unqueued cycle still puts the knee above it, places the load halfway
        between the two models' (the unqueued cycle's, the fewest users that can reach the plateau, and
        `lo`'s): the knee lies between them, and from the middle the bracket closes a step sooner (that
        profile: 37 users, then 34). A `lo` whose queueing the unqueued model cannot explain (its knee at
        or under `lo`, yet `lo` short of the plateau: a soft knee) keeps `lo`'s cycle.
        A `lo` that queues like a step past the knee yet read just under the level is taken for a
        noisy plateau step: the model's knee below it is measured first."""
        acceptable = self._acceptable()
        level = self.level_of(acceptable) or 0.0
        model = ClosedLoopModel.from_steps(acceptable, level)
        below = self._by_load.get(lo)
        if model is None or below is None or below.goodput_rps <= 0:
            return None
        floor = (1.0 - PLATEAU_TOLERANCE) * level
        cycle = below.users / below.goodput_rps
        queued = cycle > model.cycle_s * (1.0 + 2 * self.tolerance)
        if queued and below.goodput_rps >= (1.0 - 2 * self.tolerance) * level:
            # lo queues like a step past the knee and read just under the level: noise, or a dip.
            target = float(model.users_reaching(MODEL_TARGET))
            linear_side = max((m.load for m in acceptable if m.load < lo), default=0.0)
            if target <= lo and self._untried(target, linear_side, hi):
                return target, (f"{lo:g} users queue like a step past the knee ({below.goodput_rps:.0f} req/s): "
                                f"Little's law puts the knee at ~{model.knee:.1f} users: trying {target:g}")
        least = model.users_reaching(MODEL_TARGET)  # from the unqueued cycle: no fewer users reach the plateau
        slow = queued and model.knee > lo  # ... and its knee lies above lo: lo may have read slow
        model = ClosedLoopModel(model.capacity, max(cycle, model.cycle_s))
        target = float(model.users_reaching(MODEL_TARGET))
        how = (f"Little's law: knee ~ {model.knee:.1f} users "
               f"({level:.0f} req/s x {model.cycle_s * 1000:.0f} ms cycle at {lo:g} users)")
        if slow and least < target:
            target = float(math.ceil((least + target) / 2.0 - 1e-9))
            how += f", halfway to the {least:g} the unqueued cycle allows ({lo:g} users may have read slow)"
        missed = [self._by_load[x] for x in self._model_loads - self._confirms if self._by_load[x].goodput_rps < floor]
        if any(m.goodput_rps < (1.0 - self.tolerance) * floor for m in missed) and target < hi:
            target = float(math.ceil((target + (lo + hi) / 2.0) / 2.0 - 1e-9))  # the model bent: halfway to bisection
            how += ", blended with the bracket's midpoint"
        target = max(target, lo + self._resolution(lo))
        if target < hi - self._resolution(hi):
            return (target, f"{how}: trying {target:g}") if self._untried(target, lo, hi) else None
        if queued or target > hi + self._resolution(hi):
            return None  # the plateau starts below where the model can place it: bisect
        confirm = self._below(hi)  # the plateau starts at hi, as the model says: confirm from below
        if self._untried(confirm, lo, hi):
            self._confirms.add(confirm)
            return confirm, f"confirming the knee at {hi:g} users from below: {confirm:g}"
        return None

    def _quantum(self, rate: float) -> float:
        """`rate` rounded down to the load granularity (the open-loop rate step)."""
        return max(self.granularity, math.floor(rate / self.granularity + 1e-9) * self.granularity)

    def _guided_rate(self, lo: float, hi: float) -> tuple[float, str] | None:
        """Open loop: a step that was not served completed the endpoint's capacity C. Offer C, then
        close the bracket next to it (from above when served, from below when not)."""
        unserved = [m for m in self._acceptable() if m.load > lo and not self._is_served(m)]
        if not unserved:
            return None
        capacity = max(m.goodput_rps for m in unserved)
        target = self._quantum(capacity)
        if self._untried(target, lo, hi):
            return target, f"capacity {capacity:.0f} req/s measured when offered more: trying {target:g} req/s"
        if target <= lo:  # served, as the model says: confirm from just above
            above = self._quantum(self._above(lo))
            if self._untried(above, lo, hi):
                return above, f"confirming {lo:g} req/s from above: {above:g} req/s"
        elif target == hi:
            below = self._quantum(self._below(hi))
            if self._untried(below, lo, hi):
                return below, f"{hi:g} req/s not served: trying {below:g} req/s"
        return None


class ScheduleSearch(Search):
    """Judges loads decided elsewhere (a traffic pattern): stop conditions and verdict only.

    The caller sets the load that follows each step with `follow(step, next_load)`; `next_load`
    None means the schedule is over. Saturation stops the run only when a `ThroughputGain` is among
    the conditions (IR's `FlatInvocations: Stop`); without one it only informs the verdict.
    Unstable or client-bound steps are never measured again: the schedule owns the clock.
    """

    default_gain_window = 4
    remeasures_client = False

    def __init__(
        self,
        first_load: float,
        max_load: float,
        *,
        mode: str = MODE_USERS,
        conditions: Iterable[Condition] | None = None,
    ):
        conditions = list(conditions or [])
        self.stop_when_flat = any(isinstance(c, ThroughputGain) for c in conditions)
        super().__init__(mode=mode, max_load=max_load, conditions=conditions, extend_unstable=False)
        self.first_load = self._check_load(first_load, "first")
        self.upcoming: float | None = None

    def first(self) -> Decision:
        return self._run(self.first_load, "traffic pattern")

    def retarget(self, load: float) -> None:
        """The schedule moved on before the step could be measured: the next step is at `load`."""
        if self._stop is None:
            self._pending = float(load)

    def follow(self, step: StepMeasurement, next_load: float | None) -> Decision:
        """Feed the step just run; the schedule's next load is `next_load` (None: the schedule is over)."""
        self.upcoming = None if next_load is None else float(next_load)
        return self.feed(step)

    def _next(self, step: StepMeasurement) -> Decision:
        violation = self._blocking(step)
        if violation:
            return self._halt(f"{violation} at {step.load_label()}", KIND_CONSTRAINT)
        saturated = self._saturation()
        if saturated and self.stop_when_flat:
            return self._halt(saturated, "saturation")
        if self.upcoming is None:
            return self._halt("traffic pattern finished", KIND_LIMIT)
        return self._run(self.upcoming, "traffic pattern")


def default_conditions(
    slo: tuple[float | str, float] | None = None,
    max_error_rate: float | None = None,
) -> list[Condition]:
    """Convenience: the constraint list from an optional (percentile, ms) SLO and error-rate cap."""
    conditions: list[Condition] = []
    if slo is not None:
        conditions.append(LatencySLO(*slo))
    if max_error_rate is not None:
        conditions.append(ErrorRate(max_error_rate))
    return conditions
