"""A time-to-result SLO for the async capacity search, pure: does a step's percentile time to result
keep the SLO, judged on its 95 % interval (docs/async.md, "A time-to-result SLO").

The step's calls are those **accepted** in its judged window: from `settle_s` after the step began
to `slo` before the judgment (a call accepted later has not had the SLO's time to answer, so it says
nothing yet). Each has a time to result (call start -> result seen), or is still awaited: then it is
older than the SLO, so its time to result is surely above the SLO, whatever it turns out to be. A
percentile is above the SLO exactly when enough values are, so an awaited call counts as a value just
above the SLO, and the verdict is the one the finished calls would give (failures are left out: they
are the error count's, not a time to result).

The percentile and its interval are `measure.uncertainty`'s block bootstrap over the per-second
histograms, by second of acceptance (the awaited calls too: the ledger counts them by that
second). The verdict compares the interval, never the point:

- **breach**: the whole interval is above the SLO;
- **keeps**: the whole interval is at or below it;
- **undecided**: it straddles the SLO, or too few calls give a percentile (`significance.min_count`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sm_locust.measure.steady import histogram_percentile, percentile_label
from sm_locust.measure.uncertainty import UNKNOWN, Interval, percentile_ci
from sm_locust.plateau.asyncresults import RESULT, AsyncCall
from sm_locust.plateau.significance import ABOVE, BELOW, min_count, side
from sm_locust.plateau.synthetic import locust_bucket

KEEPS = "keeps"
BREACH = "breach"
UNDECIDED = "undecided"


def above(slo_ms: float) -> int:
    """The Locust bucket an awaited call counts in: the smallest one above the SLO's own bucket."""
    bucket = locust_bucket(slo_ms)
    step = 1 if bucket < 100 else 10 if bucket < 1000 else 100 if bucket < 10000 else 1000
    return bucket + step


@dataclass(frozen=True)
class TimeToResultSlo:
    """`--time-to-result-slo-ms` at `--slo-percentile`."""

    percentile: float
    max_ms: float

    def __post_init__(self) -> None:
        if not (0.0 < self.percentile < 100.0 and self.max_ms > 0):
            raise ValueError(f"time-to-result SLO needs 0 < percentile < 100 and max_ms > 0: {self}")

    @property
    def label(self) -> str:
        return f"{percentile_label(self.percentile)} time to result"


@dataclass(frozen=True)
class StepResults:
    """A step's judged window: per second of acceptance, the time-to-result histogram of its calls
    with a result; and how many calls accepted in it are still awaited (older than the SLO)."""

    hists: tuple[dict[int, int], ...]
    awaited: int = 0
    awaited_per_second: tuple[int, ...] = ()  # where the awaited calls were accepted (else: the last second)

    @property
    def results(self) -> int:
        return sum(sum(h.values()) for h in self.hists)

    @classmethod
    def of(cls, calls: Sequence[AsyncCall], first_s: int, end_s: int, awaited: Mapping[int, int]) -> StepResults:
        """The window of whole epoch seconds [first_s, end_s) of acceptance: `calls` (those ended
        so far) and `awaited` (calls still awaited, by second of acceptance)."""
        seconds = max(0, end_s - first_s)
        hists: list[dict[int, int]] = [{} for _ in range(seconds)]
        for call in calls:
            index = int(call.accepted_s) - first_s
            ms = call.time_to_result_ms
            if not 0 <= index < seconds or ms is None or call.outcome != RESULT:
                continue
            bucket = locust_bucket(ms)
            hists[index][bucket] = hists[index].get(bucket, 0) + 1
        late = tuple(int(awaited.get(first_s + i, 0)) for i in range(seconds))
        return cls(tuple(hists), sum(late), late)


@dataclass(frozen=True)
class SloJudgement:
    """A step's percentile time to result (awaited calls counted just above the SLO), its 95 %
    interval, and the verdict (module doc)."""

    slo: TimeToResultSlo
    value_ms: float | None
    interval: Interval
    results: int
    awaited: int

    @property
    def verdict(self) -> str:
        if self.value_ms is None or self.results + self.awaited < min_count(self.slo.percentile):
            return UNDECIDED
        where = side(self.interval, self.slo.max_ms)
        return BREACH if where == ABOVE else KEEPS if where == BELOW else UNDECIDED

    def reason(self) -> str:
        """Why the verdict is what it is, in a line (the figures rounded)."""
        counted = self.results + self.awaited
        needed = min_count(self.slo.percentile)
        if self.value_ms is None or counted < needed:
            return f"{self.slo.label} from {counted} calls (needs {needed})"
        low, high = self.interval.low, self.interval.high
        shown = f"{self.value_ms:.0f} ms" + ("" if low is None or high is None else f" (95 % {low:.0f}-{high:.0f} ms)")
        relation = {BREACH: "above", KEEPS: "within", UNDECIDED: "straddles"}[self.verdict]
        awaited = f", {self.awaited} awaited past it" if self.awaited else ""
        return f"{self.slo.label} {shown} {relation} the SLO {self.slo.max_ms:g} ms{awaited}"

    def as_dict(self) -> dict:
        return {"slo_ms": self.slo.max_ms, "percentile": self.slo.percentile,
                "time_to_result_ms": self.value_ms, "time_to_result_ci95": self.interval.as_list(),
                "results": self.results, "awaited": self.awaited, "slo": self.verdict}


def judge_slo(slo: TimeToResultSlo, step: StepResults) -> SloJudgement:
    """The step's percentile and verdict against `slo` (module doc)."""
    hists = [dict(h) for h in step.hists]
    if step.awaited:
        if not hists:
            hists = [{}]
        bucket = above(slo.max_ms)
        late = step.awaited_per_second if len(step.awaited_per_second) == len(hists) else (
            (0,) * (len(hists) - 1) + (step.awaited,))
        for hist, n in zip(hists, late, strict=True):
            if n:
                hist[bucket] = hist.get(bucket, 0) + n
    merged: dict[int, int] = {}
    for hist in hists:
        for bucket, count in hist.items():
            merged[bucket] = merged.get(bucket, 0) + count
    value = histogram_percentile(merged, slo.percentile) if merged else None
    interval = percentile_ci(hists, slo.percentile) if merged else UNKNOWN
    return SloJudgement(slo, value, interval, step.results, step.awaited)
