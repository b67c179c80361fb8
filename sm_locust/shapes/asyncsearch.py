"""`AsyncSearchShape`: an asynchronous endpoint's capacity by arrival rate (`--shape async`; docs/async.md).

Open-loop steps of `--step-seconds` each: `--start-rps`, then each step `--start-rps` more, up to
`--max-rps`. Each call waits for its result (`--async-result s3|sqs:...`, needed), and the client's
backlog (calls accepted, result not yet seen: `transport.asyncwait.AsyncLedger.backlog`) is sampled
once a second; at the end of a step the pure rule (`plateau.asyncsearch`) judges its slope, and the
first step whose backlog grows (its slope's 95 % interval above 0) ends the run: the capacity is the
rate before it. One line per step; the steps and the capacity go to summary.json `async_search`.
"""

from __future__ import annotations

from sm_locust.config.options import environment_options
from sm_locust.errors import UsageError
from sm_locust.plateau.asyncsearch import AsyncRateSearch
from sm_locust.shapes.base import SmLocustShape, say
from sm_locust.shapes.settings import ShapeSettings
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.util.formatting import number


class AsyncSearchShape(SmLocustShape):
    """Arrival-rate steps until the async backlog grows."""

    shape_name = "async"  # its name in SHAPES, and the web UI form group of its own options

    def start(self, settings: ShapeSettings) -> None:
        options = environment_options(self.environment)
        if not options.async_input_location or options.async_result == "none":
            raise UsageError("--shape async needs --async-input-location s3://... and --async-result s3 or "
                             "sqs:QUEUE_URL (the backlog is the calls waiting for their results)")
        self.rates = AsyncRateSearch(settings.start_rps, settings.start_rps, settings.max_rps)
        self.step_s = settings.step_seconds
        self.max_duration_s = settings.max_duration_s
        self.ledger = AsyncLedger.for_environment(self.environment)
        self.started: float | None = None
        self.step_started = 0.0
        self.samples: list[float] = []
        say(f"async search: {settings.start_rps:g} req/s, +{settings.start_rps:g} each {self.step_s:g} s step, "
            f"up to {settings.max_rps:g} req/s; stops when the backlog grows")

    def _store(self) -> None:
        extra = getattr(self.recorder, "extra", None)
        if isinstance(extra, dict):
            extra["async_search"] = self.rates.as_dict()

    def decide(self, now, seconds):
        if self.started is None:
            self.started = self.step_started = now
        if self.max_duration_s is not None and now - self.started >= self.max_duration_s:
            self.stop_reason = f"max duration {self.max_duration_s:g} s reached (--max-duration)"
            return None
        in_step = now - self.step_started
        if int(in_step) > len(self.samples):  # one sample per whole second of the step
            self.samples.append(float(self.ledger.backlog))
        if in_step >= self.step_s:
            step = self.rates.judge(self.samples)
            low, high = step.slope.interval.low, step.slope.interval.high
            slope = "n/a" if step.slope.slope is None else f"{step.slope.slope:+.2f}/s"
            interval = "" if low is None or high is None else f" (95 % {low:+.2f} to {high:+.2f})"
            say(f"step {len(self.rates.steps)}: {step.rate_rps:g} req/s, backlog {number(step.backlog_last, 0)}, "
                f"slope {slope}{interval}: {step.slope.verdict}")
            self._store()
            if self.rates.stop_reason is not None:
                self.stop_reason = self.rates.stop_reason
                return None
            self.step_started, self.samples = now, []
        return self.open_loop(self.rates.rate_rps)
