"""`TraceShape`: replay a request trace (`--trace FILE`) open-loop, then stop.

It starts one `TraceReplayUser`, whose process's `TraceReplay` (sm_locust.users.trace) sends each
traced request at its time; the run ends when every request has been answered (or at `-t` /
`--max-duration`). One Locust process replays the whole trace. It finds no plateau; summary.json
`trace` says what was replayed and how late the sends left.
"""

from __future__ import annotations

from sm_locust.errors import UsageError
from sm_locust.shapes.base import SmLocustShape, say
from sm_locust.shapes.settings import ShapeSettings
from sm_locust.users.trace import TraceReplayUser, replay_of
from sm_locust.util.formatting import duration


class TraceShape(SmLocustShape):
    """One replaying user until the trace is done."""

    shape_name = "trace"

    def start(self, settings: ShapeSettings) -> None:
        self.max_duration_s = settings.max_duration_s
        self.started: float | None = None
        self.announced = False

    def decide(self, now, seconds):
        if self.started is None:
            self.started = now
        replay = replay_of(self.environment)
        if replay is not None:
            self._record(replay)
            if not self.announced:
                self.announced = True
                trace = replay.pool.trace
                say(f"trace: {len(trace.rows):,} requests over {duration(trace.duration_s)}"
                    + (f" (x{replay.time_scale:g})" if replay.time_scale != 1 else ""))
            if replay.done:
                self.stop_reason = (f"trace replayed: {len(replay.lags_s):,} of {len(replay.pool):,} requests sent "
                                    f"in {duration(now - self.started)}")
                return None
        if self.max_duration_s is not None and now - self.started >= self.max_duration_s:
            self.stop_reason = f"max duration {self.max_duration_s:g} s reached (--max-duration)"
            return None
        reason = self.oversaturated(seconds)
        if reason is not None:
            self.stop_reason = reason
            return None
        classes = [c for c in self.active_runner.user_classes if issubclass(c, TraceReplayUser)]
        if not classes:
            raise UsageError("--trace needs the trace locustfile's user (sm_locust/locustfiles/trace_shape.py)")
        return 1, 1.0, classes[:1]

    def stop(self, now, seconds, reason):
        replay = replay_of(self.environment)
        if replay is not None:
            self._record(replay)
        super().stop(now, seconds, reason)

    def _record(self, replay) -> None:
        extra = getattr(self.recorder, "extra", None)
        if isinstance(extra, dict):
            extra["trace"] = replay.describe()
