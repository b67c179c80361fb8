"""`MixedPool`: the payload pool with each request's target picked from the mix.

Why it wraps the pool: every sender takes its next request from `environment.sm_locust_payloads`
(the closed-loop users, the open-loop senders, the plateau and phase shapes' users), so a mix applied
here reaches all of them, through both transports (the target is an `Invocation` field, sent as
the `X-Amzn-SageMaker-Target-Model` / `-Inference-Component` header by the fast transport and as
`TargetModel` / `InferenceComponentName` by boto3).

The request path: the payload pool's pick, one alias-table pick (`sampler.Picker`), then the
invocation for that (body, target) pair from a bounded cache, built once per pair with
`dataclasses.replace` (~3 µs) while the cache has room (`CACHE_PAIRS`); under a skewed mix the hot
pairs are the first ones drawn, so nearly every request is a dictionary hit (~0.1 µs).

Entry names: a mixed invocation has `target_in_name=False`, so Locust keeps one entry per endpoint
whatever the number of targets; per-target figures are kept apart (`sm_locust.record.targets`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sm_locust.invocation import Invocation
from sm_locust.mix.sampler import Picker
from sm_locust.mix.spec import TargetMix

CACHE_PAIRS = 20_000  # (body, target) invocations kept: ~0.6 KB each


class MixedPool:
    """`pool.next()` with the target of `mix` picked by weight from the process's seeded stream.

    `process` is the index of this Locust process (0 local; the worker index in distributed runs):
    process k of a run with seed s draws the same sequence of targets every time.
    """

    def __init__(self, pool: Any, mix: TargetMix, seed: int = 0, process: int = 0):
        self.pool = pool
        self.mix = mix
        self.seed = seed
        self.process = process
        self.picker = Picker(mix.weights, seed, process)
        self._cache: dict[tuple[int, int], Invocation] = {}
        names, field, pick, base, cache = mix.names, mix.field, self.picker.next, pool.next, self._cache

        def next_invocation() -> Invocation:
            invocation = base()
            index = pick()
            key = (id(invocation), index)
            hit = cache.get(key)
            if hit is not None:
                return hit
            targeted = dataclasses.replace(invocation, target_in_name=False, **{field: names[index]})
            if len(cache) < CACHE_PAIRS:
                cache[key] = targeted  # the pool holds `invocation` for the run: its id is not reused
            return targeted

        self.next = next_invocation

    # what the rest of the code reads from a payload pool
    @property
    def invocations(self) -> list[Invocation]:
        return self.pool.invocations

    @property
    def description(self) -> str:
        return self.pool.description

    @property
    def selection(self) -> str:
        return self.pool.selection

    def sizes(self) -> dict:
        return self.pool.sizes()

    def __len__(self) -> int:
        return len(self.pool)
