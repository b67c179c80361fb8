"""Two measurements of one configuration, and the sweep's leaders judged on both (pure).

A 95 % interval from one run's seconds holds that run's noise, not what moves between runs minutes
apart on a machine whose load changes. So when the leader and the runner-up are told apart by
their intervals (`contenders`), the runner measures both once more in the reverse order (A B ... B
A), and each then stands for both replicates (`combine`): its value the mean of the two, its
interval the hull of the two intervals (and of the two values). Ranked again on those, what the
hulls no longer tell apart is a tie (`trust.rank_by_intervals`); `disagreements` names the figures
on which one configuration's replicates do not overlap, which `drift_note` says in words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from sm_locust.sweep.trust import Criterion, as_interval, deciding, overlap

T = TypeVar("T")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def combine(first: object, first_ci: object, second: object,
            second_ci: object) -> tuple[float | None, list[float] | None]:
    """(value, interval) of a figure measured twice: the mean of the two values and the hull of both
    intervals and both values. One value unknown: the other replicate's figure as it is; a replicate
    without an interval leaves the hull without one (such a figure separates nothing)."""
    a, b = _number(first), _number(second)
    if a is None or b is None:
        return (a, _list(first_ci)) if b is None else (b, _list(second_ci))
    ia, ib = as_interval(first_ci), as_interval(second_ci)
    if ia is None or ib is None:
        return (a + b) / 2, None
    return (a + b) / 2, [min(ia[0], ib[0], a, b), max(ia[1], ib[1], a, b)]


def _list(interval: object) -> list[float] | None:
    pair = as_interval(interval)
    return None if pair is None else [pair[0], pair[1]]


def merged(first: T, second: T, pairs: Sequence[tuple[str, str]]) -> T:
    """`first` (a dataclass) with each (value field, interval field) of `pairs` `combine`d with
    `second`'s; whole counts (an instance count) stay whole: the larger, and the hull of the two."""
    changes: dict[str, object] = {}
    for value_name, interval_name in pairs:
        va, vb = getattr(first, value_name), getattr(second, value_name)
        value, interval = combine(va, getattr(first, interval_name), vb, getattr(second, interval_name))
        if isinstance(va, int) and isinstance(vb, int) and not isinstance(va, bool):
            value = max(va, vb)
            interval = None if interval is None else [math.floor(interval[0]), math.ceil(interval[1])]
        changes[value_name], changes[interval_name] = value, interval
    return replace(first, **changes)  # type: ignore[type-var]


def separation(a: T, b: T, criterion: Criterion[T]) -> float | None:
    """How far apart two configurations' intervals on `criterion` are, relative to the larger value (0.02:
    a gap of 2 % between the nearer bounds); None when the figure is exact, unknown, or they overlap."""
    if criterion.interval is None:
        return None
    ia, ib = as_interval(criterion.interval(a)), as_interval(criterion.interval(b))
    va, vb = _number(criterion.value(a)), _number(criterion.value(b))
    if ia is None or ib is None or va is None or vb is None or overlap(ia, ib):
        return None
    gap = max(ib[0] - ia[1], ia[0] - ib[1])
    return gap / max(abs(va), abs(vb), 1e-12)


def contenders(ranked: Sequence[T], criteria: Sequence[Criterion[T]]) -> list[T]:
    """[leader, runner-up] when a measured figure told them apart beyond their intervals (what a second
    measurement could overturn): the runner-up is the closest call, the configuration whose intervals on
    the figure that decided against it lie nearest the leader's (relative to the figure), whichever rank
    it holds (a serverless sweep can rank second one that lost on goodput by 70 %, third one that lost
    on $ per 1M by 1 %). [] when no runner-up lost on a measured figure (a price or a setting decided:
    a tie said so already)."""
    if len(ranked) < 2:
        return []
    leader = ranked[0]
    calls: list[tuple[float, int, T]] = []
    for k, other in enumerate(ranked[1:]):
        why, _ = deciding(leader, other, criteria)
        gap = separation(leader, other, why) if why is not None else None
        if gap is not None:
            calls.append((gap, k, other))
    if not calls:
        return []
    return [leader, min(calls, key=lambda call: (call[0], call[1]))[2]]


def disagreements(first: T, second: T, criteria: Sequence[Criterion[T]]) -> list[Criterion[T]]:
    """The measured figures on which two replicates of one configuration do not overlap: the machine
    moved between them by more than either run's own noise."""
    out: list[Criterion[T]] = []
    for criterion in criteria:
        if criterion.interval is None:
            continue
        a, b = as_interval(criterion.interval(first)), as_interval(criterion.interval(second))
        if a is not None and b is not None and not overlap(a, b):
            out.append(criterion)
    return out


def drift_note(label: str, first: T, second: T, criteria: Sequence[Criterion[T]]) -> str:
    """'max_concurrency 4: replicates 50 ms [45, 52] and 41 ms [38, 44] on p95 disagree: the machine
    drifted between them, so its interval is their hull'; '' when they agree on every figure."""
    figures = disagreements(first, second, criteria)
    if not figures:
        return ""
    said = " and ".join(f"{c.text(first)} and {c.text(second)} on {c.name}" for c in figures)
    return f"{label}: replicates {said} disagree: the machine drifted between them, so its interval is their hull"


def confirmation_note(labels: Sequence[str], notes: Sequence[str], tied: bool) -> str:
    """The recommendation's tail after the confirmation: which configurations were measured twice,
    whether the ranking held, and any drift."""
    if not labels:
        return ""
    who = " and ".join(labels)
    drift = "; ".join(n for n in notes if n)
    if tied and drift:
        return f"; tie after measuring {who} again in reverse order: {drift}"
    if tied:
        return f"; measured {who} again in reverse order: on both replicates the leader ties"
    if drift:
        return f"; confirmed by measuring {who} again in reverse order ({drift}), still apart"
    return f"; confirmed by measuring {who} again in reverse order: the replicates agree"

