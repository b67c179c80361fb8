"""Open-loop rate phases: the `traffic:` of an autoscaling test (`sm-locust run --traffic FILE`).

A list of phases, each an arrival rate held for a while (`{duration_s, rps}`), sent open loop so a
fleet still starting shows its queueing in the latency. Durations are *run* seconds (emulated
seconds against the local fleet emulation); the rate is real requests per second. Pure:
`parse_traffic` checks the parsed YAML/JSON (one-line UsageError naming the bad phase) and
`Traffic.rate_at(t)` answers; reading the file is `shapes.settings.load_traffic`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sm_locust.errors import UsageError

PHASE_KEYS = ("duration_s", "rps")
TOKEN_RATES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # req/s an open-loop rate token may carry
MIN_PEAK_TOKENS = 10  # at the peak, at least this many tokens (the rate still spread over processes)


@dataclass(frozen=True)
class RatePhase:
    duration_s: float  # run seconds (emulated on the local fleet emulation)
    rps: float  # requests per (real) second; 0 sends nothing

    def describe(self) -> str:
        return f"{self.rps:g} req/s for {self.duration_s:g} s"


@dataclass(frozen=True)
class Traffic:
    """Rate phases back to back, from run second 0."""

    phases: tuple[RatePhase, ...]

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.phases)

    @property
    def peak_rps(self) -> float:
        return max(p.rps for p in self.phases)

    def starts(self) -> list[float]:
        """Run second each phase starts at."""
        out, t = [], 0.0
        for phase in self.phases:
            out.append(t)
            t += phase.duration_s
        return out

    def phase_at(self, t_s: float) -> int | None:
        """Index of the phase holding at run second `t_s`, None once the traffic is over."""
        for index, (start, phase) in enumerate(zip(self.starts(), self.phases, strict=True)):
            if t_s < start + phase.duration_s:
                return index
        return None

    def rate_at(self, t_s: float) -> float | None:
        index = self.phase_at(t_s)
        return None if index is None else self.phases[index].rps

    def requests(self) -> float:
        """Requests the whole traffic sends (rate x duration in real seconds is the caller's business:
        this is rps x run seconds, the count on SageMaker where run and real seconds are one)."""
        return sum(p.rps * p.duration_s for p in self.phases)

    def describe(self) -> str:
        return ", ".join(p.describe() for p in self.phases)

    def token_rate(self) -> float:
        """The req/s each open-loop rate token (`--rate-per-user`) should carry for these phases: the
        largest of TOKEN_RATES that divides every phase's rate exactly and leaves at least
        MIN_PEAK_TOKENS tokens at the peak. Fewer tokens mean a change of phase takes effect at once
        instead of ramping at Locust's 100 users a second (1.3 s from 20 to 150 req/s with 1 req/s
        tokens: 39 emulated seconds at time scale 30)."""
        best = TOKEN_RATES[0]
        for rate in TOKEN_RATES:
            divides = all(abs(p.rps / rate - round(p.rps / rate)) < 1e-9 for p in self.phases)
            if divides and self.peak_rps / rate >= MIN_PEAK_TOKENS:
                best = rate
        return best

    def as_list(self) -> list[dict]:
        return [{"duration_s": p.duration_s, "rps": p.rps} for p in self.phases]


def _number(value: object, where: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{where} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise UsageError(f"{where} must be {'above' if positive else 'at least'} 0, got {value!r}")
    return float(value)


def parse_traffic(data: object, where: str = "traffic") -> Traffic:
    """A list of `{duration_s, rps}` (or `{phases: [...]}`) -> Traffic; one-line UsageError otherwise."""
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"phases"})
        if unknown:
            raise UsageError(f"{where}: unknown key {unknown[0]!r}; a traffic file is a list of phases "
                             "({duration_s, rps}) or {phases: [...]}")
        data = data.get("phases")
        where = f"{where}.phases"
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        raise UsageError(f"{where} must be a list of phases like {{duration_s: 300, rps: 20}}, got {data!r}")
    if not data:
        raise UsageError(f"{where} is empty; give at least one phase like {{duration_s: 300, rps: 20}}")
    phases = []
    for index, item in enumerate(data):
        here = f"{where}[{index}]"
        if not isinstance(item, Mapping):
            raise UsageError(f"{here} must be a mapping like {{duration_s: 300, rps: 20}}, got {item!r}")
        unknown = sorted(set(item) - set(PHASE_KEYS))
        if unknown:
            raise UsageError(f"{here}: unknown key {unknown[0]!r}; valid keys: {', '.join(PHASE_KEYS)}")
        missing = [k for k in PHASE_KEYS if k not in item]
        if missing:
            raise UsageError(f"{here} needs {' and '.join(missing)}, e.g. {{duration_s: 300, rps: 20}}")
        phases.append(RatePhase(_number(item["duration_s"], f"{here}.duration_s", positive=True),
                                _number(item["rps"], f"{here}.rps", positive=False)))
    traffic = Traffic(tuple(phases))
    if traffic.peak_rps <= 0:
        raise UsageError(f"{where}: every phase sends 0 req/s; give at least one phase a rate above 0")
    return traffic
