"""Token-length distributions, written as one short text so they fit one option value.

`128` (always 128), `64-256` (uniform whole numbers, both ends included), `128~32` (normal, mean
128, sd 32, rounded, at least 1); used by `--prompts synthetic:...` and `serve --llm-output-tokens`.
Draws take a `random.Random`, so a seeded run repeats. A length is at most `MAX_TOKENS` (a 128k
context window).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sm_locust.errors import UsageError

FIXED, UNIFORM, NORMAL = "fixed", "uniform", "normal"
EXAMPLES = "128, 64-256 (uniform) or 128~32 (normal: mean~sd)"
MAX_TOKENS = 131_072  # tokens in one prompt or answer: a 128k context window


@dataclass(frozen=True)
class LengthDistribution:
    """A distribution of token counts (whole numbers >= 1)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str | int, flag: str = "token length") -> LengthDistribution:
        """`"128"`, `"64-256"`, `"128~32"` (see the module doc); anything else is a one-line UsageError."""
        raw = str(text).strip()
        try:
            if "~" in raw:
                mean, sd = (float(x) for x in raw.split("~", 1))
                dist = cls(NORMAL, mean, sd)
            elif "-" in raw.lstrip("-"):
                low, high = (int(x) for x in raw.split("-", 1))
                dist = cls(UNIFORM, low, high)
            else:
                dist = cls(FIXED, int(raw))
        except ValueError:
            raise UsageError(f"{flag} {raw!r} is not a token length; write {EXAMPLES}") from None
        dist.check(flag)
        return dist

    def check(self, flag: str) -> None:
        if max(self.a, self.b if self.kind == UNIFORM else self.a) > MAX_TOKENS or (
                self.kind == NORMAL and self.b > MAX_TOKENS):
            raise UsageError(f"{flag} {self.text()!r}: at most {MAX_TOKENS:,} tokens")
        if self.kind == NORMAL and not (self.a >= 1 and self.b >= 0):
            raise UsageError(f"{flag} {self.text()!r}: the mean must be at least 1 token and the sd 0 or more")
        if self.kind == UNIFORM and not 1 <= self.a <= self.b:
            raise UsageError(f"{flag} {self.text()!r}: write LOW-HIGH with 1 <= LOW <= HIGH")
        if self.kind == FIXED and self.a < 1:
            raise UsageError(f"{flag} {self.text()!r}: a length is at least 1 token")

    def sample(self, rng: random.Random) -> int:
        """One draw (at least 1)."""
        if self.kind == FIXED:
            return int(self.a)
        if self.kind == UNIFORM:
            return rng.randint(int(self.a), int(self.b))
        return min(MAX_TOKENS, max(1, round(rng.gauss(self.a, self.b))))

    @property
    def mean(self) -> float:
        """The mean (the normal's, before rounding and the floor at 1)."""
        if self.kind == UNIFORM:
            return (self.a + self.b) / 2.0
        return float(self.a)

    def text(self) -> str:
        if self.kind == UNIFORM:
            return f"{int(self.a)}-{int(self.b)}"
        if self.kind == NORMAL:
            return f"{self.a:g}~{self.b:g}"
        return f"{int(self.a)}"
