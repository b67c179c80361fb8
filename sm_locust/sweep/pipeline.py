"""Which endpoint to create, test and delete next, with never more than N alive (pure).

With `max_parallel_endpoints: N` the next endpoints are created while the current one is under test.
An endpoint is alive (billed) from the start of its creation to the end of its deletion; tests run
one at a time, the ready configuration with the lowest index first. `Pipeline` is the state machine
the runner drives; `simulate` drives it on a virtual clock (the plan's estimate, tests).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WAITING, DEPLOYING, READY, TESTING, DELETING, DONE = "waiting", "deploying", "ready", "testing", "deleting", "done"
ALIVE = frozenset({DEPLOYING, READY, TESTING, DELETING})


class Pipeline:
    """The state of every configuration in a sweep; transitions raise on misuse.

    Each question the runner and `simulate` ask (how many alive, the next to deploy, the next to
    test, finished?) is answered from counts, a cursor and a heap kept as states change, not by
    scanning every configuration, which is quadratic: scanning took 1.24 s to simulate 2,000
    configurations (about 30 s at 10,000), the kept counts 0.015 s, and 0.08 s at 10,000; the whole
    `--plan` of 10,000 configurations runs in 1.4 s (bench/plan_scale.py; the unit test compares both
    rules in tests/sweep/test_sweep_pipeline.py).
    """

    def __init__(self, order: Sequence[int], max_alive: int = 1):
        if max_alive < 1:
            raise ValueError(f"max_alive must be at least 1, got {max_alive}")
        self.order = list(order)
        self.max_alive = max_alive
        self.state = {i: WAITING for i in self.order}
        self.peak_alive = 0
        self._position = {i: n for n, i in enumerate(self.order)}
        self._count = dict.fromkeys((WAITING, DEPLOYING, READY, TESTING, DELETING, DONE), 0)
        self._count[WAITING] = len(self.order)
        self._waiting_cursor = 0  # every configuration before it in `order` has left WAITING
        self._ready: list[int] = []  # positions of READY configurations (a heap; stale entries skipped)

    @property
    def alive(self) -> int:
        return sum(self._count[s] for s in ALIVE)

    @property
    def finished(self) -> bool:
        return self._count[DONE] == len(self.order)

    def in_state(self, *states: str) -> list[int]:
        return [i for i in self.order if self.state[i] in states]

    def deploys_to_start(self) -> list[int]:
        """Configurations whose creation may start now (in order, up to the free slots)."""
        free = self.max_alive - self.alive
        if free <= 0:
            return []
        order, state = self.order, self.state
        while self._waiting_cursor < len(order) and state[order[self._waiting_cursor]] != WAITING:
            self._waiting_cursor += 1
        out: list[int] = []
        n = self._waiting_cursor
        while n < len(order) and len(out) < free:
            if state[order[n]] == WAITING:
                out.append(order[n])
            n += 1
        return out

    def next_test(self) -> int | None:
        """The ready configuration to test now, or None (one test at a time)."""
        if self._count[TESTING]:
            return None
        while self._ready and self.state[self.order[self._ready[0]]] != READY:
            heapq.heappop(self._ready)
        return self.order[self._ready[0]] if self._ready else None

    def _move(self, i: int, frm: tuple[str, ...], to: str) -> None:
        if self.state[i] not in frm:
            raise RuntimeError(f"configuration {i} is {self.state[i]}, not {' or '.join(frm)}")
        self._count[self.state[i]] -= 1
        self._count[to] += 1
        self.state[i] = to
        if to == READY:
            heapq.heappush(self._ready, self._position[i])
        alive = self.alive
        self.peak_alive = max(self.peak_alive, alive)
        if alive > self.max_alive:
            raise RuntimeError(f"{alive} endpoints alive, more than {self.max_alive}")

    def start_deploy(self, i: int) -> None:
        self._move(i, (WAITING,), DEPLOYING)

    def deployed(self, i: int) -> None:
        self._move(i, (DEPLOYING,), READY)

    def deploy_failed(self, i: int) -> None:
        """Creation failed: what was created is deleted, no test."""
        self._move(i, (DEPLOYING,), DELETING)

    def start_test(self, i: int) -> None:
        self._move(i, (READY,), TESTING)

    def tested(self, i: int) -> None:
        self._move(i, (TESTING,), DELETING)

    def deleted(self, i: int) -> None:
        self._move(i, (DELETING,), DONE)

    def skip(self, i: int) -> None:
        """Not deployed at all (already measured, over budget, interrupted)."""
        self._move(i, (WAITING,), DONE)


@dataclass(frozen=True)
class Durations:
    deploy_s: float
    test_s: float
    delete_s: float
    fails: bool = False  # creation fails after deploy_s: no test


@dataclass(frozen=True)
class Simulation:
    wall_s: float
    peak_alive: int
    events: list[tuple[float, str, int]]  # (time, what, configuration) in order


def simulate(durations: Mapping[int, Durations], max_alive: int) -> Simulation:
    """Run the pipeline on a virtual clock; returns the wall time and the peak of alive endpoints."""
    pipeline = Pipeline(list(durations), max_alive)
    clock = 0.0
    heap: list[tuple[float, int, str, int]] = []
    events: list[tuple[float, str, int]] = []
    seq = 0
    testing = False

    def push(at: float, what: str, i: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (at, seq, what, i))
        seq += 1

    while True:
        for i in pipeline.deploys_to_start():
            pipeline.start_deploy(i)
            events.append((clock, "deploy", i))
            push(clock + durations[i].deploy_s, "deploy_failed" if durations[i].fails else "deployed", i)
        if not testing:
            ready = pipeline.next_test()
            if ready is not None:
                pipeline.start_test(ready)
                testing = True
                events.append((clock, "test", ready))
                push(clock + durations[ready].test_s, "tested", ready)
        if pipeline.finished:
            return Simulation(clock, pipeline.peak_alive, events)
        if not heap:
            raise RuntimeError("pipeline stalled")  # cannot happen: every alive state has a pending event
        clock, _, what, i = heapq.heappop(heap)
        events.append((clock, what, i))
        if what == "deployed":
            pipeline.deployed(i)
        elif what == "deploy_failed":
            pipeline.deploy_failed(i)
            push(clock + durations[i].delete_s, "deleted", i)
        elif what == "tested":
            pipeline.tested(i)
            testing = False
            push(clock + durations[i].delete_s, "deleted", i)
        elif what == "deleted":
            pipeline.deleted(i)
