"""`OpenLoopShape`: a constant open-loop arrival rate (`--target-rps`) until `-t/--run-time` or `--max-duration`.

It asks for `--target-rps / --rate-per-user` `OpenLoopUser`s (rate tokens; see sm_locust.users.openloop):
each Locust process sends its share at intended times (`--arrival constant|poisson`) whatever the
response times, and latency runs from the intended send time. It finds no plateau (summary.json
`plateau` stays null); each step still records client CPU, sent rate, late and dropped sends.
"""

from __future__ import annotations

from sm_locust.errors import UsageError
from sm_locust.shapes.base import SmLocustShape, say
from sm_locust.shapes.settings import ShapeSettings


class OpenLoopShape(SmLocustShape):
    """Constant arrival rate."""

    shape_name = "open"  # its name in SHAPES, and the web UI form group of its own options

    def start(self, settings: ShapeSettings) -> None:
        if settings.target_rps is None:
            raise UsageError("the open shape needs --target-rps R (requests per second to send)")
        self.rate = settings.target_rps
        self.max_duration_s = settings.max_duration_s
        self.started = None
        say(f"open loop: {self.rate:g} req/s, {settings.open_loop().arrival} arrivals")

    def decide(self, now, seconds):
        if self.started is None:
            self.started = now
        if self.max_duration_s is not None and now - self.started >= self.max_duration_s:
            self.stop_reason = f"max duration {self.max_duration_s:g} s reached (--max-duration)"
            return None
        reason = self.oversaturated(seconds)
        if reason is not None:
            self.stop_reason = reason
            return None
        return self.open_loop(self.rate)
