"""What every sm-locust shape shares: options, the recorder's timeline, user classes, the verdict.

A shape is a thin adapter: `decide(now, seconds)` asks a pure driver (`sm_locust.plateau`) for the
load to run, fed with the recorder's per-second timeline (`environment.sm_locust_recorder.seconds`,
attached on the master or local runner by the default locustfile; a shape started without one
attaches its own). This base class turns the answer into Locust's `(users, spawn_rate, classes)`,
prints one line per judged step, stores the verdict in `recorder.plateau` after every step (so a
run stopped from the web UI still has one) and prints the one-line verdict at the end.

Every shape honours `-t/--run-time`: Locust ignores it once a shape runs (its run-time timer only
starts after the shape has finished), so the base class stops the shape at T itself, judging the
step under way (`stop()`). Whatever ended the run (`-t`, `--max-duration`, a budget, the knee, the
end of a traffic pattern) is printed (`sm-locust: stopped: ...`) and written to summary.json
(`stop_reason`). Spawn rates the shapes choose stay at or under Locust's 100 users/s warning
threshold (`MAX_SPAWN_RATE`).

Bad options (possible from the web UI, where nothing was checked before the swarm) stop the run at
the first tick with a one-line error and exit code 2.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from locust import LoadTestShape
from locust.runners import Runner

from sm_locust.config.options import environment_options, locust_values, option_value, parse_number
from sm_locust.errors import SmLocustError, UsageError
from sm_locust.plateau.search import Search
from sm_locust.record.recorder import RunRecorder, attach_recorder, recorder_of
from sm_locust.record.summary import step_line, step_record
from sm_locust.shapes.saturation import MAX_WINDOW_S, judge
from sm_locust.shapes.settings import MAX_SPAWN_RATE, ShapeSettings, parse_seconds
from sm_locust.users.openloop import OpenLoopUser

log = logging.getLogger("sm_locust")


def ensure_recorder(environment):
    """The run's recorder; a shape used without the default locustfile starts one (no run folder)."""
    recorder = recorder_of(environment)
    if recorder is None:
        recorder = attach_recorder(environment, RunRecorder(environment, None))
        recorder.on_test_start(environment)
    return recorder


def say(message: str) -> None:
    """A progress line for the console (`sm-locust run` echoes lines starting with "sm-locust")."""
    print(f"sm-locust: {message}", flush=True)


def describe_step(index: int, step) -> str:
    """The line printed when step `index` is judged: its summary.json record's line
    (`record.summary.step_line`), plus the token figures of an `--objective output-tokens` step."""
    text = step_line(index, step_record(step))
    if hasattr(step, "describe_tokens"):  # --objective output-tokens (plateau/tokens.py)
        text += f"; {step.describe_tokens()}"
    return text


def run_time_s(options: Mapping[str, object]) -> float | None:
    """`-t/--run-time` in seconds (Locust's own option: it hands it over parsed; the web UI form too), or None."""
    return parse_seconds(option_value(options, "run_time"), "--run-time")


class SmLocustShape(LoadTestShape):
    """Base of the sm-locust shapes: subclasses implement `start(settings)` and `decide(now, seconds)`,
    set `stop_reason` when `decide` ends the run, and `stop(now, seconds, reason)` when a search runs."""

    abstract = True
    shape_name: str | None = None  # its name in sm_locust.shapes.SHAPES (each shape sets it)
    # The shapes read --run-time (and the step shape --spawn-rate): Locust should neither warn that
    # they are ignored nor hide them in the web UI.
    use_common_options = True

    def __init__(self):
        super().__init__()
        self._reset()

    def _reset(self) -> None:
        self.settings: ShapeSettings | None = None
        self.search: Search | None = None
        self.measurements: list = []
        self.stop_reason: str | None = None
        self._reported = 0
        self._finished = False
        self._started = 0.0  # when the settings were read (the first tick)
        self._run_time_s: float | None = None

    def reset_time(self):
        """Locust calls this when a shape test starts: a new swarm is a new search."""
        super().reset_time()
        self._reset()

    # -- for subclasses --------------------------------------------------------------------------
    def start(self, settings: ShapeSettings) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, now: float, seconds: list) -> tuple[int, float, list | None] | None:  # pragma: no cover
        raise NotImplementedError

    def stop(self, now: float, seconds: list, reason: str) -> None:
        """The run ends from outside (`-t`): searches judge the step under way (their driver's `finish`)."""
        self.stop_reason = reason

    # -- Locust's entry point --------------------------------------------------------------------
    @property
    def active_runner(self) -> Runner:
        """Locust's runner: Locust sets it on the shape before the first tick."""
        if self.runner is None:
            raise RuntimeError("the load shape ticked before Locust gave it a runner")
        return self.runner

    @property
    def environment(self):
        return self.active_runner.environment

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
        now = time.time()
        try:
            if self.settings is None:
                locust_options = locust_values(self.environment.parsed_options)  # Locust's own: -t, -r
                spawn_rate = parse_number(option_value(locust_options, "spawn_rate"), "--spawn-rate", float)
                self.settings = ShapeSettings.from_options(environment_options(self.environment), spawn_rate)
                self._run_time_s = run_time_s(locust_options)
                self._started = now
                self.start(self.settings)
            if self._run_time_s is not None and now - self._started >= self._run_time_s - 1e-6:
                self.stop(now, self.recorder.seconds, f"run time {self._run_time_s:g} s reached (-t)")
                load = None
            else:
                load = self.decide(now, self.recorder.seconds)
        except SmLocustError as exc:
            return self._fail(exc)
        if self.search is not None:  # the search's judged steps are summary.json's steps (record.accumulate)
            self.recorder.timeline.judging = True
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
            self.recorder.timeline.judge(step)
            say(describe_step(self._reported, step))
            self._store_verdict()

    def _store_verdict(self) -> None:
        if self.search is not None and self.search.steps:
            self.recorder.plateau = self.search.verdict().as_dict(self.measurements)

    def _finish(self) -> None:
        self._finished = True
        self._store_verdict()
        if self.search is not None and self.search.steps and not environment_options(self.environment).sm_closing:
            say(self.search.verdict().text(self.measurements))  # else `sm-locust run` states it once, closing
        reason = self.stop_reason
        if reason is None and self.search is not None and self.search.done:
            reason = self.search.verdict().stop_reason
        if reason:
            say(f"stopped: {reason}")
            extra = getattr(self.recorder, "extra", None)
            if isinstance(extra, dict):
                extra["stop_reason"] = reason

    # -- user classes ----------------------------------------------------------------------------
    def closed_loop(self, users: int, spawn_rate: float | None = None):
        """(users, spawn_rate[, classes]): every loaded user class except the open-loop rate tokens."""
        rate = min(MAX_SPAWN_RATE, spawn_rate or MAX_SPAWN_RATE)  # up or down (Locust stops users at this rate too)
        classes = self.active_runner.user_classes
        closed = [c for c in classes if not issubclass(c, OpenLoopUser)]
        if not closed:
            raise UsageError("no closed-loop user class is loaded (only OpenLoopUser): add locustfiles/sagemaker.py")
        if len(closed) == len(classes):
            return users, rate
        return users, rate, closed

    def open_loop(self, rate: float):
        """(users, spawn_rate, [OpenLoopUser]) offering `rate` req/s; records the exact offered rate."""
        classes = [c for c in self.active_runner.user_classes if issubclass(c, OpenLoopUser)]
        if not classes:
            raise UsageError("open loop needs OpenLoopUser among the user classes: add the open or plateau shape "
                             "locustfile (sm_locust/locustfiles/open_shape.py)")
        assert self.settings is not None  # read on the first tick, before any load is decided
        per_user = self.settings.open_loop().rate_per_user
        users = max(1, round(rate / per_user))
        self.recorder.current_target_rate = users * per_user
        self.recorder.current_target_users = users  # the step's users: asked for, whatever the spawn reached
        # Rate tokens cost nothing to start, but Locust warns above 100 users/s: a change of more
        # than 100 tokens takes a few seconds, marked as spawning and left out of the step.
        return users, min(MAX_SPAWN_RATE, max(1.0, float(users))), classes[:1]

    def oversaturated(self, seconds: list) -> str | None:
        """`--stop-when-oversaturated`: why the run stops (shapes/saturation.py), else None. The seconds judged
        are the last ones with open-loop sends since the load last changed (users started or stopped)."""
        if self.settings is None or not self.settings.stop_when_oversaturated:
            return None
        window: list = []
        for second in reversed(seconds[-MAX_WINDOW_S:]):
            if second.spawning or second.sent is None:
                break
            window.append(second)
        window.reverse()
        verdict = judge([s.sent for s in window], [s.requests for s in window], [s.interval for s in window])
        return verdict.reason() if verdict is not None and verdict.oversaturated else None

    def open_loop_pause(self):
        """No open-loop sends (0 users) while the endpoint drains; these seconds belong to no step."""
        self.recorder.current_target_rate = None
        self.recorder.current_target_users = None
        classes = [c for c in self.active_runner.user_classes if issubclass(c, OpenLoopUser)]
        return 0, MAX_SPAWN_RATE, classes[:1]
