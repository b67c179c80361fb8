"""`AsyncSearchShape`: an asynchronous endpoint's capacity by arrival rate (`--shape async`; docs/async.md).

Open-loop steps of `--step-seconds` each: `--start-rps`, then each step `--start-rps` more, up to
`--max-rps`. Each call waits for its result (`--async-result s3|sqs:...`, needed), and the client's
backlog (calls accepted, result not yet seen: `transport.asyncwait.AsyncLedger.backlog`) is sampled
once a second; at the end of a step the pure rule (`plateau.asyncsearch`) judges its slope, and the
first step whose backlog grows (its slope's 95 % interval above 0) ends the run: the capacity is the
rate before it. One line per step; the steps and the capacity go to summary.json `async_search`.

With `--time-to-result-slo-ms` (at `--slo-percentile`), each step's time to result is judged too
(`plateau.asyncslo`): the calls accepted from `settle_s` after the step began to the SLO before its
judgment (on a master, the workers' 3-s report interval earlier still: the calls it knows of may be
that old), those still awaited counted above the SLO. A step whose verdict the interval cannot give is
held another `--step-seconds`, at most twice (`plateau.asyncsearch.MAX_EXTENSIONS`).
"""

from __future__ import annotations

import math

from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner

from sm_locust.config.options import environment_options
from sm_locust.errors import UsageError
from sm_locust.plateau.asyncsearch import AsyncRateSearch
from sm_locust.plateau.asyncslo import SloJudgement, StepResults, TimeToResultSlo, judge_slo
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
        slo = (None if settings.time_to_result_slo_ms is None
               else TimeToResultSlo(settings.slo_percentile, settings.time_to_result_slo_ms))
        self.rates = AsyncRateSearch(settings.start_rps, settings.start_rps, settings.max_rps, slo=slo)
        self.lag_s = WORKER_REPORT_INTERVAL if isinstance(self.active_runner, MasterRunner) else 0.0
        self.extensions = 0
        self.step_calls = 0  # the ledger's calls before the step began: the step's own come after them
        self.step_s = settings.step_seconds
        self.max_duration_s = settings.max_duration_s
        self.ledger = AsyncLedger.for_environment(self.environment)
        self.started: float | None = None
        self.step_started = 0.0
        self.samples: list[float] = []
        stops = "the backlog grows" if slo is None else (
            f"the backlog grows or the {slo.label} is above {slo.max_ms:g} ms")
        say(f"async search: {settings.start_rps:g} req/s, +{settings.start_rps:g} each {self.step_s:g} s step, "
            f"up to {settings.max_rps:g} req/s; stops when {stops}")

    def _store(self) -> None:
        extra = getattr(self.recorder, "extra", None)
        if isinstance(extra, dict):
            extra["async_search"] = self.rates.as_dict()

    def _slo_judgement(self, now: float) -> SloJudgement | None:
        """The step's time to result against the SLO so far (None without an SLO)."""
        slo = self.rates.slo
        if slo is None:
            return None
        first = math.ceil(self.step_started + self.rates.settle_s)
        end = math.floor(now - slo.max_ms / 1000.0 - self.lag_s)
        calls = self.ledger.calls[self.step_calls:]
        return judge_slo(slo, StepResults.of(calls, first, end, self.ledger.awaited_by_second()))

    def decide(self, now, seconds):
        if self.started is None:
            self.started = self.step_started = now
            self.step_calls = len(self.ledger.calls)
        if self.max_duration_s is not None and now - self.started >= self.max_duration_s:
            self.stop_reason = f"max duration {self.max_duration_s:g} s reached (--max-duration)"
            return None
        in_step = now - self.step_started
        if int(in_step) > len(self.samples):  # one sample per whole second of the step
            self.samples.append(float(self.ledger.backlog))
        if in_step >= self.step_s * (1 + self.extensions):
            judged = self._slo_judgement(now)
            if self.rates.extend(self.samples, judged, self.extensions):
                self.extensions += 1
                say(f"step {len(self.rates.steps) + 1}: {self.rates.rate_rps:g} req/s held {self.step_s:g} s more: "
                    f"{judged.reason() if judged is not None else ''}")
                return self.open_loop(self.rates.rate_rps)
            step = self.rates.judge(self.samples, judged, self.extensions)
            low, high = step.slope.interval.low, step.slope.interval.high
            slope = "n/a" if step.slope.slope is None else f"{step.slope.slope:+.2f}/s"
            interval = "" if low is None or high is None else f" (95 % {low:+.2f} to {high:+.2f})"
            verdict = step.slope.verdict if judged is None else (
                f"{step.slope.verdict}; {judged.reason()}: {judged.verdict}")
            say(f"step {len(self.rates.steps)}: {step.rate_rps:g} req/s, backlog {number(step.backlog_last, 0)}, "
                f"slope {slope}{interval}: {verdict}")
            self._store()
            if self.rates.stop_reason is not None:
                reason = self.rates.inconclusive_reason
                self.stop_reason = self.rates.stop_reason + ("" if reason is None else f"; INCONCLUSIVE: {reason}")
                return None
            self.step_started, self.samples, self.extensions = now, [], 0
            self.step_calls = len(self.ledger.calls)
        return self.open_loop(self.rates.rate_rps)
