"""The end-of-run checks of `sm-locust run`: every limit its options set, with the value it was
judged on and whether it held (k6's thresholds summary, for a load test's SLOs).

Each limit the user gave becomes one `Check`: its value, its limit, the outcome and the window it
was judged on:

- a search (step, plateau, phases: summary.json has `plateau`) judges each step by the SLOs, so the
  SLO and error-rate checks read the step the verdict names (its percentile, error rate, TTFT and
  ITL); the run as a whole includes the overloaded steps the search needed to find the knee;
- any other run (constant users, an open-loop rate, traffic phases) is judged as a whole (totals);
- stop conditions (`--max-users`, `--max-rps`, `--max-duration`, `--max-invocations`) say how far
  the run went against them, and STOP when one of them ended it.

A run whose verdict is INCONCLUSIVE because the load generator, not the endpoint, made its figures
decides no limit on them: its SLO, error-rate and token checks show the figure, n/a, and why (`run
inconclusive: ...`), never PASS or FAIL. Stop conditions still say how far it went.

A latency limit is judged by the gates' one judge (`gates.decide`): on the figure's 95 % interval
when summary.json records one (PASS or FAIL when the whole interval is on one side, INCONCLUSIVE
when it straddles the limit), on the point value otherwise. The error rate and the stop conditions
are counts, judged as counted (n/a when there is nothing to judge).

Pure: summary.json's records and the run's parsed options in, checks out (`sm-locust smoke` is the
command whose exit code gates a deploy; `run` prints these and exits 0 when the run completed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sm_locust.config.options import Options
from sm_locust.gates import decide
from sm_locust.record.model import Interval, JsonObject, Llm, Plateau, Step, Summary, load_words, percentile_key
from sm_locust.record.summary import LOST_WORKER_FIX
from sm_locust.util.formatting import MISSING, compact, is_missing, latency, percent, with_interval

PASS, FAIL, INCONCLUSIVE = (decide.WORDS[status] for status in (decide.PASS, decide.FAIL, decide.INCONCLUSIVE))
STOP, NOT_JUDGED = "STOP", "n/a"
RUN_INCONCLUSIVE = "run inconclusive"  # the window of a figure check on a run whose figures do not decide


@dataclass(frozen=True)
class Check:
    """One limit: what (`name`, e.g. "p95 <= 100 ms"), the value judged, the limit, the outcome and
    the window it was judged on ("at the knee: 8 users", "whole run")."""

    name: str
    value: str
    limit: str
    status: str
    where: str

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True)
class _Window:
    """What the checks read: the figures of the judged window, their intervals, its LLM figures, its name."""

    figures: Mapping[str, object]
    intervals: Mapping[str, Interval | None]
    llm: Llm | None
    where: str


def _judged(summary: Summary) -> _Window:
    """The step the verdict names for a search, else the whole run."""
    plateau = summary.plateau
    if plateau is None or not plateau.keys:
        totals = summary.totals
        return _Window(totals.to_json(), totals.ci95 or {}, summary.llm, "whole run")
    if plateau.users is None and plateau.rate is None:
        return _Window({}, {}, None, "the verdict names no step")
    step = _verdict_step(summary.steps, plateau)
    known = {k: v for k, v in plateau.to_json().items() if not is_missing(v)}
    figures = {**(step.to_json() if step else {}), **known}
    return _Window(figures, (step.ci95 or {}) if step else {}, step.llm if step else None,
                   f"at the verdict's step, {_load_words(plateau)}")


def _load_words(plateau: Plateau) -> str:
    if plateau.mode == "rate" and not is_missing(plateau.rate):
        return load_words(None, plateau.rate)
    return MISSING if plateau.users is None else load_words(plateau.users, None)


def _verdict_step(steps: Sequence[Step], plateau: Plateau) -> Step | None:
    """The steps[] entry at the verdict's load (its offered rate in rate mode, else its users)."""
    rate, users = plateau.rate, plateau.users
    for step in steps:
        if rate is not None and step.target_rate == rate:
            return step
        if rate is None and users is not None and step.users == users:
            return step
    return None


def _latency_check(name: str, value: object, interval: Interval | None, limit: float, where: str) -> Check:
    """A latency limit judged by `gates.decide`: on the interval when there is one, else on the point."""
    limit_shown = f"{compact(limit)} ms"
    if is_missing(value) or not isinstance(value, (int, float)):
        return Check(name, MISSING, limit_shown, NOT_JUDGED, where)
    if interval is None:
        status = decide.judge_point(float(value), limit, upper=True)
        return Check(name, latency(value, " ms"), limit_shown, decide.WORDS[status], where)
    bounds = decide.Bounds.of(value, *interval)
    status = decide.judge(bounds, limit, upper=True)
    if status != decide.INCONCLUSIVE:
        return Check(name, latency(value, " ms"), limit_shown, decide.WORDS[status], where)
    return Check(name, with_interval(value, [bounds.low, bounds.high], " ms"), limit_shown, INCONCLUSIVE,
                 f"{where}; its 95 % interval straddles the limit")


def inconclusive_words(reason: str | None) -> str:
    """What made the run INCONCLUSIVE, in the words a check line has room for: its reason's first
    clause ('the load generator was the bottleneck'); the verdict line above says it whole."""
    first = (reason or "").split(":", 1)[0].split(";", 1)[0].strip()
    return f"{RUN_INCONCLUSIVE}: {first}" if first else RUN_INCONCLUSIVE


def _the_clients_figures(summary: Summary) -> bool:
    """The run is INCONCLUSIVE because the load generator made the figures it rests on: its reason
    names a client-bound step's own reason (a search that stopped on one, its capacity or knee step
    measured client-bound, any step of a constant load), or a Locust worker lost before a step it rests
    on ended (`record.summary.lost_worker_verdict`: less load than asked). An answer left undecided at
    the step budget is not: its figures are the endpoint's, and each check's own interval judges them."""
    reason = (summary.verdict.reason if summary.verdict else None) or ""
    if not summary.inconclusive:
        return False
    if summary.workers is not None and summary.workers.lost and f"({LOST_WORKER_FIX})" in reason:
        return True
    return any(step.client_bound and step.client_bound_reason and step.client_bound_reason in reason
               for step in summary.steps)


def _not_deciding(check: Check, why: str) -> Check:
    """A figure check on an INCONCLUSIVE run: the figure shown, n/a, and why."""
    return Check(check.name, check.value, check.limit, NOT_JUDGED, why)


def run_checks(summary: Summary | JsonObject, options: Options) -> list[Check]:
    """One Check per limit given in `options` (parsed `Options`: `given` names the options set),
    judged on summary.json's figures; [] when no SLO or stop condition was given. On a run the load
    generator made INCONCLUSIVE the figure checks are n/a (`_not_deciding`): its figures do not decide."""
    if not isinstance(summary, Summary):
        summary = Summary.from_json(summary, check=False)
    checks = _figure_checks(summary, options)
    if _the_clients_figures(summary):
        why = inconclusive_words(summary.verdict.reason if summary.verdict else None)
        checks = [_not_deciding(check, why) for check in checks]
    return checks + _stop_checks(summary, options, set(getattr(options, "given", ())))


def _figure_checks(summary: Summary, options: Options) -> list[Check]:
    """The SLO, error-rate and token checks, judged on the verdict's window."""
    given = set(getattr(options, "given", ()))
    window = _judged(summary)
    checks: list[Check] = []
    pct = float(options.slo_percentile)
    if "latency_slo_ms" in given:
        slo = options.latency_slo_ms
        key = percentile_key(pct)
        checks.append(_latency_check(f"p{compact(pct)} latency <= {compact(slo)} ms", window.figures.get(key),
                                     window.intervals.get(key), slo, window.where))
    if "max_error_rate" in given:
        limit = options.max_error_rate
        value = window.figures.get("error_rate")
        name, limit_shown = f"error rate <= {percent(limit, 2, trim=True)}", percent(limit, 2, trim=True)
        if is_missing(value) or not isinstance(value, (int, float)):
            checks.append(Check(name, MISSING, limit_shown, NOT_JUDGED, window.where))
        else:  # a count, judged as counted (as the gates judge it)
            status = decide.WORDS[decide.judge_point(float(value), limit, upper=True)]
            checks.append(Check(name, percent(value, 2), limit_shown, status, window.where))
    for dest, label in (("ttft_slo_ms", "TTFT"), ("itl_slo_ms", "ITL")):
        if dest in given:
            slo = getattr(options, dest)
            llm = window.llm
            key = percentile_key(pct, label.lower() + "_")
            checks.append(_latency_check(f"{label} p{compact(pct)} <= {compact(slo)} ms",
                                         llm.percentile(pct, label.lower() + "_") if llm else None,
                                         llm.interval(key) if llm else None, slo, window.where))
    return checks


# stop condition -> (what it limits, the unit shown, the words of the stop reason when it fired)
STOP_CONDITIONS = {
    "max_users": ("users", "", "max users"),
    "max_rps": ("offered rate", " req/s", "max rate"),
    "max_duration": ("duration", " s", "max duration"),
    "max_invocations": ("requests", "", "max invocations"),
}


def _stop_checks(summary: Summary, options: Options, given: set[str]) -> list[Check]:
    """How far the run went against each stop condition given; STOP for the one that ended it."""
    steps = summary.steps
    reason = str(summary.stop_reason or (summary.plateau.stop_reason if summary.plateau else None) or "")
    went: dict[str, float | None] = {
        "max_users": max((s.users for s in steps if s.users), default=None),
        "max_rps": max((s.target_rate for s in steps if s.target_rate), default=None),
        "max_duration": _search_span_s(steps) or summary.duration_s,
        "max_invocations": summary.totals.requests if summary.totals.has("requests") else None,
    }
    checks = []
    for dest, (label, unit, words) in STOP_CONDITIONS.items():
        if dest not in given:
            continue
        limit, value = getattr(options, dest), went[dest]
        limit_shown = compact(limit, unit)
        name = f"{label} <= {limit_shown}"
        if value is None or is_missing(value):
            checks.append(Check(name, MISSING, limit_shown, NOT_JUDGED, "stop condition"))
            continue
        shown = compact(round(float(value), 1 if unit.strip() == "s" else 3), unit)
        if words in reason:
            checks.append(Check(name, shown, limit_shown, STOP, "stop condition: it ended the run"))
        else:
            checks.append(Check(name, shown, limit_shown, PASS if value <= limit else FAIL, "stop condition"))
    return checks


def _search_span_s(steps: Sequence[Step]) -> float | None:
    """Seconds from the first step's start to the last one's end (what --max-duration counts), or None."""
    try:
        start = datetime.fromisoformat(str(steps[0].start).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(steps[-1].end).replace("Z", "+00:00"))
    except (IndexError, ValueError):
        return None
    return (end - start).total_seconds()


def checks_lines(checks: list[Check]) -> list[str]:
    """The closing block: a headline ('checks: 3 of 4 passed') and one aligned line per check."""
    if not checks:
        return []
    judged = [c for c in checks if c.status in (PASS, FAIL, INCONCLUSIVE)]
    passed = sum(c.status == PASS for c in judged)
    failed = sum(c.status == FAIL for c in judged)
    undecided = len(judged) - passed - failed
    not_deciding = [c for c in checks if c.status == NOT_JUDGED and c.where.startswith(RUN_INCONCLUSIVE)]
    head = (f"checks: {passed} of {len(judged)} passed" + (f", {failed} FAILED" if failed else "")
            + (f", {undecided} {INCONCLUSIVE}" if undecided else "")
            + (f", {len(not_deciding)} {NOT_JUDGED} ({not_deciding[0].where})" if not_deciding else ""))
    status_width = max(4, *(len(c.status) for c in checks))
    width = max(len(c.name) for c in checks)
    value_width = max(len(c.value) for c in checks)
    return [head, *(f"  {c.status:<{status_width}}  {c.name:<{width}}  {c.value:>{value_width}}  ({c.where})"
                    for c in checks)]
