"""Weighted picks in O(1): Walker's alias table, and the seeded stream each Locust process draws from.

The pick runs once per request with up to a million targets: the alias table (Vose's construction,
O(N) once) costs one draw, one multiply and one comparison whatever N (bench/mix.py). A `Picker`
draws from its own `random.Random`, seeded from `--seed` and the process's index (`stream_seed`), so
process k always draws the same sequence, on any machine (string seeds go through SHA-512).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class AliasTable:
    """Walker/Vose alias table over `weights` (>= 0, sum > 0): `index(u)` maps u in [0, 1) to an index
    drawn with probability weight / sum."""

    __slots__ = ("alias", "n", "prob")

    def __init__(self, weights: Sequence[float]):
        n = len(weights)
        if n == 0:
            raise ValueError("an alias table needs at least one weight")
        total = float(sum(weights))
        if not total > 0:
            raise ValueError("the weights must sum to more than 0")
        scaled = [w * n / total for w in weights]
        prob = [0.0] * n
        alias = list(range(n))
        small = [i for i, p in enumerate(scaled) if p < 1.0]
        large = [i for i, p in enumerate(scaled) if p >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            prob[s] = scaled[s]
            alias[s] = g
            scaled[g] = (scaled[g] + scaled[s]) - 1.0
            (small if scaled[g] < 1.0 else large).append(g)
        for i in large + small:  # what is left is 1 up to rounding
            prob[i] = 1.0
        self.n = n
        self.prob = prob
        self.alias = alias

    def index(self, u: float) -> int:
        """The index for one uniform draw `u` in [0, 1): column int(u * n), kept or sent to its alias."""
        x = u * self.n
        i = int(x)
        if i >= self.n:  # u * n rounding up to n
            i = self.n - 1
        return i if x - i < self.prob[i] else self.alias[i]

    def probabilities(self) -> list[float]:
        """Each index's probability as the table encodes it (for tests: equals weight / sum)."""
        n = self.n
        out = [0.0] * n
        for i in range(n):
            out[i] += self.prob[i] / n
            out[self.alias[i]] += (1.0 - self.prob[i]) / n
        return out


def stream_seed(seed: int, process: int) -> str:
    """The seed of process `process`'s stream (0 on a local runner; the worker index in distributed runs)."""
    return f"sm-locust-mix:{int(seed)}:{int(process)}"


class Picker:
    """A seeded stream of indexes drawn by weight: `next()` is the n-th pick of this process."""

    __slots__ = ("_draw", "next", "table")

    def __init__(self, weights: Sequence[float], seed: int = 0, process: int = 0):
        self.table = AliasTable(weights)
        self._draw = random.Random(stream_seed(seed, process)).random
        table, draw = self.table, self._draw
        n, prob, alias = table.n, table.prob, table.alias
        if n == 1:
            self.next = lambda: 0
            return

        def pick() -> int:  # AliasTable.index inlined: the request path
            x = draw() * n
            i = int(x)
            if i >= n:
                i = n - 1
            return i if x - i < prob[i] else alias[i]

        self.next = pick

    def sequence(self, count: int) -> list[int]:
        """The next `count` picks (tests, and `sm-locust` tools that print a mix's first requests)."""
        return [self.next() for _ in range(count)]
