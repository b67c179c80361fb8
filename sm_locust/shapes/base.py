"""What every sm-locust shape shares: options, the recorder's timeline, user classes, the verdict.

A shape is a thin adapter: `decide(now, seconds)` asks a pure driver (`sm_locust.plateau`) for the
load to run, fed with the recorder's per-second timeline (`environment.sm_locust_recorder.seconds`,
attached on the master or local runner by the default locustfile; a shape started without one
attaches its own). This base class turns the answer into Locust's `(users, spawn_rate, classes)`,
prints one line per judged step, stores the verdict in `recorder.plateau` after every step (so a
run stopped early by `-t` or the web UI still has one) and prints the one-line verdict at the end.

Bad options (possible from the web UI, where nothing was checked before the swarm) stop the run at
the first tick with a one-line error and exit code 2.
"""

from __future__ import annotations

import logging
import time

from locust import LoadTestShape

from sm_locust.errors import SmLocustError, UsageError
from sm_locust.users.openloop import OpenLoopUser
from sm_locust.record.recorder import RunRecorder
from sm_locust.shapes.settings import MAX_SPAWN_RATE, ShapeSettings

log = logging.getLogger("sm_locust")


def ensure_recorder(environment):
    """The run's recorder; a shape used without the default locustfile starts one (no run folder)."""
    recorder = getattr(environment, "sm_locust_recorder", None)
    if recorder is None:
        recorder = environment.sm_locust_recorder = RunRecorder(environment, None)
        recorder.on_test_start(environment)
    return recorder


def say(message: str) -> None:
    """A progress line for the console (`sm-locust run` echoes lines starting with "sm-locust")."""
    print(f"sm-locust: {message}", flush=True)


def describe_step(index: int, step) -> str:
    p95 = "-" if step.p95_ms is None else f"{step.p95_ms:.0f}"
    text = f"step {index}: {step.load_label()}: {step.rps:.1f} req/s, p95 {p95} ms"
    if step.error_rate:
        text += f", errors {step.error_rate * 100:.1f} %"
    if step.client_cpu_pct is not None:
        text += f", client CPU {step.client_cpu_pct:.0f} %"
    if step.late_fraction:
        text += f", late sends {step.late_fraction * 100:.1f} %"
    if step.dropped_fraction:
        text += f", dropped {step.dropped_fraction * 100:.1f} %"
    if not step.stable:
        text += " (unstable)"
    return text


class SmLocustShape(LoadTestShape):
    """Base of the sm-locust shapes: subclasses implement `start(settings)` and `decide(now, seconds)`."""

    abstract = True
    use_common_options = False

    def __init__(self):
        super().__init__()
        self._reset()

    def _reset(self) -> None:
        self.settings: ShapeSettings | None = None
        self.search = None
        self.measurements: list = []
        self._reported = 0
        self._finished = False

    def reset_time(self):
        """Locust calls this when a shape test starts: a new swarm is a new search."""
        super().reset_time()
        self._reset()

    # -- for subclasses --------------------------------------------------------------------------
    def start(self, settings: ShapeSettings) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, now: float, seconds: list) -> tuple[int, float, list | None] | None:  # pragma: no cover
        raise NotImplementedError

    # -- Locust's entry point --------------------------------------------------------------------
    @property
    def environment(self):
        return self.runner.environment

    @property
    def report_period_s(self) -> float:
        """The shortest stability sub-window: 1 s, because the recorder's seconds are exact per
        second on a local runner and on a master alike (there it counts requests by the second they
        completed on the workers, not by when the 3-s worker reports arrived)."""
        return 1.0

    @property
    def recorder(self):
        return ensure_recorder(self.environment)

    def tick(self):
        if self._finished:
            return None
        try:
            if self.settings is None:
                self.settings = ShapeSettings.from_options(self.environment.parsed_options)
                self.start(self.settings)
            load = self.decide(time.time(), self.recorder.seconds)
        except SmLocustError as exc:
            return self._fail(exc)
        self._report_steps()
        if load is None:
            self._finish()
            return None
        return load

    def _fail(self, exc: SmLocustError):
        log.error("sm-locust: %s", exc)
        print(f"sm-locust: error: {exc}", flush=True)
        self.environment.process_exit_code = exc.exit_code
        self._finished = True
        return None

    def _report_steps(self) -> None:
        while self._reported < len(self.measurements):
            step = self.measurements[self._reported]
            self._reported += 1
            say(describe_step(self._reported, step))
            self._store_verdict()

    def _store_verdict(self) -> None:
        if self.search is not None and self.search.steps:
            self.recorder.plateau = self.search.verdict().as_dict()

    def _finish(self) -> None:
        self._finished = True
        self._store_verdict()
        if self.search is not None and self.search.steps:
            say(self.search.verdict().text())

    # -- user classes ----------------------------------------------------------------------------
    def closed_loop(self, users: int, spawn_rate: float | None = None):
        """(users, spawn_rate[, classes]): every loaded user class except the open-loop rate tokens."""
        rate = spawn_rate or min(MAX_SPAWN_RATE, max(1.0, float(users)))
        classes = self.runner.user_classes
        closed = [c for c in classes if not issubclass(c, OpenLoopUser)]
        if not closed:
            raise UsageError("no closed-loop user class is loaded (only OpenLoopUser): add locustfiles/sagemaker.py")
        if len(closed) == len(classes):
            return users, rate
        return users, rate, closed

    def open_loop(self, rate: float):
        """(users, spawn_rate, [OpenLoopUser]) offering `rate` req/s; records the exact offered rate."""
        classes = [c for c in self.runner.user_classes if issubclass(c, OpenLoopUser)]
        if not classes:
            raise UsageError("open loop needs OpenLoopUser among the user classes: add the open or plateau shape "
                             "locustfile (sm_locust/locustfiles/open_shape.py)")
        per_user = self.settings.open_loop().rate_per_user
        users = max(1, round(rate / per_user))
        self.recorder.current_target_rate = users * per_user
        # Rate tokens cost nothing to start: reach the new rate within a second (Locust may warn
        # about a spawn rate above 100; a ramp of several seconds would eat the step instead).
        return users, max(1.0, float(users)), classes[:1]

    def open_loop_pause(self):
        """No open-loop sends (0 users) while the endpoint drains; these seconds belong to no step."""
        self.recorder.current_target_rate = None
        classes = [c for c in self.runner.user_classes if issubclass(c, OpenLoopUser)]
        return 0, MAX_SPAWN_RATE, classes[:1]
