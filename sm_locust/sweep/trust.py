"""Whether a configuration's measurement can be trusted, and when two configurations tie (pure).

`client_bound_reason` reads summary.json: the run's `verdict`, else the client-bound flags of the
steps that decide its answer; with `every_step` (an autoscaling run) a client that offered less than
the traffic asks (under `MIN_ACHIEVED_RATIO`) makes the result untrustworthy, and one that sent late
and caught up only makes the breaches that `autoscaling.breach_client_bound_s` alone causes the
client's. A Locust worker lost before a step the run's figures rest on ended (`lost_worker_reason`,
summary.json `workers.lost`) makes them untrustworthy for every kind, whatever the verdict says: its users
stopped with it, so those steps measured less load than asked (an async search's backlog then stays bounded
at rates it never really offered). Such a configuration is measured once more; still untrusted, it is
INCONCLUSIVE, never ranked.
Ties: `rank_by_intervals` ranks by `Criterion`s in order, grouping configurations whose 95 %
intervals overlap, directly or through a chain, into one tier (a figure without an interval ties);
`deciding` and `tie_note` say why one lost or where they tied.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic, TypeVar

from sm_locust.measure.looplag import BOTTLENECK
from sm_locust.measure.steady import MIN_ACHIEVED_RATIO
from sm_locust.record.model import JsonObject, Step, Summary, Verdict
from sm_locust.record.summary import LOST_WORKER_FIX, MISSING_SILENT_S, lost_worker_verdict
from sm_locust.sanitize import clean

T = TypeVar("T")
Interval = tuple[float, float]


def _step_reason(index: int, step: Step) -> str:
    rate = step.target_rate
    load = f"{rate:g} req/s offered" if isinstance(rate, (int, float)) else f"{step.users} users"
    return f"step {index + 1} ({load}): {step.client_bound_reason or BOTTLENECK}"


def _deciding_steps(summary: Summary) -> list[int]:
    """Indexes of the steps the run's answer rests on (see the module docstring)."""
    steps, plateau = summary.steps, summary.plateau
    if plateau is None:
        return list(range(len(steps)))
    named = [plateau.capacity_step, plateau.knee_step]
    chosen = sorted({i for i in named if isinstance(i, int) and 0 <= i < len(steps)})
    if chosen:
        return chosen
    users = plateau.users
    return [i for i, s in enumerate(steps) if users is not None and s.users == users]


def under_offered(step: Step) -> bool:
    """The step's sends fell short of its intended rate (under `MIN_ACHIEVED_RATIO` of it), or nothing
    says what was sent (a closed-loop step, an older summary): the endpoint may have been let off."""
    sent, target = step.sent_rps, step.target_rate
    if not isinstance(sent, (int, float)) or not isinstance(target, (int, float)) or target <= 0:
        return True
    return sent < MIN_ACHIEVED_RATIO * target


def _short_of(step: Step) -> str:
    sent, target = step.sent_rps, step.target_rate
    if isinstance(sent, (int, float)) and isinstance(target, (int, float)) and target > 0:
        return f" (sent {sent:.1f} of {target:g} req/s: the endpoint was offered less than the traffic)"
    return ""


WORKER_LOST = "a Locust worker was lost"


def _epoch(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def lost_worker_reason(summary: Summary | JsonObject) -> str | None:
    """Why this run measured less load than it asked for because a Locust worker was lost (summary.json
    `workers.lost`), or None: lost before a judged step ended (`record.summary.lost_worker_verdict`, the run
    verdict's own words), or, when no step says when it ended, before the run's end. A worker without a time is
    taken as lost from the start."""
    record = Summary.of(summary)
    workers = record.workers
    if workers is None or not workers.lost:
        return None
    lost = tuple(w if w.after_s is not None else replace(w, after_s=0.0) for w in workers.lost)
    workers = replace(workers, lost=lost)
    started = _epoch(record.started_at)
    if started is not None and any(s.end is not None and s.judged is not False for s in record.steps):
        verdict = lost_worker_verdict(Verdict.make(status="ok", reason=None), record.steps, workers, started)
        return verdict.reason
    duration = record.duration_s
    during = [w for w in lost if duration is None
              or (w.after_s or 0.0) - (MISSING_SILENT_S if w.reason == "missing" else 0.0) < duration]
    if not during:
        return None
    whole = max(workers.expected or 0, workers.connected or 0, len(lost))
    each = ", ".join(f"{clean(str(w.id or '?'), 80)} {clean(str(w.reason or 'lost'), 20)} {w.after_s:.1f} s"
                     for w in during)
    return (f"{len(during)} of {whole} Locust worker{'s' if whole != 1 else ''} lost ({each} into the test) before "
            f"the run ended: its users stopped with it, so the run measured less load than asked ({LOST_WORKER_FIX})")


def untrusted_words(reason: str | None, *, short: bool = False) -> str:
    """Why a measurement is not trusted, in a few words, from its reason: a lost Locust worker when the
    reason names one (`lost_worker_reason`), the load generator when it names it (a client-bound or
    throttled step), else the search's own doubt (a decision its intervals did not support: plateau.search
    `undecided`)."""
    text = (reason or "").lower()
    if LOST_WORKER_FIX.lower() in text:
        return WORKER_LOST if short else f"{WORKER_LOST}, so the endpoint was offered less load than asked"
    if any(word in text for word in ("load generator", "client", "throttl", "loop lag", "late", "sent ")):
        return BOTTLENECK if short else "the load generator, not the endpoint, was the bottleneck"
    return "the measurement did not decide"


def untrusted_because(reason: str | None, *, short: bool = False) -> str:
    """`untrusted_words` and the reason, its words said once: 'the load generator was the bottleneck
    (step 4 (8 users) was client-bound: ...)', and a reason that opens with them (a search's verdict:
    'the load generator was the bottleneck (add workers): client CPU 97 % ...') continues them instead."""
    words = untrusted_words(reason, short=short)
    text = reason or ""
    if text.startswith(BOTTLENECK) and words.endswith("was the bottleneck"):
        return words + text[len(BOTTLENECK):]
    return f"{words} ({text})" if text else words


def only_undecided(summary: Summary | JsonObject) -> bool:
    """The run's verdict is inconclusive only because its search could not decide within its budget (the
    plateau's `undecided`: an interval wider than the tolerance, a figure straddling its SLO), not because the
    load generator was the bottleneck. Such a measurement is imprecise, not biased: a sweep ranks it by its
    intervals (wide ones tie) instead of measuring it again."""
    record = Summary.of(summary)
    plateau, verdict = record.plateau, record.verdict
    if plateau is None or verdict is None or plateau.client_bound:
        return False
    undecided = [str(reason) for reason in plateau.undecided or []]
    return bool(undecided) and verdict.reason == "; ".join(undecided)


def client_bound_reason(summary: Summary | JsonObject, *, every_step: bool = False,
                        max_breach_s: float | None = None) -> str | None:
    """Why this run measured the load generator rather than the endpoint, or None (module docstring)."""
    record = Summary.of(summary)
    reasons: list[str] = []
    verdict, steps = record.verdict, record.steps
    said = verdict is not None and verdict.status == "inconclusive" and f"({LOST_WORKER_FIX})" in (verdict.reason or "")
    lost = lost_worker_reason(record)
    if lost and (every_step or not said):  # not already in the verdict's reason, read below
        reasons.append(lost)
    if every_step:  # the run's own verdict knows no objective: judged here from its steps and breach
        reasons += [_step_reason(i, s) + _short_of(s) for i, s in enumerate(steps)
                    if s.client_bound and under_offered(s)]
    elif verdict is not None:
        if verdict.status == "inconclusive" and not only_undecided(record):
            reasons.append(str(verdict.reason or "the run's verdict is inconclusive"))
    else:
        reasons += [_step_reason(i, steps[i]) for i in _deciding_steps(record) if steps[i].client_bound]
    scaling = record.autoscaling
    if every_step and scaling is not None:
        behind = scaling.breach_client_bound_s
        breach = scaling.slo_breach_s or 0.0
        budget = max_breach_s or 0.0
        if isinstance(behind, (int, float)) and behind > 0 and breach - behind <= budget + 1e-9 < breach:
            reasons.append(f"{behind:.0f} s of the {breach:.0f} s over the SLO came while the load generator was "
                           f"behind (late sends, a saturated or starved client CPU), and without them the run is "
                           f"within max_breach_s {budget:g}")
    unique = list(dict.fromkeys(reasons))
    return "; ".join(unique) if unique else None


# ------------------------------------------------------------------------------------------- ties

def overlap(a: Interval | None, b: Interval | None) -> bool:
    """Two 95 % intervals share a value (both known)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def as_interval(value: object) -> Interval | None:
    """A [low, high] of finite numbers as a pair, else None."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return float(value[0]), float(value[1])
    return None


@dataclass(frozen=True)
class Criterion(Generic[T]):
    """One figure a ranking orders by: its name in a sentence, its value, its 95 % interval (None for
    an exact figure: a price, a setting), whether higher is better, and how it prints."""

    name: str
    value: Callable[[T], float | None]
    interval: Callable[[T], object] | None = None  # measured: the [low, high] interval; None: exact
    higher: bool = False
    show: Callable[[T], str] | None = None  # '51 ms [40, 63]'; default: the value

    def key(self, c: T) -> float:
        """Sorting key, best first; an unknown value last."""
        v = self.value(c)
        if v is None or not math.isfinite(v):
            return math.inf
        return -v if self.higher else v

    def same(self, a: T, b: T) -> bool:
        """The figure cannot tell `a` from `b`: exact values equal, or measured intervals that overlap
        or are unknown. An unknown value never ties with a known one."""
        va, vb = self.value(a), self.value(b)
        if va is None or vb is None:
            return va is None and vb is None
        if self.interval is None:
            return va == vb
        ia, ib = as_interval(self.interval(a)), as_interval(self.interval(b))
        return ia is None or ib is None or overlap(ia, ib)

    def text(self, c: T) -> str:
        return self.show(c) if self.show is not None else f"{self.value(c)}"


def rank_by_intervals(candidates: Sequence[T], criteria: Sequence[Criterion[T]],
                      last: Callable[[T], Any]) -> list[T]:
    """The candidates best first, by tiers of ties (the module docstring); `last` orders what ties
    on every criterion (file order)."""
    if not criteria:
        return sorted(candidates, key=last)
    first, rest = criteria[0], criteria[1:]
    pool = sorted(candidates, key=lambda c: (first.key(c), last(c)))
    ordered: list[T] = []
    while pool:
        tier = _tier(pool, first)
        ordered += rank_by_intervals(tier, rest, last)
        pool = [c for c in pool if not any(c is t for t in tier)]
    return ordered


def _tier(pool: Sequence[T], criterion: Criterion[T]) -> list[T]:
    """The best of `pool` (sorted best first) and every candidate the figure cannot tell from it, directly or
    through a chain of overlapping intervals (a ~ b and b ~ c: the measurement cannot order a and c
    consistently with b, so all three tie). A figure without an interval ties with the tier's members but
    links nothing (it would chain every candidate into one tier)."""
    best = pool[0]
    tier = [best]
    linked = [best] if criterion.interval is None or as_interval(criterion.interval(best)) is not None else []
    for c in pool[1:]:
        if any(criterion.same(member, c) for member in (linked or [best])):
            tier.append(c)
            if criterion.interval is not None and as_interval(criterion.interval(c)) is not None:
                linked.append(c)
    return tier


def deciding(winner: T, other: T, criteria: Sequence[Criterion[T]]) -> tuple[Criterion[T] | None, list[Criterion[T]]]:
    """(the first criterion on which `winner` beats `other` beyond their intervals, or None when they tie
    on every one; the measured criteria before it, on which they tied: overlapping, or apart in `other`'s
    favour, which only a chain of overlaps put in one tier)."""
    tied: list[Criterion[T]] = []
    for criterion in criteria:
        if not criterion.same(winner, other) and criterion.key(winner) <= criterion.key(other):
            return criterion, tied
        if criterion.interval is not None and criterion.value(winner) is not None:
            tied.append(criterion)
    return None, tied


def tie_note(winner: T, other: T, tied: Sequence[Criterion[T]], label: Callable[[T], str]) -> str:
    """'MaxConcurrency 8 and MaxConcurrency 2 tie on warm p95 (51 ms [40, 63] vs 39 ms [33, 47])', the
    figures joined with 'and'; '' when they tied on no measured figure."""
    if not tied:
        return ""
    figures = " and ".join(f"{c.name} ({c.text(winner)} vs {c.text(other)})" for c in tied)
    return f"{label(winner)} and {label(other)} tie on {figures}"
