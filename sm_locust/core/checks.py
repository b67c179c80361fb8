"""The end-of-run checks of `sm-locust run`: every limit its options set, with the value it was
judged on and whether it held (k6's thresholds summary, for a load test's SLOs).

Why: a run given `--latency-slo-ms 100 --max-error-rate 0.01` ended with a totals line and a
verdict, and the user had to work out whether each limit held, and on which figures. Here each
limit the user gave becomes one `Check`: its value, its limit, PASS or FAIL (or STOP for a stop
condition that ended the run, n/a when there is nothing to judge), and the window it was judged on:

- a search (step, plateau, phases: summary.json has `plateau`) judges each step by the SLOs, so the
  SLO and error-rate checks read the step the verdict names (its percentile, error rate, TTFT and
  ITL); the run as a whole includes the overloaded steps the search needed to find the knee;
- any other run (constant users, an open-loop rate, traffic phases) is judged as a whole (totals);
- stop conditions (`--max-users`, `--max-rps`, `--max-duration`, `--max-invocations`) say how far
  the run went against them, and STOP when one of them ended it.

Pure: summary.json's dict and the run's parsed options in, checks out (`sm-locust smoke` is the
command whose exit code gates a deploy; `run` prints these and exits 0 when the run completed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sm_locust.util.formatting import MISSING, compact, is_missing, latency, number, percent

PASS, FAIL, STOP, NOT_JUDGED = "PASS", "FAIL", "STOP", "n/a"


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


def percentile_key(percentile: float, prefix: str = "") -> str:
    """95 -> 'p95_ms', 99.9 -> 'p99_9_ms' (summary.json's names); `prefix` 'ttft_' -> 'ttft_p95_ms'."""
    return f"{prefix}p{compact(percentile).replace('.', '_')}_ms"


def _judged(summary: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """(figures, LLM figures, where): the step the verdict names for a search, else the whole run."""
    plateau = summary.get("plateau") or {}
    if not plateau:
        return summary.get("totals") or {}, summary.get("llm") or {}, "whole run"
    if plateau.get("users") is None and plateau.get("rate") is None:
        return {}, {}, "the verdict names no step"
    step = _verdict_step(summary.get("steps") or [], plateau) or {}
    figures = {**step, **{k: v for k, v in plateau.items() if not is_missing(v)}}
    return figures, step.get("llm") or {}, f"at the verdict's step, {_load_words(plateau)}"


def _load_words(plateau: Mapping[str, Any]) -> str:
    if plateau.get("mode") == "rate" and not is_missing(plateau.get("rate")):
        return f"{number(plateau.get('rate'))} req/s offered"
    users = plateau.get("users")
    return MISSING if users is None else f"{users} user{'s' if users != 1 else ''}"


def _verdict_step(steps: list[Mapping[str, Any]], plateau: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The steps[] entry at the verdict's load (its offered rate in rate mode, else its users)."""
    rate, users = plateau.get("rate"), plateau.get("users")
    for step in steps:
        if rate is not None and step.get("target_rate") == rate:
            return step
        if rate is None and users is not None and step.get("users") == users:
            return step
    return None


def _limit_check(name: str, value: Any, limit: float, shown: str, limit_shown: str, where: str) -> Check:
    if is_missing(value):
        return Check(name, MISSING, limit_shown, NOT_JUDGED, where)
    return Check(name, shown, limit_shown, PASS if value <= limit else FAIL, where)


def run_checks(summary: Mapping[str, Any], options: Any) -> list[Check]:
    """One Check per limit given in `options` (parsed `Options`: `given` names the options set),
    judged on summary.json's figures; [] when no SLO or stop condition was given."""
    given = set(getattr(options, "given", ()))
    figures, llm, where = _judged(summary)
    checks: list[Check] = []
    pct = float(options.slo_percentile)
    if "latency_slo_ms" in given:
        slo = options.latency_slo_ms
        value = figures.get(percentile_key(pct))
        checks.append(_limit_check(f"p{compact(pct)} latency <= {compact(slo)} ms", value, slo,
                                   latency(value, " ms"), f"{compact(slo)} ms", where))
    if "max_error_rate" in given:
        limit = options.max_error_rate
        value = figures.get("error_rate")
        checks.append(_limit_check(f"error rate <= {percent(limit, 2, trim=True)}", value, limit,
                                   percent(value, 2), percent(limit, 2, trim=True), where))
    for dest, label in (("ttft_slo_ms", "TTFT"), ("itl_slo_ms", "ITL")):
        if dest in given:
            slo = getattr(options, dest)
            value = llm.get(percentile_key(pct, label.lower() + "_"))
            checks.append(_limit_check(f"{label} p{compact(pct)} <= {compact(slo)} ms", value, slo,
                                       latency(value, " ms"), f"{compact(slo)} ms", where))
    checks += _stop_checks(summary, options, given)
    return checks


# stop condition -> (what it limits, the unit shown, the words of the stop reason when it fired)
STOP_CONDITIONS = {
    "max_users": ("users", "", "max users"),
    "max_rps": ("offered rate", " req/s", "max rate"),
    "max_duration": ("duration", " s", "max duration"),
    "max_invocations": ("requests", "", "max invocations"),
}


def _stop_checks(summary: Mapping[str, Any], options: Any, given: set[str]) -> list[Check]:
    """How far the run went against each stop condition given; STOP for the one that ended it."""
    steps = summary.get("steps") or []
    reason = str(summary.get("stop_reason") or (summary.get("plateau") or {}).get("stop_reason") or "")
    went: dict[str, Any] = {
        "max_users": max((s["users"] for s in steps if s.get("users")), default=None),
        "max_rps": max((s["target_rate"] for s in steps if s.get("target_rate")), default=None),
        "max_duration": _search_span_s(steps) or summary.get("duration_s"),
        "max_invocations": (summary.get("totals") or {}).get("requests"),
    }
    checks = []
    for dest, (label, unit, words) in STOP_CONDITIONS.items():
        if dest not in given:
            continue
        limit, value = getattr(options, dest), went[dest]
        limit_shown = compact(limit, unit)
        name = f"{label} <= {limit_shown}"
        if is_missing(value):
            checks.append(Check(name, MISSING, limit_shown, NOT_JUDGED, "stop condition"))
            continue
        shown = compact(round(float(value), 1 if unit.strip() == "s" else 3), unit)
        if words in reason:
            checks.append(Check(name, shown, limit_shown, STOP, "stop condition: it ended the run"))
        else:
            checks.append(Check(name, shown, limit_shown, PASS if value <= limit else FAIL, "stop condition"))
    return checks


def _search_span_s(steps: list[Mapping[str, Any]]) -> float | None:
    """Seconds from the first step's start to the last one's end (what --max-duration counts), or None."""
    try:
        start = datetime.fromisoformat(str(steps[0]["start"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(steps[-1]["end"]).replace("Z", "+00:00"))
    except (IndexError, KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def checks_lines(checks: list[Check]) -> list[str]:
    """The closing block: a headline ('checks: 3 of 4 passed') and one aligned line per check."""
    if not checks:
        return []
    judged = [c for c in checks if c.status in (PASS, FAIL)]
    passed = sum(c.status == PASS for c in judged)
    failed = len(judged) - passed
    head = f"checks: {passed} of {len(judged)} passed" + (f", {failed} FAILED" if failed else "")
    width = max(len(c.name) for c in checks)
    value_width = max(len(c.value) for c in checks)
    return [head, *(f"  {c.status:<4}  {c.name:<{width}}  {c.value:>{value_width}}  ({c.where})" for c in checks)]
