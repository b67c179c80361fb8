"""Which endpoint to create, test and delete next, with never more than N alive (pure).

On SageMaker an endpoint takes minutes to create and the test only uses it for a few; with
`max_parallel_endpoints: N` the next configurations' endpoints are created while the current one
is under test, so a sweep's wall time approaches the sum of its tests rather than of its
deployments. An endpoint counts as alive (and billed) from the moment its creation starts until
its deletion has finished; tests run one at a time (one load generator), the ready configuration
with the lowest index first.

`Pipeline` is the state machine the runner drives from its threads' events; `simulate` drives the
same machine with durations on a virtual clock, for the plan's wall-time estimate and for tests.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WAITING, DEPLOYING, READY, TESTING, DELETING, DONE = "waiting", "deploying", "ready", "testing", "deleting", "done"
ALIVE = frozenset({DEPLOYING, READY, TESTING, DELETING})


class Pipeline:
    """The state of every configuration in a sweep; transitions raise on misuse."""

    def __init__(self, order: Sequence[int], max_alive: int = 1):
        if max_alive < 1:
            raise ValueError(f"max_alive must be at least 1, got {max_alive}")
        self.order = list(order)
        self.max_alive = max_alive
        self.state = {i: WAITING for i in self.order}
        self.peak_alive = 0

    @property
    def alive(self) -> int:
        return sum(1 for s in self.state.values() if s in ALIVE)

    @property
    def finished(self) -> bool:
        return all(s == DONE for s in self.state.values())

    def in_state(self, *states: str) -> list[int]:
        return [i for i in self.order if self.state[i] in states]

    def deploys_to_start(self) -> list[int]:
        """Configurations whose creation may start now (in order, up to the free slots)."""
        free = self.max_alive - self.alive
        return self.in_state(WAITING)[:max(0, free)]

    def next_test(self) -> int | None:
        """The ready configuration to test now, or None (one test at a time)."""
        if self.in_state(TESTING):
            return None
        ready = self.in_state(READY)
        return ready[0] if ready else None

    def _move(self, i: int, frm: tuple[str, ...], to: str) -> None:
        if self.state[i] not in frm:
            raise RuntimeError(f"configuration {i} is {self.state[i]}, not {' or '.join(frm)}")
        self.state[i] = to
        self.peak_alive = max(self.peak_alive, self.alive)
        if self.alive > self.max_alive:
            raise RuntimeError(f"{self.alive} endpoints alive, more than {self.max_alive}")

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
