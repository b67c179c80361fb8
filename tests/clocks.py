"""Clocks for pure code under test."""

from __future__ import annotations


class StepClock:
    """A clock for pure code under test: `sleep` moves it on and is recorded."""

    def __init__(self, now: float = 0.0):
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
