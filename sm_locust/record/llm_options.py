"""The options that decide which answers an LLM run's figures count: `--warmup-s`, `--cooldown-s`.

The first `--warmup-s` seconds of a run (cold caches, connections, a batch filling up) and its last
`--cooldown-s` (the stop cuts answers short, the batch drains) are sent but not counted in the run's
`llm` figures; each step also loses its last `--cooldown-s` (its start is already dropped: the
steady window, docs/plateau.md). summary.json `llm.excluded` says how many answers and tokens were
left out. `FigureTrim` is their typed view (record/llm.py applies it; declared apart from it, which imports gevent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sm_locust.config.options import Options, OptionSpec
from sm_locust.measure.timeline import Second

OPTIONS: list[OptionSpec] = [
    OptionSpec("--warmup-s", "SM_LOCUST_WARMUP_S", 0.0,
               "LLM figures: the run's first seconds are sent but not counted in summary.json llm (its answers "
               "and tokens; how many were left out: llm.excluded)", float, minimum=0),
    OptionSpec("--cooldown-s", "SM_LOCUST_COOLDOWN_S", 0.0,
               "LLM figures: the run's last seconds (and each step's) are sent but not counted in summary.json "
               "llm", float, minimum=0),
]


@dataclass(frozen=True)
class FigureTrim:
    """Seconds left out of the LLM figures at the start and the end of a run (0 = none)."""

    warmup_s: float = 0.0
    cooldown_s: float = 0.0

    @classmethod
    def from_options(cls, options: Options) -> FigureTrim:
        return cls(options.warmup_s, options.cooldown_s)

    @property
    def active(self) -> bool:
        return self.warmup_s > 0 or self.cooldown_s > 0

    def run_window(self, started_at: float, ended_at: float) -> tuple[float, float] | None:
        """The (start, end] of the run whose answers count, None when the trims leave nothing."""
        start, end = started_at + self.warmup_s, ended_at - self.cooldown_s
        return (start, end) if end > start else None

    def step_window(self, window: Sequence[Second]) -> list[Second]:
        """A step's steady window (`.t` is when each sample ended) without its last `cooldown_s`; a sample
        the cut falls inside (the recorder keeps a window as its contiguous spans, one `Second` each) ends
        at the cut."""
        if not self.cooldown_s or not window:
            return list(window)
        last = window[-1].t - self.cooldown_s
        kept = []
        for s in window:
            if s.t <= last + 1e-9:
                kept.append(s)
            elif s.t - s.interval < last - 1e-9:
                kept.append(replace(s, t=last, interval=last - (s.t - s.interval)))
        return kept


NO_TRIM = FigureTrim()
