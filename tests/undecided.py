"""A plateau search's INCONCLUSIVE for what its step budget left undecided, verified from its own record.

A search holds a step while its deciding figures' 95 % intervals straddle their lines, up to the step
budget; what is still undecided there makes the verdict INCONCLUSIVE, with the reason (docs/plateau.md,
"Deciding on intervals"). On a busy machine that is an honest answer, so an e2e test accepts it, but
only verified, so that a wrong INCONCLUSIVE still fails: `budget_verdict(summary)` is True for an
INCONCLUSIVE whose every clause (summary.json's `plateau.undecided`) is one of

- `N users still undecided at its step budget: R1; R2`: a recorded step at that load whose own
  `undecided` holds exactly those reasons, each re-derived from the record's interval fields:
  - `throughput gain -0.4 % [-7.1, +6.2] straddles 5 %`: the gain's interval recomputed by
    `plateau.significance.growth_interval` from the goodput (output tokens/s, for the token objective)
    intervals of that step and another recorded step reproduces the quoted one, and straddles the line;
  - `ITL p95 61 ms [52, 68] straddles SLO 60 ms`: the step's recorded percentile interval holds the SLO;
  - `p95 48 ms from 12 samples (needs 20)`: the recorded count is under `significance.min_count`;
- `the capacity 54 (±4) at 8 users is not known to +-5 % (lengthen --step-seconds)`: the plateau's
  recorded capacity interval is wider than that (`significance.precise`);
- `the search stopped on throughput gain < 5 % over 2 steps on its point only (...: its interval
  straddles it)`: two recorded steps reproduce that gain interval, and it straddles the line.

False when the run is not INCONCLUSIVE, or INCONCLUSIVE on other grounds (the test then asserts its own
answer). A clause of these kinds that the record does not bear out fails the test (AssertionError), and so
does a token plateau whose knee or capacity figures in `plateau` are not their steps' own `llm` ones: a
step's recorded token figures are the ones the search judged it on, so a gain re-derived from them matches
the quoted one to the print's rounding.
`verify_clause` checks one such clause (the knee's `knee_undecided` are worded the same way).

The async search's own (`async_budget_verdict`): `at 8 req/s the p50 time to result 990 ms (95 % 900-1100 ms)
straddles the SLO 1000 ms after 2 extension(s) of the step: ...` is borne out by a recorded
`async_search.steps[]` entry at that rate above the capacity, SLO `undecided` after those extensions, whose
recorded interval holds the SLO (or whose calls are fewer than the percentile needs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sm_locust.measure.uncertainty import Interval
from sm_locust.plateau.search import IMPRECISE
from sm_locust.plateau.significance import UNDECIDED, growth_interval, min_count, precise, side
from sm_locust.record.model import percentile_key
from sm_locust.util.formatting import load_words

TOKENS = "output-tokens"  # summary.json's plateau.objective when the search judged output tokens/s
GAIN_TOL = 0.002  # a gain re-derived from the record matches the quoted one: 0.1 % printed, 3-decimal figures
ROUNDING = 0.0005  # the quoted gain's own rounding (0.1 %): a bound printed on the line counts as on it
MS_TOL = 0.51  # a percentile's interval is printed in whole milliseconds

_NUMBER = r"[+-]?[\d,]*\.?\d+"
STEP = re.compile(r"(?P<load>.+?) still undecided at its step budget: (?P<reasons>.+)")
GAIN = re.compile(rf"throughput gain (?P<gain>{_NUMBER}) % \[(?P<low>{_NUMBER}), (?P<high>{_NUMBER})\] "
                  rf"straddles (?P<line>{_NUMBER}) %")
SLO = re.compile(rf"(?:(?P<series>TTFT|ITL) )?p(?P<pct>[\d.]+) (?P<value>{_NUMBER}) ms"
                 rf"(?: \[(?P<low>{_NUMBER}), (?P<high>{_NUMBER})\]| \(±(?P<half>{_NUMBER})\)) "
                 rf"straddles SLO (?P<slo>{_NUMBER}) ms")
FEW = re.compile(rf"(?:(?P<series>TTFT|ITL) )?p(?P<pct>[\d.]+) {_NUMBER} ms from (?P<count>\d+) samples "
                 rf"\(needs (?P<needed>\d+)\)")
CAPACITY = re.compile(rf"the capacity (?P<figure>.+) at (?P<load>.+?) is not known to \+-(?P<tol>{_NUMBER}) % "
                      rf"\(lengthen --step-seconds\)")
POINT_ONLY = re.compile(rf"the search stopped on throughput gain < (?P<line>{_NUMBER}) % over \d+ steps on its point "
                        rf"only \((?P<gain>{_NUMBER}) % \[(?P<low>{_NUMBER}), (?P<high>{_NUMBER})\]: its interval "
                        rf"straddles it\)")


ASYNC = re.compile(rf"at (?P<rate>{_NUMBER}) req/s the p(?P<pct>[\d.]+) time to result (?:(?P<value>{_NUMBER}) ms "
                   rf"(?:\(95 % (?P<low>{_NUMBER})-(?P<high>{_NUMBER}) ms\) )?straddles the SLO (?P<slo>{_NUMBER}) ms"
                   rf"(?:, \d+ awaited past it)?|from (?P<count>\d+) calls \(needs (?P<needed>\d+)\)) after "
                   rf"(?P<extensions>\d+) extension\(s\) of the step: hold steps longer \(--step-seconds\)")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _interval(value: object) -> Interval:
    return Interval.from_list(value)


def _throughput(summary: Mapping[str, Any], step: Mapping[str, Any]) -> tuple[float | None, Interval]:
    """What the search compared of `step`, as recorded: its output tokens/s for the token objective
    (`llm`: the figures the search judged the step on), else its goodput (summary.json's goodput is the
    request goodput whatever was judged)."""
    if (summary.get("plateau") or {}).get("objective") == TOKENS:
        llm = step.get("llm") or {}
        return llm.get("output_tokens_per_s"), _interval((llm.get("ci95") or {}).get("output_tokens_per_s"))
    return step.get("goodput_rps"), _interval((step.get("ci95") or {}).get("goodput_rps"))


def _level(step: Mapping[str, Any]) -> float:
    """A recorded step's load as a number: its offered rate (open loop), else its users."""
    rate = step.get("target_rate")
    return float(rate if rate is not None else step.get("users") or 0)


def _load(step: Mapping[str, Any]) -> str:
    """A recorded step's load worded as the verdict words it ('8 users', '40 req/s offered')."""
    return load_words(step.get("users"), step.get("target_rate"))


def _gains(summary: Mapping[str, Any], named: Mapping[str, Any] | None = None) -> list[tuple[float, Interval]]:
    """Every growth (point, interval) between two recorded, not client-bound steps at different loads,
    the higher load's over the lower's, from their recorded throughput intervals; with `named`, only
    those that compare it."""
    steps = [s for s in summary.get("steps", []) if not s.get("client_bound")]
    out = []
    for high in steps:
        for low in steps:
            if _level(high) <= _level(low):
                continue
            if named is not None and named is not high and named is not low:
                continue
            (new, new_ci), (base, base_ci) = _throughput(summary, high), _throughput(summary, low)
            if new is None or base is None or not base > 0:
                continue
            interval = growth_interval(new, new_ci, base, base_ci)
            if interval.known:
                out.append((new / base - 1.0, interval))
    return out


def _gain_borne_out(summary: Mapping[str, Any], found: re.Match, named: Mapping[str, Any] | None) -> bool:
    """The quoted gain and its interval straddling the quoted line, as two recorded steps give them."""
    line, gain = _num(found["line"]) / 100, _num(found["gain"]) / 100
    low, high = _num(found["low"]) / 100, _num(found["high"]) / 100
    assert low - ROUNDING <= line <= high + ROUNDING, f"the quoted gain does not straddle {line:%}: {found[0]}"
    for point, interval in _gains(summary, named):
        assert interval.low is not None and interval.high is not None
        if abs(point - gain) <= GAIN_TOL and abs(interval.low - low) <= GAIN_TOL \
                and abs(interval.high - high) <= GAIN_TOL:
            widened = Interval(interval.low - ROUNDING, interval.high + ROUNDING)
            return side(widened, line) == UNDECIDED
    return False


def _slo_borne_out(summary: Mapping[str, Any], step: Mapping[str, Any], found: re.Match) -> bool:
    """The step's recorded percentile interval is the quoted one and holds the SLO."""
    key = percentile_key(float(found["pct"]), f"{found['series'].lower()}_" if found["series"] else "")
    cis = ((step.get("llm") or {}).get("ci95") if found["series"] else step.get("ci95")) or {}
    recorded = _interval(cis.get(key))
    if not recorded.known:
        return False
    assert recorded.low is not None and recorded.high is not None
    value, slo = _num(found["value"]), _num(found["slo"])
    if found["half"] is not None:
        quoted = (value - _num(found["half"]), value + _num(found["half"]))
        tol = 2 * MS_TOL  # a symmetric interval's half-width is printed around a rounded figure
    else:
        quoted, tol = (_num(found["low"]), _num(found["high"])), MS_TOL
    if abs(recorded.low - quoted[0]) > tol or abs(recorded.high - quoted[1]) > tol:
        return False
    return side(recorded, slo) == UNDECIDED


def _few_borne_out(step: Mapping[str, Any], found: re.Match) -> bool:
    """Fewer samples than a percentile needs, as the record counts them (requests, answers, token gaps)."""
    count, needed = int(found["count"]), int(found["needed"])
    if needed != min_count(float(found["pct"])) or not count < needed:
        return False
    llm = step.get("llm") or {}
    if found["series"] == "TTFT":
        return count <= (llm.get("requests") or 0)
    if found["series"] == "ITL":
        return count <= (llm.get("output_tokens") or 0)
    return count == step.get("requests")


def _reason_borne_out(summary: Mapping[str, Any], step: Mapping[str, Any], reason: str) -> bool:
    if found := GAIN.fullmatch(reason):
        return _gain_borne_out(summary, found, step)
    if found := SLO.fullmatch(reason):
        return _slo_borne_out(summary, step, found)
    if found := FEW.fullmatch(reason):
        return _few_borne_out(step, found)
    return False


def _open(step: Mapping[str, Any]) -> list[str]:
    """A recorded step's undecided reasons that the verdict quotes (its own precision is judged on the capacity)."""
    return [str(r) for r in step.get("undecided") or [] if not str(r).startswith(IMPRECISE)]


def is_budget_clause(clause: str) -> bool:
    """Whether a `plateau.undecided` clause is of a kind this module verifies."""
    return any(kind.fullmatch(clause) for kind in (STEP, CAPACITY, POINT_ONLY))


def verify_clause(summary: Mapping[str, Any], clause: str) -> None:
    """AssertionError unless the record bears `clause` out (module doc)."""
    if found := STEP.fullmatch(clause):
        steps = [s for s in summary.get("steps", []) if _load(s) == found["load"]]
        assert steps, f"names a step the record does not hold: {clause}"
        reasons = found["reasons"]
        quoting = [s for s in steps if "; ".join(_open(s)) == reasons]
        assert quoting, f"no recorded step at {found['load']} left these undecided: {clause}"
        assert any(all(_reason_borne_out(summary, s, r) for r in _open(s)) for s in quoting), \
            f"the record's own intervals do not bear this out: {clause}"
        return
    if found := CAPACITY.fullmatch(clause):
        plateau = summary.get("plateau") or {}
        tokens = plateau.get("objective") == TOKENS
        value = plateau.get("capacity_output_tokens_per_s" if tokens else "capacity_rps")
        interval = _interval(plateau.get("capacity_output_tokens_per_s_ci95" if tokens else "capacity_ci95"))
        capacity = [s for s in summary.get("steps", []) if _level(s) == plateau.get("capacity_load")]
        assert capacity and found["load"] == _load(capacity[0]), f"not the recorded capacity's load: {clause}"
        # unknown, or wider than the tolerance even allowing the record's rounding
        tolerance = _num(found["tol"]) / 100
        assert value is not None and not precise(value, interval, tolerance + 0.001), \
            f"the recorded capacity interval {interval} is known to +-{tolerance:%}: {clause}"
        return
    if found := POINT_ONLY.fullmatch(clause):
        assert _gain_borne_out(summary, found, None), f"no two recorded steps give this straddling gain: {clause}"
        return
    raise AssertionError(f"not an undecided-at-the-budget clause: {clause}")


def _one_figure(summary: Mapping[str, Any]) -> None:
    """Token objective: the knee's and the capacity's output tokens/s and interval in `plateau` are their
    steps' recorded `llm` figures (one figure, one definition: the search's)."""
    plateau = summary.get("plateau") or {}
    if plateau.get("objective") != TOKENS:
        return
    steps = summary.get("steps", [])
    for name, key, prefix in (("knee", "knee_step", "output_tokens_per_s"),
                              ("capacity", "capacity_step", "capacity_output_tokens_per_s")):
        index = plateau.get(key)
        llm = (steps[index].get("llm") if isinstance(index, int) and 0 <= index < len(steps) else None) or {}
        if plateau.get(prefix) is None or llm.get("output_tokens_per_s") is None:
            continue
        said = (plateau[prefix], _interval(plateau.get(f"{prefix}_ci95")))
        recorded = (llm["output_tokens_per_s"], _interval((llm.get("ci95") or {}).get("output_tokens_per_s")))
        assert said == recorded, f"the {name}'s output tokens/s {said} is not its step's {recorded}"


def budget_verdict(summary: Mapping[str, Any]) -> bool:
    """summary.json of a finished plateau run: True when its verdict is INCONCLUSIVE only for what the
    step budget left undecided, every clause verified from the record (`verify_clause`); False when it is
    not INCONCLUSIVE, or INCONCLUSIVE on other grounds as well (the test asserts its own answer)."""
    plateau = summary.get("plateau") or {}
    verdict = summary.get("verdict") or {}
    clauses: Sequence[str] = plateau.get("undecided") or []
    if verdict.get("status") != "inconclusive" or plateau.get("client_bound") or not clauses:
        return False
    if plateau.get("inconclusive_reason") != "; ".join(clauses) or not all(map(is_budget_clause, clauses)):
        return False  # a client-bound knee or capacity step, a contradiction, nothing acceptable: not this
    _one_figure(summary)
    for clause in clauses:
        verify_clause(summary, clause)
    assert plateau.get("inconclusive") is True and verdict.get("reason") == plateau["inconclusive_reason"], verdict
    assert str(plateau.get("text")).startswith(f"INCONCLUSIVE ({plateau['inconclusive_reason']}): "), plateau["text"]
    return True


def async_budget_verdict(summary: Mapping[str, Any]) -> bool:
    """summary.json of a finished async search: True when it is INCONCLUSIVE because a step above its
    capacity left the time-to-result SLO undecided after its extensions, verified from `async_search.steps[]`
    (module doc); False when it is conclusive. An INCONCLUSIVE the record does not bear out fails."""
    search = summary.get("async_search") or {}
    if search.get("verdict") != "INCONCLUSIVE":
        return False
    reason = str(search.get("inconclusive_reason") or "")
    found = ASYNC.fullmatch(reason)
    assert found, f"not an SLO left undecided at the step budget: {reason}"
    rate, capacity = _num(found["rate"]), search.get("capacity_rps")
    assert capacity is None or rate > capacity, f"the step is not above the capacity {capacity}: {reason}"
    steps = [s for s in search.get("steps", []) if s.get("rate_rps") == rate and s.get("slo") == UNDECIDED
             and s.get("extensions") == int(found["extensions"]) and s.get("percentile") == float(found["pct"])]
    assert steps, f"no recorded step at {rate:g} req/s left its SLO undecided after those extensions: {reason}"
    for step in steps:
        if found["count"] is not None:
            counted = (step.get("results") or 0) + (step.get("awaited") or 0)
            if int(found["count"]) == counted < int(found["needed"]) == min_count(float(found["pct"])):
                return True
            continue
        recorded, slo = _interval(step.get("time_to_result_ci95")), _num(found["slo"])
        if step.get("slo_ms") != slo:
            continue
        if found["low"] is None:  # enough calls, no interval: nothing to decide with
            if not recorded.known:
                return True
            continue
        if not recorded.known:
            continue
        assert recorded.low is not None and recorded.high is not None
        quoted = (_num(found["low"]), _num(found["high"]))
        if abs(recorded.low - quoted[0]) <= MS_TOL and abs(recorded.high - quoted[1]) <= MS_TOL \
                and side(recorded, slo) == UNDECIDED:
            return True
    raise AssertionError(f"the record's own figures do not bear this out: {reason}; {steps}")
