"""What the recorder keeps of a running test: only what decisions and summary.json need, so a week
of 1-s samples costs the memory of a few minutes.

`RunTimeline` is a pure object fed `Second`s in time order. It keeps the last `EXACT_S` seconds
exactly (`recent`, `view()`), the step under way (older seconds merged into at most `MAX_BLOCKS`
blocks), each finished step's record (the search's own measurements when it `judge`s), the whole
run in at most `MAX_BLOCKS` blocks (`run_seconds()`) and one record per hour (`hours()`). Counts
and histograms are exact sums; a blocked step's warm-up and stability cuts fall within
1/`MAX_BLOCKS` of the step, and steps up to `EXACT_S` long are measured exactly.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from datetime import datetime

from sm_locust.measure.looplag import merge_counts
from sm_locust.measure.steady import (
    MODE_RATE,
    MODE_USERS,
    StepMeasurement,
    histogram_percentile,
    measure_step,
    steady_window,
)
from sm_locust.measure.timeline import Second
from sm_locust.measure.workercpu import WorkerCpu
from sm_locust.record.summary import RECORDER_SUBWINDOW_S, iso, step_record

EXACT_S = 600  # the last 10 minutes are kept second by second
MAX_BLOCKS = 256  # older seconds of a step: at most this many merged blocks
HOUR_S = 3600.0


def _add_optional(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


class _Block:
    """Consecutive seconds of one step merged: counts and histogram summed, CPU averaged, the fewest users kept."""

    __slots__ = ("t", "users", "target_rate", "target_users", "requests", "failures", "hist", "interval", "cpu_sum",
                 "cpu_n", "wait_sum", "wait_n", "sent", "late", "dropped", "backoffs", "loop_lag", "workers", "n")

    def __init__(self, s: Second):
        self.t, self.users, self.target_rate, self.target_users = s.t, s.users, s.target_rate, s.target_users
        self.requests, self.failures, self.hist, self.interval = s.requests, s.failures, dict(s.hist), s.interval
        self.cpu_sum = s.client_cpu_pct or 0.0
        self.cpu_n = 0 if s.client_cpu_pct is None else 1
        self.wait_sum = s.client_wait_pct or 0.0
        self.wait_n = 0 if s.client_wait_pct is None else 1
        self.sent, self.late, self.dropped, self.backoffs = s.sent, s.late, s.dropped, s.backoffs
        self.loop_lag = merge_counts([s.loop_lag])  # a copy: merging later blocks must not change the second
        self.workers: dict[str, list[float]] | None = None  # a master's workers: [cpu sum, n, wait sum, n] each
        if s.client_workers is not None:
            self.workers = {w.worker: [w.cpu_pct or 0.0, float(w.cpu_pct is not None), w.wait_pct or 0.0,
                                       float(w.wait_pct is not None)] for w in s.client_workers}
        self.n = 1

    def merge(self, later: _Block) -> None:
        self.t, self.target_rate, self.target_users = later.t, later.target_rate, later.target_users
        self.users = min(self.users, later.users)  # a block keeps the fewest users that ran (`users_running`)
        self.requests += later.requests
        self.failures += later.failures
        hist = self.hist
        for bucket, count in later.hist.items():
            hist[bucket] = hist.get(bucket, 0) + count
        self.interval += later.interval
        self.cpu_sum += later.cpu_sum
        self.cpu_n += later.cpu_n
        self.wait_sum += later.wait_sum
        self.wait_n += later.wait_n
        self.sent = _add_optional(self.sent, later.sent)
        self.late = _add_optional(self.late, later.late)
        self.dropped = _add_optional(self.dropped, later.dropped)
        self.backoffs = _add_optional(self.backoffs, later.backoffs)
        self.loop_lag = merge_counts([self.loop_lag, later.loop_lag])
        if later.workers is not None:
            workers = self.workers if self.workers is not None else {}
            for worker, sums in later.workers.items():
                workers[worker] = [a + b for a, b in zip(workers.get(worker, [0.0] * 4), sums, strict=True)]
            self.workers = workers
        self.n += later.n

    def second(self) -> Second:
        return Second(t=self.t, users=self.users, spawning=False, requests=self.requests, failures=self.failures,
                      hist=self.hist, interval=self.interval,
                      client_cpu_pct=self.cpu_sum / self.cpu_n if self.cpu_n else None,
                      client_wait_pct=self.wait_sum / self.wait_n if self.wait_n else None,
                      target_rate=self.target_rate, sent=self.sent, late=self.late, dropped=self.dropped,
                      backoffs=self.backoffs, loop_lag=self.loop_lag, target_users=self.target_users,
                      client_workers=None if self.workers is None else tuple(
                          WorkerCpu(worker, cpu / cpu_n if cpu_n else None, wait / wait_n if wait_n else None)
                          for worker, (cpu, cpu_n, wait, wait_n) in self.workers.items()))


class _Step:
    """The step under way: its last `exact_s` seconds as they are, older ones in blocks."""

    def __init__(self, key, exact_s: int, max_blocks: int):
        self.key = key
        self.exact: deque[Second] = deque()
        self.blocks: list[_Block] = []
        self.per_block = 1
        self.exact_s = exact_s
        self.max_blocks = max_blocks

    def add(self, second: Second) -> None:
        self.exact.append(second)
        if len(self.exact) > self.exact_s:
            self._absorb(_Block(self.exact.popleft()))

    def _absorb(self, block: _Block) -> None:
        if self.blocks and self.blocks[-1].n < self.per_block:
            self.blocks[-1].merge(block)
        else:
            self.blocks.append(block)
        if len(self.blocks) > self.max_blocks:  # halve the resolution: merge neighbours
            merged = self.blocks[0::2]
            for left, right in zip(merged, self.blocks[1::2], strict=False):  # an odd last block stays as it is
                left.merge(right)
            self.blocks = merged
            self.per_block *= 2

    def older(self) -> list[Second]:
        return [block.second() for block in self.blocks]

    def seconds(self) -> list[Second]:
        return self.older() + list(self.exact)


class _Hour:
    """One hour of the run (from its start): sums, the merged histogram, the last user count."""

    def __init__(self, index: int):
        self.index = index
        self.requests = self.failures = self.backoffs = 0
        self.duration = 0.0
        self.hist: dict[int, int] = {}
        self.users = 0
        self.users_max = 0
        self.cpu_sum = 0.0
        self.cpu_n = 0
        self.targets: list[float] = []
        self.last_t = 0.0

    def add(self, s: Second) -> None:
        self.requests += s.requests
        self.failures += s.failures
        self.backoffs += s.backoffs or 0
        self.duration += s.interval
        hist = self.hist
        for bucket, count in s.hist.items():
            hist[bucket] = hist.get(bucket, 0) + count
        self.users = s.users
        self.users_max = max(self.users_max, s.users)
        if s.client_cpu_pct is not None:
            self.cpu_sum += s.client_cpu_pct
            self.cpu_n += 1
        if s.target_rate is not None and (not self.targets or self.targets[-1] != s.target_rate):
            self.targets.append(s.target_rate)
        self.last_t = s.t

    def record(self, origin: float, hour_s: float, full: bool) -> dict:
        duration = max(1e-9, self.duration)
        start = origin + self.index * hour_s
        pct = {p: histogram_percentile(self.hist, p) for p in (50.0, 95.0, 99.0)}
        record = {
            "hour": self.index + 1,
            "start": iso(start),
            "end": iso(start + hour_s if full else self.last_t),
            "duration_s": round(self.duration, 3),
            "users": self.users,
            "users_max": self.users_max,
            "requests": self.requests,
            "failures": self.failures,
            "successes": self.requests - self.failures,
            "rps": round(self.requests / duration, 3),
            "goodput_rps": round((self.requests - self.failures) / duration, 3),
            "error_rate": round(self.failures / self.requests, 6) if self.requests else 0.0,
            "p50_ms": pct[50.0], "p95_ms": pct[95.0], "p99_ms": pct[99.0],
            "client_cpu_pct": round(self.cpu_sum / self.cpu_n, 1) if self.cpu_n else None,
            "backoffs": self.backoffs,
        }
        if self.targets:
            record["target_rate"] = self.targets[-1]
        return record


def _spans(window: list[Second]) -> list[Second]:
    """Contiguous samples of a window merged into spans, as empty `Second`s (t = end, interval)."""
    spans: list[list[float]] = []
    for s in window:
        start = s.t - s.interval
        if spans and abs(spans[-1][1] - start) < 0.01:
            spans[-1][1] = s.t
        else:
            spans.append([start, s.t])
    return [Second(t=end, users=0, spawning=False, requests=0, failures=0, interval=end - start)
            for start, end in spans]


class RunTimeline:
    """The recorder's bounded memory of a run, fed one `Second` at a time (see the module doc)."""

    def __init__(self, origin: float | None = None, *, exact_s: int = EXACT_S, max_blocks: int = MAX_BLOCKS,
                 hour_s: float = HOUR_S):
        self.exact_s = exact_s
        self.max_blocks = max_blocks
        self.hour_s = hour_s
        self.reset(origin)

    def reset(self, origin: float | None = None) -> None:
        """Forget everything: a new test starts at `origin` (epoch s; None: the first second's start)."""
        self.origin = origin
        self.mode = MODE_USERS
        self.count = 0
        self.recent: deque[Second] = deque(maxlen=self.exact_s)
        self._done: list[tuple[dict, list[Second]]] = []
        self._step: _Step | None = None
        self._run = _Step(None, 0, self.max_blocks)
        self._judged: list[tuple[dict, list[Second]]] = []
        self._judged_until = -math.inf  # the end (epoch s) of the last judged step
        self.judging = False  # a shape's search judges the steps (`judge`)
        self._hours: list[dict] = []
        self._hour: _Hour | None = None

    def add(self, second: Second) -> list[dict]:
        """Take the next second; returns the hour records it closed (usually none)."""
        if self.origin is None:
            self.origin = second.t - second.interval
        self.count += 1
        self.recent.append(second)
        self._run.add(second)
        closed = self._add_hour(second)
        self._add_step(second)
        return closed

    def extend(self, seconds: Iterable[Second]) -> list[dict]:
        closed: list[dict] = []
        for second in seconds:
            closed += self.add(second)
        return closed

    # -- steps ------------------------------------------------------------------------------------
    def _add_step(self, s: Second) -> None:
        if self.mode == MODE_USERS and s.target_rate is not None:
            self.mode = MODE_RATE  # open loop after all: cut by target rate from the start (timeline_mode)
            self._done, self._step = [], None
        key = s.users if self.mode == MODE_USERS else s.target_rate
        if s.spawning or key is None or s.users <= 0 or (self.mode == MODE_USERS and key <= 0):
            self._close_step()
            return
        if self._step is not None and key != self._step.key:
            self._close_step()
        if self._step is None:
            self._step = _Step(key, self.exact_s, self.max_blocks)
        self._step.add(s)

    def _close_step(self) -> None:
        if self._step is not None:
            self._done.append(self._measure(self._step))
            self._step = None

    def _measure(self, step: _Step) -> tuple[dict, list[Second]]:
        seconds = step.seconds()
        record = step_record(measure_step(seconds, mode=self.mode, min_subwindow_s=RECORDER_SUBWINDOW_S))
        return record, _spans(steady_window(seconds) or seconds)

    def judge(self, step: StepMeasurement) -> None:
        """A step as a shape's search judged it: from now on the steps are the judged ones."""
        self.judging = True
        self._judged.append((step_record(step), _spans(step.window)))
        self._judged_until = max(self._judged_until, step.t_end)

    @property
    def step_index(self) -> int:
        """The step under way, counted from 1 (the last one reached while users spawn); 0 before the first."""
        return len(self._done) + (1 if self._step is not None else 0)

    def measured_steps(self) -> list[tuple[dict, list[Second]]]:
        """(summary.json record, steady window) of every step: the judged ones when a search judges
        them, then (marked `"judged": false`) the steps cut by user count that began after the last
        judged one (the step under way at a checkpoint, or one the run's end cut short before it was
        judged); without a search, the cut by user count with the one under way measured as it
        stands. A window is its time spans as empty `Second`s (t = end, interval = length): what the
        LLM figures are cut by (`record.llm.LlmStats.annotate`), without the step's samples."""
        cut = self._done + ([self._measure(self._step)] if self._step is not None else [])
        if not self.judging:
            return cut
        tail = [({**record, "judged": False}, window) for record, window in cut
                if datetime.fromisoformat(record["start"]).timestamp() >= self._judged_until - 1e-3]
        return list(self._judged) + tail

    def steps(self) -> list[dict]:
        return [record for record, _window in self.measured_steps()]

    def run_seconds(self) -> list[Second]:
        """The whole run so far in at most `max_blocks` merged blocks (whole-run intervals)."""
        return self._run.seconds()

    # -- hours ------------------------------------------------------------------------------------
    def _add_hour(self, s: Second) -> list[dict]:
        assert self.origin is not None  # add() sets it from the first second
        index = max(0, int((s.t - s.interval / 2 - self.origin) // self.hour_s))
        closed: list[dict] = []
        if self._hour is not None and index != self._hour.index:
            record = self._hour.record(self.origin, self.hour_s, full=True)
            self._hours.append(record)
            closed.append(record)
            self._hour = None
        if self._hour is None:
            self._hour = _Hour(index)
        self._hour.add(s)
        return closed

    def hours(self) -> list[dict]:
        """One record per hour of the run so far; the hour under way (partial) last."""
        if self._hour is None or self.origin is None:
            return list(self._hours)
        return self._hours + [self._hour.record(self.origin, self.hour_s, full=False)]

    # -- views ------------------------------------------------------------------------------------
    def view(self) -> list[Second]:
        """What a shape measures its step under way from: the step's older blocks, then the last
        `exact_s` seconds as they were (earlier steps are gone)."""
        if self._step is not None and self._step.blocks:
            return self._step.older() + list(self.recent)
        return list(self.recent)

    def last(self, n: int) -> list[Second]:
        """The last `n` seconds (n <= exact_s)."""
        if n >= len(self.recent):
            return list(self.recent)
        return list(self.recent)[-n:]
