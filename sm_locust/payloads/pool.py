"""The pool a test draws invocations from, and how it picks the next one.

The pool is built before the test and only read during it; `next()` is on the request path
(thousands of calls per second per process), so each selection mode is a pre-bound callable
doing O(1) or O(log n) work: round-robin is `itertools.cycle`, random is one `random()` call,
weighted is a bisect over cumulative weights. Random modes are seeded so runs repeat.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Callable, Sequence

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.util.registry import Registry

SELECTIONS: Registry[str] = Registry("payload selection")
SELECTIONS.add("round-robin", "round-robin", "roundrobin", "cycle", "sequential")
SELECTIONS.add("random", "random", "uniform")
SELECTIONS.add("weighted", "weighted")


def _round_robin(items: list[Invocation], weights: list[float] | None, rng: random.Random) -> Callable[[], Invocation]:
    return itertools.cycle(items).__next__


def _random(items: list[Invocation], weights: list[float] | None, rng: random.Random) -> Callable[[], Invocation]:
    n, draw = len(items), rng.random
    return lambda: items[int(draw() * n)]


def _weighted(items: list[Invocation], weights: list[float] | None, rng: random.Random) -> Callable[[], Invocation]:
    cumulative = list(itertools.accumulate(weights or [1.0] * len(items)))  # the pool refuses weighted without weights
    total, draw, last = cumulative[-1], rng.random, len(items) - 1
    # bisect_right skips zero-weight items; min() guards the draw() * total == total float edge.
    return lambda: items[min(bisect.bisect_right(cumulative, draw() * total), last)]


_Picker = Callable[[list[Invocation], list[float] | None, random.Random], Callable[[], Invocation]]
_PICKERS: dict[str, _Picker] = {"round-robin": _round_robin, "random": _random, "weighted": _weighted}


def check_weights(weights: Sequence[float], count: int, description: str) -> list[float]:
    if len(weights) != count:
        raise UsageError(f"{len(weights)} weights given for {count} payloads in {description}; "
                         "give one weight per payload")
    out = []
    for i, w in enumerate(weights):
        try:
            value = float(w)
        except (TypeError, ValueError):
            raise UsageError(f"weight {w!r} (payload {i + 1}) is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"weight {w!r} (payload {i + 1}) must be a finite number >= 0")
        out.append(value)
    if sum(out) <= 0:
        raise UsageError(f"the weights for {description} sum to 0; give at least one payload a positive weight")
    return out


class PayloadPool:
    """A fixed set of invocations, handed out round-robin (default), at random or by weight.

    `selection=None` means weighted when weights are given, else round-robin.
    """

    def __init__(
        self,
        invocations: Sequence[Invocation],
        description: str = "",
        *,
        selection: str | None = None,
        weights: Sequence[float] | None = None,
        seed: int | None = None,
    ):
        if not invocations:
            raise UsageError(f"no payloads found in {description or 'the payload source'}; point --payload at a "
                             "non-empty source")
        self.invocations = list(invocations)
        self.description = description
        self.selection = SELECTIONS.canonical(selection or ("weighted" if weights is not None else "round-robin"))
        self.seed = seed
        described = description or "the payload source"
        self.weights = None if weights is None else check_weights(weights, len(self.invocations), described)
        if self.selection == "weighted" and self.weights is None:
            raise UsageError(
                "weighted selection needs weights: add a \"Weight\" key to the JSONL lines or pass weights"
            )
        self._pick = _PICKERS[self.selection](self.invocations, self.weights,
                                              random.Random(0 if seed is None else seed))

    def next(self) -> Invocation:
        """The next invocation to send (cheap: called once per request)."""
        return self._pick()

    def __len__(self) -> int:
        return len(self.invocations)

    def sizes(self) -> dict:
        """Body sizes in bytes, as summary.json reports them."""
        lengths = [len(i.body) for i in self.invocations]
        return {
            "count": len(lengths),
            "min_bytes": min(lengths),
            "avg_bytes": round(sum(lengths) / len(lengths), 1),
            "max_bytes": max(lengths),
        }
