"""`RunRecorder`: the Locust listener that samples the timeline and writes the run folder files.

Runs on the local runner or the master. Once a second it appends a `Second` of deltas to
`timeline.jsonl`; `summary.json` is rewritten atomically at start, every `checkpoint_seconds()`
(`complete: false`) and at stop (`complete: true`), so a killed run loses at most the last minute.
Totals come from the in-memory stats, not the CSVs (docs/facts.md, Locust). Memory stays flat
(`record.accumulate.RunTimeline`). Only logical invocations count (`invocation.is_invocation`): TTFT,
InterChunk and `/part` entries are not requests. Each `Second` also carries what judges the client:
generator CPU, `client_wait_pct` (on a master, one worker's own pair, and each worker's: `client_workers`),
open-loop send counts, loop lag and CPU throttling.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
import time
from pathlib import Path

import gevent
from locust.runners import STATE_SPAWNING, MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV, StatsEntry

import psutil

from sm_locust.invocation import error_code, is_invocation, is_latency_series
from sm_locust.measure.looplag import merge_counts
from sm_locust.measure.steady import histogram_percentile, intervals_dict, merge_histograms, window_intervals
from sm_locust.measure.timeline import Second
from sm_locust.measure.workercpu import WorkerCpu, judged
from sm_locust.mix.spec import TARGET_MODEL
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.asyncsummary import AsyncSummary
from sm_locust.record.llm import LlmStats
from sm_locust.record.looplag import LoopLagMonitor
from sm_locust.record.progress import ProgressSample
from sm_locust.record.schedwait import SchedWait, WorkerWaits
from sm_locust.record.summary import build_summary, write_json
from sm_locust.record.targets import TargetStats
from sm_locust.record.timeline import TIMELINE_JSONL, TimelineWriter
from sm_locust.record.watermark import ReportWatermarks
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.transport.inflight import StoppedRequests
from sm_locust.users.backoff import ConnectionBackoff
from sm_locust.users.openloop import OpenLoopCounters, offered_rate
from sm_locust.util.formatting import MISSING, is_missing
from sm_locust.util.outputs import atomic_file

log = logging.getLogger(__name__)
SAMPLE_INTERVAL_S = 1.0
MASTER_LAG_S = 4  # on a master, second S is appended at most this long after it (record/watermark.py)
CHECKPOINT_ENV = "SM_LOCUST_CHECKPOINT_SECONDS"
DEFAULT_CHECKPOINT_S = 60.0
KEEP_PER_SECOND_S = 120  # Locust's per-second counters older than this are dropped (current_rps reads ~12 s)


def checkpoint_seconds(env=None) -> float:
    """How often summary.json is rewritten while the test runs: `SM_LOCUST_CHECKPOINT_SECONDS`
    (tests use ~2 s), else 60 s. A value that is not a positive number is ignored."""
    value = (os.environ if env is None else env).get(CHECKPOINT_ENV, "")
    try:
        seconds = float(value)
    except ValueError:
        return DEFAULT_CHECKPOINT_S
    return seconds if seconds > 0 else DEFAULT_CHECKPOINT_S


def trim_per_second(stats, keep_s: float = KEEP_PER_SECOND_S, now: float | None = None) -> None:
    """Drop Locust's per-second request / failure counts older than `keep_s` from every entry (Locust
    keeps one per second for the whole run; only the last ~12 s are read: current rps, and on a
    master the recorder's last few seconds)."""
    oldest = int((time.time() if now is None else now) - keep_s)
    for entry in [stats.total, *stats.entries.values()]:
        for counts in (entry.num_reqs_per_sec, entry.num_fail_per_sec):
            if counts and min(counts) < oldest:
                for second in [k for k in counts if k < oldest]:
                    del counts[second]


def counted_entry(stats):
    """Locust's total over logical invocations only (`is_invocation`): without TTFT / InterChunk
    entries (a stream would count three times) and `--split` parts (K + 1 times). When every entry
    is an invocation: `stats.total` itself."""
    entries = list(stats.entries.values())
    if all(is_invocation(e.method, e.name) for e in entries):
        return stats.total
    counted = StatsEntry(stats, "Counted", "")
    for entry in entries:
        if is_invocation(entry.method, entry.name):
            counted.extend(entry)
    return counted


def _percentiles(entry) -> dict:
    pct = entry.get_response_time_percentile
    count = entry.num_requests
    return {"p50_ms": pct(0.5) if count else None, "p95_ms": pct(0.95) if count else None,
            "p99_ms": pct(0.99) if count else None}


def latency_series_record(entry) -> dict:
    """summary.json's figures of one latency series (TTFT, InterChunk): a count of measurements, not requests."""
    count = entry.num_requests
    return {"count": count, **_percentiles(entry),
            "avg_ms": round(entry.total_response_time / count, 3) if count else None}


def per_name(stats, duration_s: float) -> dict[str, dict]:
    """Exact per-name figures from the in-memory stats (summary.json `by_name`, docs/summary.md).

    A name's invocation entries (whatever their request type) are merged into `requests`,
    `failures`, `successes`, `rps`, `goodput_rps`, percentiles and `errors`; its latency series
    (TTFT, InterChunk) sit apart in `latency_series`. Fan-out parts keep their own name
    (`ep/part`), so the endpoint's view can be gated too.
    """
    duration_s = max(1e-9, duration_s)
    invocations: dict[str, StatsEntry] = {}
    types: dict[str, list[str]] = {}
    series: dict[str, dict[str, StatsEntry]] = {}
    for entry in stats.entries.values():
        if is_latency_series(entry.method):
            series.setdefault(entry.name, {})[entry.method] = entry
            continue
        merged = invocations.get(entry.name)
        if merged is None:
            merged = invocations[entry.name] = StatsEntry(stats, entry.name, "", use_response_times_cache=False)
        merged.extend(entry)
        types.setdefault(entry.name, []).append(entry.method)
    errors: dict[str, dict[str, int]] = {}
    for err in stats.errors.values():
        if is_latency_series(err.method):
            continue
        by_code = errors.setdefault(err.name, {})
        code = error_code(err.error)
        by_code[code] = by_code.get(code, 0) + err.occurrences
    out: dict[str, dict] = {}
    for name in sorted(set(invocations) | set(series)):
        entry = invocations.get(name)
        requests = entry.num_requests if entry else 0
        failures = entry.num_failures if entry else 0
        record = {
            "requests": requests, "failures": failures, "successes": requests - failures,
            "rps": round(requests / duration_s, 3), "goodput_rps": round((requests - failures) / duration_s, 3),
            **(_percentiles(entry) if entry else {"p50_ms": None, "p95_ms": None, "p99_ms": None}),
            "request_types": sorted(types.get(name, [])),
            "errors": dict(sorted(errors.get(name, {}).items(), key=lambda kv: (-kv[1], kv[0]))),
        }
        if name in series:
            record["latency_series"] = {kind: latency_series_record(e) for kind, e in sorted(series[name].items())}
        out[name] = record
    return out


def latency_series(stats) -> dict[str, dict]:
    """Each latency series (TTFT, InterChunk) over every name: summary.json `latency_series`."""
    merged: dict[str, StatsEntry] = {}
    for entry in stats.entries.values():
        if is_latency_series(entry.method):
            total = merged.get(entry.method)
            if total is None:
                total = merged[entry.method] = StatsEntry(stats, entry.method, entry.method,
                                                          use_response_times_cache=False)
            total.extend(entry)
    return {kind: latency_series_record(entry) for kind, entry in sorted(merged.items())}


class RunRecorder:
    """Registers its own listeners on `environment.events` (locust-plugins listener style)."""

    def __init__(self, environment, out_dir: str | Path | None, endpoint: str = "", extra: dict | None = None,
                 progress_every_s: float = 0.0):
        self.environment = environment
        self.progress_every_s = progress_every_s
        self.out_dir = Path(out_dir) if out_dir else None
        self.endpoint = endpoint
        self.extra = dict(extra or {})
        self.timeline = RunTimeline()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.plateau: dict | None = None
        self.current_target_rate: float | None = None
        self.current_target_users: int | None = None  # what the shape asked for (open loop), for the steps' `users`
        self._greenlet = None
        self._process: psutil.Process | None = None
        self._sched = SchedWait()
        self._last: tuple[int, int, dict] = (0, 0, {})
        self._last_t = 0.0
        self._last_sends = (0, 0, 0)
        self._last_backoffs = 0
        self._states: dict[int, Second] = {}  # master: the real-time sample of each second
        self._pending = Second(t=0.0, users=0, spawning=False, requests=0, failures=0)
        self._next_second: int | None = None
        self._writer: TimelineWriter | None = None
        self.checkpoint_s = checkpoint_seconds()
        self._checkpoint_at = 0.0
        self._hour_errors: dict[str, int] = {}  # errors by code when the hour under way began
        self.open_loop = OpenLoopCounters.for_environment(environment)
        self.backoff = ConnectionBackoff.for_environment(environment)
        self.llm = LlmStats.for_environment(environment)  # tokens, TTFT, ITL (record/llm.py)
        self.targets = TargetStats.for_environment(environment)  # a mix's per-target figures (record/targets.py)
        self.loop_lag = LoopLagMonitor.for_environment(environment)  # the generator's own delay (record/looplag.py)
        self.worker_waits = WorkerWaits.for_environment(environment)  # workers' CPU wait, on a master
        self.watermarks = ReportWatermarks.for_environment(environment)  # how far workers reported, on a master
        self.watermarks.on_advance = self._append_reported
        self.clock = time.time  # the master's clock when a report arrives (tests: a simulated one)
        events = environment.events
        events.test_start.add_listener(self.on_test_start)
        events.test_stop.add_listener(self.on_test_stop)
        events.quitting.add_listener(self.on_quitting)
        events.quit.add_listener(self.on_quit)
        self.stopped = StoppedRequests.for_environment(environment)  # in flight at the stop (transport/inflight.py)
        self.async_calls = AsyncLedger.for_environment(environment)  # --async-result s3 (transport/asyncwait.py)

    @property
    def seconds(self) -> list[Second]:
        """The step under way and the last 10 minutes (`RunTimeline.view()`): what a shape measures from."""
        return self.timeline.view()

    @seconds.setter
    def seconds(self, seconds) -> None:  # tests: a timeline to start from
        self.timeline.reset(self.started_at)
        self.timeline.extend(seconds)

    # -- listeners --------------------------------------------------------------------------
    def on_test_start(self, environment, **_kw) -> None:
        if isinstance(environment.runner, WorkerRunner):
            return
        self.started_at = time.time()
        self.timeline.reset(self.started_at)
        self._sched = SchedWait()
        self._sched.percent()  # the baseline: the first second's share is measured from here
        self.ended_at = None
        total = counted_entry(environment.runner.stats)
        self._last = (total.num_requests, total.num_failures, dict(total.response_times))
        self._last_t = self.started_at
        self._last_sends = (0, 0, 0)
        self._last_backoffs = 0
        self._states = {}
        self._pending = Second(t=0.0, users=0, spawning=False, requests=0, failures=0)
        self._next_second = None
        self._hour_errors = self.totals()[1]
        self._open_timeline()
        self.checkpoint()  # the folder holds a summary.json from the first second on
        self._greenlet = gevent.spawn(self._sample_forever)

    def on_test_stop(self, environment, **_kw) -> None:
        if isinstance(environment.runner, WorkerRunner) or self.started_at is None or self.ended_at is not None:
            return  # a second test_stop (quitting after a stop) adds nothing: the timeline is closed
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        # headless, Locust quits next and `on_quit` appends what the workers' last reports complete: a
        # master holds back the seconds they may still add to (the web UI may never quit: it does not)
        self.sample(final=True, hold=bool(getattr(environment.parsed_options, "headless", False)))
        self.current_target_rate = None
        self.current_target_users = None
        self.ended_at = time.time()
        self._close_timeline()
        self.write()

    def on_quitting(self, environment, **_kw) -> None:
        if isinstance(environment.runner, WorkerRunner) or self.started_at is None:
            return
        self.ended_at = self.ended_at or time.time()
        self._close_timeline()
        self.write()

    def on_quit(self, **_kw) -> None:
        """Locust's last word, after its users are stopped (a Ctrl+C stops them after `quitting`):
        summary.json and Locust's own CSVs are written once more from the same final stats, so the
        two agree and the requests cut short by the stop are counted."""
        if isinstance(self.environment.runner, WorkerRunner) or self.started_at is None:
            return
        self.late_reports()
        if self.out_dir is None:
            return
        self.write()
        rewrite_locust_csvs(self.environment)

    def late_reports(self) -> None:
        """On a master, the seconds its workers' last reports completed, appended after the stop.

        A run that ends by quitting (`--run-time`, a signal) fires test_stop before the workers' last
        reports arrive: Locust's quit stops without waiting for them, then gives them 0.5 s. On a busy
        machine those reports can hold most of a short run, which the totals count; its seconds (and
        the steps cut from them) are added to the timeline now, with the seconds a headless stop held back
        for them (`sample(hold=True)`), so summary.json's steps hold them too, each second whole."""
        runner = self.environment.runner
        if not isinstance(runner, MasterRunner) or self.started_at is None or self.ended_at is None:
            return
        total = counted_entry(runner.stats)
        arrived = max(total.num_reqs_per_sec, default=-1)
        if total.num_requests == self._last[0] and (self._next_second is None or arrived < self._next_second):
            return
        if self.out_dir is not None:
            self._writer = TimelineWriter(self.out_dir / TIMELINE_JSONL, append=True)
        try:
            self.sample(final=True)
        finally:
            self._close_timeline()

    # -- sampling ---------------------------------------------------------------------------
    def _sample_forever(self) -> None:
        while True:
            gevent.sleep(SAMPLE_INTERVAL_S - (time.time() - self._last_t) % SAMPLE_INTERVAL_S)
            try:
                self.sample()
                if time.time() - self._checkpoint_at >= self.checkpoint_s - 1e-3:
                    self.checkpoint()
            except Exception:  # never let sampling kill the test
                log.exception("sm-locust: timeline sampling failed")

    def checkpoint(self) -> None:
        """While the test runs: timeline.jsonl flushed, summary.json rewritten (`complete: false`),
        Locust's old per-second counters dropped."""
        self._checkpoint_at = time.time()
        trim_per_second(self.environment.runner.stats, now=self._checkpoint_at)
        if self._writer is not None:
            self._writer.flush()
        self.write(complete=False)

    def sample(self, final: bool = False, hold: bool = False) -> Second:
        """One second's sample: appended (local runner) or placed by completion second (master). `final`:
        the test stopped, every second a request completed in is appended; on a master, `hold` keeps
        back those the workers' watermarks do not cover yet (their last reports arrive after the stop)."""
        runner = self.environment.runner
        total = counted_entry(runner.stats)
        requests, failures, hist = total.num_requests, total.num_failures, dict(total.response_times)
        last_requests, last_failures, last_hist = self._last
        now = time.time()
        delta = {b: c - last_hist.get(b, 0) for b, c in hist.items() if c != last_hist.get(b, 0)}
        master = isinstance(runner, MasterRunner)
        # a master's workers ship their sends by second (placed in `_emit_master_seconds`); only what
        # came without its second is attached to the sample it arrived in
        sends = self.open_loop.unkeyed if master else self.open_loop.snapshot()
        sent, late, dropped = (a - b for a, b in zip(sends, self._last_sends, strict=True))
        backoffs = self.backoff.count
        open_loop = self.open_loop.active
        target = self.current_target_rate
        if target is None and open_loop:
            target = offered_rate(runner)
        cpu, wait, workers = self._client_figures(runner)
        second = Second(
            t=now,
            users=runner.user_count,
            spawning=runner.state == STATE_SPAWNING,
            requests=requests - last_requests,
            failures=failures - last_failures,
            hist=delta,
            interval=max(1e-6, now - self._last_t),
            client_cpu_pct=cpu,
            client_wait_pct=wait,
            client_workers=workers,
            target_rate=target,
            sent=sent if open_loop else None,
            late=late if open_loop else None,
            dropped=dropped if open_loop else None,
            backoffs=backoffs - self._last_backoffs,
            loop_lag=self.loop_lag.take_second(),
            async_backlog=self.async_calls.backlog if self.async_calls.active else None,
            target_users=self.current_target_users,
        )
        self._last = (requests, failures, hist)
        self._last_sends = sends
        self._last_backoffs = backoffs
        self._last_t = now
        if master:
            self._emit_master_seconds(second, total, final, hold)
        else:
            self._add(second)
        return second

    def _add(self, second: Second) -> None:
        """One second of the timeline: kept (bounded), appended to timeline.jsonl, progress lines."""
        closed = self.timeline.add(second)
        if self._writer is not None:
            self._writer.add(second)
        for hour in closed:
            self._close_hour(hour)
        if self.progress_every_s and self.timeline.count % max(1, round(self.progress_every_s)) == 0:
            self._print_progress()

    def _close_hour(self, hour: dict) -> None:
        """A full hour: its errors by code, and one progress line (a soak run's drift at a glance)."""
        errors = self.totals()[1]
        hour["errors"] = {code: n - self._hour_errors.get(code, 0) for code, n in errors.items()
                          if n > self._hour_errors.get(code, 0)}
        self._hour_errors = errors
        print(f"sm-locust: {hour_line(hour)}", flush=True)

    def _emit_master_seconds(self, now: Second, total, final: bool, hold: bool = False) -> None:
        """On a master, count each second's requests by when they COMPLETED on the workers.

        Workers report every second or few, so the master's totals move in lumps: a 24-s window would
        hold 8 or 9 reports per worker at 3 s (+-12 % on its rps) and every stability sub-window would
        look uneven. Locust merges each worker's per-second counts (`num_reqs_per_sec`, keyed by the
        completion second) into the master's total entry; second S is appended, with the load that
        was running at S, once every live worker's report watermark has reached S (checked here and when
        a report arrives: `_append_reported`), and at most `MASTER_LAG_S` after S by the master's clock
        (`record.watermark.appendable_through`). Histograms
        and loop lag have no per-second breakdown: what arrived is attached to the second appended then
        (their percentiles, not their rates, are used). Open-loop sends come by the second they were
        scheduled in (`OpenLoopCounters.take_seconds`) and are added to that second, so a step's
        offered rate per second is as even as on a local runner; sends for a second already appended
        go to the first one appended now, and a worker's sends shipped without seconds to the last.
        `final` appends through the last second a request completed in; with `hold`, only as far as the
        watermarks say is whole (the rest, and its sends, wait for `late_reports`).
        """
        second = int(now.t)
        self._states[second] = now
        pending = self._pending
        pending.hist = {b: pending.hist.get(b, 0) + now.hist.get(b, 0) for b in set(pending.hist) | set(now.hist)}
        pending.backoffs = (pending.backoffs or 0) + (now.backoffs or 0)
        pending.loop_lag = merge_counts([pending.loop_lag, now.loop_lag])
        if now.sent is not None:
            pending.sent = (pending.sent or 0) + now.sent
            pending.late = (pending.late or 0) + (now.late or 0)
            pending.dropped = (pending.dropped or 0) + (now.dropped or 0)
        self._append_master_seconds(second, now, total, final, hold)
        for old in [k for k in self._states if k < second - 30]:
            del self._states[old]

    def _append_reported(self) -> None:
        """A worker's report moved its watermark: on a master whose test runs, the seconds now whole are
        appended at once, with the load last sampled, rather than at the next 1-s sample (the shape, on
        its own 1-s tick, sees them up to a second sooner)."""
        runner = self.environment.runner
        if (not isinstance(runner, MasterRunner) or self.started_at is None or self.ended_at is not None
                or not self._states):
            return
        try:  # a listener's exception would mark Locust's run as failed: logged, as the sampling's are
            latest = self._states[max(self._states)]
            self._append_master_seconds(int(self.clock()), latest, counted_entry(self.environment.stats), final=False)
        except Exception:
            log.exception("sm-locust: timeline sampling failed")

    def _append_master_seconds(self, second: int, now: Second, total, final: bool, hold: bool = False) -> None:
        """The master's seconds now appendable at `second` (its clock), `now` the latest sample
        (`_emit_master_seconds`)."""
        pending = self._pending
        runner = self.environment.runner
        whole = self.watermarks.through(second, getattr(runner, "clients", None) or {}, MASTER_LAG_S)
        upto = whole
        if final:  # up to the last second a request completed in: later ones are after the users stopped
            upto = min(second, max(total.num_reqs_per_sec, default=upto))
            if hold:
                upto = min(upto, whole)
        if self._next_second is None:
            self._next_second = int(self.started_at or now.t)
        every = final and not hold
        keyed = self.open_loop.take_seconds(None if every else upto) if self._next_second <= upto else {}
        emitted_now: list[Second] = []
        while self._next_second <= upto:
            s = self._next_second
            self._next_second += 1
            state = self._state_at(s, now)
            has_sends = state.sent is not None or pending.sent is not None or bool(keyed)
            emitted = Second(
                t=float(s + 1), users=state.users, spawning=state.spawning,
                requests=total.num_reqs_per_sec.get(s, 0), failures=total.num_fail_per_sec.get(s, 0),
                hist={}, interval=1.0, client_cpu_pct=state.client_cpu_pct, client_wait_pct=state.client_wait_pct,
                client_workers=state.client_workers,
                target_rate=state.target_rate,
                sent=0 if has_sends else None, late=0 if has_sends else None, dropped=0 if has_sends else None,
                backoffs=0, async_backlog=state.async_backlog, target_users=state.target_users,
            )
            if self._next_second > upto:  # the last second emitted now carries what arrived
                emitted.hist = {b: c for b, c in pending.hist.items() if c}
                emitted.backoffs = pending.backoffs or 0
                emitted.loop_lag = pending.loop_lag
                if pending.sent is not None:
                    emitted.sent, emitted.late, emitted.dropped = pending.sent, pending.late, pending.dropped
                self._pending = Second(t=0.0, users=0, spawning=False, requests=0, failures=0)
            emitted_now.append(emitted)
        if emitted_now:
            first = int(emitted_now[0].t) - 1
            for s, counts in keyed.items():
                target = emitted_now[min(max(s - first, 0), len(emitted_now) - 1)]
                target.sent = (target.sent or 0) + counts[0]
                target.late = (target.late or 0) + counts[1]
                target.dropped = (target.dropped or 0) + counts[2]
        for emitted in emitted_now:
            self._add(emitted)

    def _state_at(self, s: int, now: Second) -> Second:
        """The load running at second `s`: the last sample at or before it (10 s back at most); for the
        run's first, partial second, before any sample, the first sample after it (the load being
        spawned), not the load running now."""
        before = next((self._states[k] for k in range(s, s - 10, -1) if k in self._states), None)
        if before is not None:
            return before
        after = min((k for k in self._states if k > s), default=None)
        return now if after is None else self._states[after]

    def _print_progress(self) -> None:
        window = self.timeline.last(max(1, round(self.progress_every_s)))
        if not window:
            return
        duration = sum(s.interval for s in window) or 1.0
        p95 = histogram_percentile(merge_histograms(s.hist for s in window), 95.0)
        elapsed = window[-1].t - (self.started_at or window[0].t)
        backoffs = sum(s.backoffs or 0 for s in window)
        sample = ProgressSample(elapsed_s=elapsed, users=window[-1].users,
                                rps=sum(s.requests for s in window) / duration,
                                goodput_rps=sum(s.successes for s in window) / duration, p95_ms=p95,
                                failures=sum(s.failures for s in window), backoffs=backoffs,
                                window_s=max(1, round(duration)))
        print(sample.line(), flush=True)

    def _client_figures(self, runner) -> tuple[float | None, float | None, tuple[WorkerCpu, ...] | None]:
        """Load-generator CPU %, CPU-wait % and, on a master, each worker's own pair.

        On a master: the pair of the worker it is judged on (`measure.workercpu.judged`), from the
        workers' last reports (every second); without any (workers without schedstat), the busiest
        worker's heartbeat CPU and no wait. Otherwise this process's CPU and wait."""
        if isinstance(runner, MasterRunner):
            workers = self.worker_waits.pairs(runner.clients.keys())
            pair = judged(workers or ())
            if pair is not None:
                return pair.cpu_pct, pair.wait_pct, workers
            usages = [w.cpu_usage for w in runner.clients.values() if getattr(w, "cpu_usage", None) is not None]
            return (float(max(usages)) if usages else None), None, None
        return self._process_cpu(), self._sched.percent(), None

    def _process_cpu(self) -> float | None:
        """This process's CPU % since the last call (None at the first)."""
        if self._process is None:
            self._process = psutil.Process()
            self._process.cpu_percent(None)
            return None
        return self._process.cpu_percent(None)

    # -- output -----------------------------------------------------------------------------
    def totals(self) -> tuple[dict, dict[str, int]]:
        """Logical invocations over the whole run (requests, failures, percentiles) and failures by code."""
        stats = self.environment.runner.stats
        total = counted_entry(stats)
        totals = {"requests": total.num_requests, "failures": total.num_failures, **_percentiles(total),
                  "in_flight_at_stop": self.stopped.count,
                  "ci95": intervals_dict(window_intervals(self.timeline.run_seconds()))}
        errors: dict[str, int] = {}
        for err in stats.errors.values():
            if not is_invocation(err.method, str(err.name)):  # a part's failure is its logical request's
                continue
            code = error_code(err.error)
            errors[code] = errors.get(code, 0) + err.occurrences
        return totals, errors

    def hours(self, errors: dict[str, int] | None = None) -> list[dict]:
        """summary.json's `hours`: the full hours (with their errors by code) and the one under way."""
        hours = self.timeline.hours()
        if hours and "errors" not in hours[-1]:
            errors = self.totals()[1] if errors is None else errors
            hours[-1]["errors"] = {code: n - self._hour_errors.get(code, 0) for code, n in errors.items()
                                   if n > self._hour_errors.get(code, 0)}
        return hours

    def summary(self, complete: bool | None = True) -> dict:
        """summary.json now: `complete` False for a checkpoint written while the test runs."""
        totals, errors = self.totals()
        started_at = self.started_at or time.time()
        ended_at = self.ended_at or time.time()
        stats = self.environment.runner.stats
        measured = self.timeline.measured_steps()
        summary = self.llm.annotate(build_summary(
            endpoint=self.endpoint,
            started_at=started_at,
            ended_at=ended_at,
            totals=totals,
            errors=errors,
            seconds=(),
            steps=[record for record, _window in measured],
            hours=self.hours(errors),
            complete=complete,
            plateau=self.plateau,
            extra=self.extra,
            open_loop=self.open_loop.as_dict() if self.open_loop.active else None,
            by_name=per_name(stats, ended_at - started_at),
            latency_series=latency_series(stats),
            backoff=self.backoff.as_dict(),
            loop_lag=self.loop_lag.figures(),
        ), (), started_at, ended_at, windows=[window for _record, window in measured])
        mix = self.extra.get("mix") or {}
        # --async-result (record/asyncsummary.py): at the end only, ~1.5 s per 100,000 calls would stall the
        # sampling every checkpoint; a run that asked for results and made no call says so with zeros (every
        # worker lost, say), not with no section
        if (self.async_calls.active or self.async_calls.wanted) and complete is not False:
            summary["async"] = AsyncSummary.from_calls(self.async_calls.calls, started_at, ended_at,
                                                       self.async_calls.dropped).to_json()
        return self.targets.annotate(summary, models=mix.get("field") == TARGET_MODEL)

    def write(self, complete: bool = True) -> None:
        if self.out_dir is None:
            return
        write_json(self.out_dir / "summary.json", self.summary(complete=complete))

    def _open_timeline(self) -> None:
        self._close_timeline()
        if self.out_dir is not None:
            self._writer = TimelineWriter(self.out_dir / TIMELINE_JSONL)

    def _close_timeline(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


RECORDER_ATTRIBUTE = "sm_locust_recorder"  # where a run's recorder hangs on Locust's Environment


def recorder_of(environment: object) -> RunRecorder | None:
    """The recorder attached to this Locust environment, if any."""
    return getattr(environment, RECORDER_ATTRIBUTE, None)


def attach_recorder(environment: object, recorder: RunRecorder) -> RunRecorder:
    """Hang `recorder` on the environment, where shapes, the locustfile and the workers' ledger find it."""
    setattr(environment, RECORDER_ATTRIBUTE, recorder)
    return recorder


def rewrite_locust_csvs(environment) -> None:
    """Rewrite locust_stats.csv, locust_failures.csv and locust_exceptions.csv (`--csv PREFIX`) from the
    stats as they are now. Locust's writer rewrites them once a second and does not run after the
    users stop: its last totals lagged the final ones by 2-3 %. Its own file handles hold nothing
    unwritten between two rewrites (each ends with a truncate, which flushes), so closing them later
    changes nothing. (The history CSV, appended once a second, is left as it is.)"""
    prefix = getattr(environment.parsed_options, "csv_prefix", None) if environment.parsed_options else None
    if not prefix:
        return
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    for suffix, write_rows in (("_stats.csv", stats_csv.requests_csv), ("_failures.csv", stats_csv.failures_csv),
                               ("_exceptions.csv", stats_csv.exceptions_csv)):
        try:
            with atomic_file(f"{prefix}{suffix}", "w", newline="") as handle:
                write_rows(csv.writer(handle))
        except OSError as exc:  # a full disk: Locust's own last write may be half a file; none is better
            with contextlib.suppress(OSError):
                os.unlink(f"{prefix}{suffix}")
            log.error("sm-locust: could not rewrite %s%s (%s); removed it rather than leave half a file", prefix,
                      suffix, exc)


def hour_line(hour: dict) -> str:
    """One hour of a long run on one line: load, throughput, latency, errors, client CPU."""
    def ms(key: str) -> str:
        value = hour.get(key)
        return MISSING if is_missing(value) else f"{value:.0f}"

    errors = hour.get("errors") or {}
    top = ", ".join(f"{code} {n}" for code, n in sorted(errors.items(), key=lambda kv: -kv[1])[:3])
    line = (f"hour {hour['hour']} ({iso_minutes(hour['start'])} .. {iso_minutes(hour['end'])}): users {hour['users']}, "
            f"{hour['rps']:.1f} req/s (goodput {hour['goodput_rps']:.1f}), p50/p95/p99 "
            f"{ms('p50_ms')}/{ms('p95_ms')}/{ms('p99_ms')} ms, errors {hour['failures']} "
            f"({hour['error_rate'] * 100:.2f} %{'; ' + top if top else ''})")
    if hour.get("client_cpu_pct") is not None:
        line += f", client CPU {hour['client_cpu_pct']:.0f} %"
    return line


def iso_minutes(text: str) -> str:
    """'2026-11-21T14:00:00.000Z' -> '14:00' (the hour line's times, UTC)."""
    return text[11:16] if len(text) >= 16 else text
