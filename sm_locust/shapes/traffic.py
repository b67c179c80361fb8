"""`TrafficShape`: open-loop rate phases (`--traffic FILE`), the load of an autoscaling test.

Each phase holds an arrival rate for its duration (`sm_locust.plateau.rates`), sent by the open-loop
rate tokens (`OpenLoopUser`): the sends keep their schedule whatever the endpoint does, so instances
that are still starting show up as latency and queueing, not as a slower client. Durations are run
seconds; against a local fleet emulation they are emulated seconds, and `--time-scale S` (which
`sm-locust run` reads from the fleet) makes each phase last duration / S real seconds, while the
rate stays real requests per second. A phase of 0 req/s sends nothing. One progress line per phase;
the run stops when the last phase ends (or at `-t` / `--max-duration`, if sooner). It finds no
plateau (summary.json `plateau` stays null); the phases are written to summary.json `traffic`.
"""

from __future__ import annotations

from sm_locust.shapes.base import SmLocustShape, say
from sm_locust.shapes.settings import ShapeSettings


class TrafficShape(SmLocustShape):
    """Open-loop rate phases."""

    shape_name = "traffic"  # its name in SHAPES, and the web UI form group of its own options

    def start(self, settings: ShapeSettings) -> None:
        self.traffic = settings.rate_phases()
        self.time_scale = settings.time_scale or 1.0
        self.max_duration_s = settings.max_duration_s
        self.started: float | None = None
        self.phase: int | None = None
        real = self.traffic.duration_s / self.time_scale
        clock = f" (x{self.time_scale:g}: {real:.0f} s of real time)" if self.time_scale != 1 else ""
        say(f"traffic: {len(self.traffic.phases)} phase{'s' if len(self.traffic.phases) != 1 else ''}, "
            f"{self.traffic.duration_s:g} s{clock}, {settings.open_loop().arrival} arrivals")
        extra = getattr(self.recorder, "extra", None)
        if isinstance(extra, dict):
            extra["traffic"] = {"phases": self.traffic.as_list(), "time_scale": self.time_scale}

    def decide(self, now, seconds):
        if self.started is None:
            self.started = now
        elapsed = now - self.started
        if self.max_duration_s is not None and elapsed >= self.max_duration_s:
            self.stop_reason = f"max duration {self.max_duration_s:g} s reached (--max-duration)"
            return None
        run_s = elapsed * self.time_scale
        index = self.traffic.phase_at(run_s)
        if index is None:
            self.stop_reason = f"traffic finished ({self.traffic.duration_s:g} s)"
            return None
        phase = self.traffic.phases[index]
        if index != self.phase:
            self.phase = index
            say(f"phase {index + 1}/{len(self.traffic.phases)} at {run_s:.0f} s: {phase.describe()}")
        if phase.rps <= 0:
            return self.open_loop_pause()
        return self.open_loop(phase.rps)
