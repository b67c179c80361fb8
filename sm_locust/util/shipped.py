"""`WorkerShipped`: per-environment state that Locust workers ship to the master as deltas.

One base class for the wiring every per-process count needs in a distributed run: one instance per
environment, reset at test start, the unshipped part put into the worker report and merged on the
master. A subclass names its attribute and report key and says what a start resets, what a worker
ships (`take_delta`: None when nothing is new) and how the master merges it (`merge_delta`). On a
local runner nothing is shipped. Locust is used by duck typing; this module imports nothing of it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self


class WorkerShipped:
    """Base of the states workers ship to the master (see the module docstring)."""

    ATTRIBUTE: ClassVar[str]  # the environment attribute holding the one instance
    REPORT_KEY: ClassVar[str]  # the key of its delta in Locust's worker report

    @classmethod
    def for_environment(cls, environment: object) -> Self:
        """This environment's instance, made and attached on first use."""
        state = getattr(environment, cls.ATTRIBUTE, None)
        if state is None:
            state = cls()
            state.attach(environment)
        return state

    def attach(self, environment: Any) -> None:
        """Become `environment`'s instance and listen to its test starts and worker reports."""
        setattr(environment, self.ATTRIBUTE, self)
        events = environment.events
        events.test_start.add_listener(self._on_test_start)
        events.report_to_master.add_listener(self._on_report_to_master)
        events.worker_report.add_listener(self._on_worker_report)
        self.listen(environment)

    # -- what a subclass says ---------------------------------------------------------------------
    def listen(self, environment: object) -> None:
        """Further listeners a subclass registers (e.g. on `request`)."""

    def reset(self) -> None:  # pragma: no cover - each subclass defines it
        """A new test starts: forget the last one."""
        raise NotImplementedError

    def take_delta(self) -> Any | None:  # pragma: no cover
        """Worker side: what has not been shipped yet (None: nothing), now counted as shipped."""
        raise NotImplementedError

    def merge_delta(self, delta: Any, client_id: str) -> None:  # pragma: no cover
        """Master side: add a worker's delta."""
        raise NotImplementedError

    # -- Locust's events ---------------------------------------------------------------------------
    def _on_test_start(self, **_kw: object) -> None:
        self.reset()

    def _on_report_to_master(self, client_id: str, data: dict, **_kw: object) -> None:
        delta = self.take_delta()
        if delta is not None:
            data[self.REPORT_KEY] = delta

    def _on_worker_report(self, client_id: str, data: dict, **_kw: object) -> None:
        delta = data.get(self.REPORT_KEY)
        if delta is not None:
            self.merge_delta(delta, client_id)
