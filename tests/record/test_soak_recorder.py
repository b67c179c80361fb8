"""The recorder's bounded memory (`record.accumulate.RunTimeline`) and timeline.jsonl, fed synthetic
seconds without Locust: steps measured while streaming equal those of the whole timeline, a long
step measured from merged blocks stays within a block of the exact figures, the memory held does
not grow with the hours fed, and the hourly records (and their progress line) are exact."""

from __future__ import annotations

import gc
import itertools
import tracemalloc

import pytest

from bench.recorder_memory import feed, histogram_pool, synthetic_seconds
from sm_locust.measure.steady import histogram_percentile, measure_step, merge_histograms
from sm_locust.measure.timeline import Second
from sm_locust.record.accumulate import EXACT_S, RunTimeline
from sm_locust.record.llm import step_windows
from sm_locust.record.recorder import hour_line
from sm_locust.record.summary import RECORDER_SUBWINDOW_S, iso, step_record, step_records
from sm_locust.record.timeline import TIMELINE_JSONL, TimelineWriter, decode_hist, encode_hist, read_seconds

HIST = {20: 50, 40: 45, 90: 5}


def second(t: float, users: int, requests: int = 100, failures: int = 0, *, spawning: bool = False,
           target: float | None = None, hist: dict | None = None, cpu: float | None = 20.0) -> Second:
    return Second(t=t, users=users, spawning=spawning, requests=requests, failures=failures,
                  hist=dict(hist or {b: c * requests // 100 for b, c in HIST.items()}), client_cpu_pct=cpu,
                  target_rate=target, backoffs=0)


def stepped(plan: list[tuple[int, int]], *, start: float = 1000.0, target_after: int | None = None) -> list[Second]:
    """[(users, seconds)...] with a 2-s ramp (spawning) before each level; requests vary a little."""
    out: list[Second] = []
    t = start
    for users, length in plan:
        for _ in range(2):
            t += 1
            out.append(second(t, users, 10 * users, spawning=True))
        for i in range(length):
            t += 1
            target = float(users * 5) if target_after is not None and len(out) >= target_after else None
            out.append(second(t, users, 100 * users + (i % 7), failures=i % 11 == 0, target=target))
    return out


@pytest.mark.parametrize("target_after", [None, 30])
def test_steps_streamed_equal_the_whole_timeline(target_after):
    seconds = stepped([(1, 40), (2, 50), (4, 30), (0, 3)], target_after=target_after)
    timeline = RunTimeline()
    timeline.extend(seconds)
    assert timeline.steps() == step_records(seconds)  # closed loop, and open loop found mid-run
    windows = [w for _, w in timeline.measured_steps()]
    exact = step_windows(seconds)
    assert [sum(s.interval for s in w) for w in windows] == pytest.approx([sum(s.interval for s in w) for w in exact])
    assert [w[0].t - w[0].interval for w in windows] == pytest.approx([w[0].t - w[0].interval for w in exact])


def test_a_long_step_from_merged_blocks_is_within_a_block_of_the_exact_figures():
    n = 6 * 3600  # one step of 6 h: 600 exact seconds, the rest in at most 256 blocks
    seconds = [second(1000.0 + i + 1, 8, 300 + (i * 37) % 40, failures=i % 97 == 0,
                      hist={20 + (i % 5): 200, 40 + (i // 3600): 100}) for i in range(n)]
    timeline = RunTimeline()
    timeline.extend(seconds)
    (streamed,) = timeline.steps()
    exact = step_record(measure_step(seconds, min_subwindow_s=RECORDER_SUBWINDOW_S))
    assert streamed["total_requests"] == exact["total_requests"]  # sums are exact
    assert streamed["start"] == exact["start"] and streamed["end"] == exact["end"]
    for key in ("requests", "steady_s", "rps"):  # the warm-up cut falls on a block boundary: < 2 / 256 of 6 h
        assert streamed[key] == pytest.approx(exact[key], rel=0.01), key
    assert streamed["p50_ms"] == exact["p50_ms"] and streamed["p95_ms"] == exact["p95_ms"]
    assert streamed["stable"] == exact["stable"]
    view = timeline.view()  # what a shape sees: the step's blocks, then the last EXACT_S seconds as they were
    assert len(view) <= EXACT_S + 256 and view[-EXACT_S:] == seconds[-EXACT_S:]
    assert sum(s.requests for s in view) == sum(s.requests for s in seconds)


def _held_by_hour(hours: int, tmp_path) -> list[int]:
    """Bytes Python still holds after each hour of synthetic seconds fed through the recorder's path, in one
    traced feed. Its flushes are counted in seconds fed, not on the wall clock, so what is held is the same on
    a quiet machine and a starved one; only the CPU it takes differs (~3 s quiet)."""
    gc.collect()
    tracemalloc.start()
    held: list[int] = []
    summary = None
    try:
        before = tracemalloc.get_traced_memory()[0]
        timeline = RunTimeline(1_700_000_000.0)
        writer = TimelineWriter(tmp_path / TIMELINE_JSONL, flush_every_s=60, clock=itertools.count().__next__)
        seconds = synthetic_seconds(hours * 3600, start=1_700_000_000.0, pool=histogram_pool())
        for _ in range(hours):  # a checkpoint (steps and hours measured) every half hour, as a run's every minute
            summary = feed(timeline, itertools.islice(seconds, 3600), writer=writer, checkpoint_every_s=1800)
            writer.flush()
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0] - before)
        writer.close()
    finally:
        tracemalloc.stop()
    assert summary is not None and len(summary["hours"]) == hours
    return held


def test_the_recorder_memory_does_not_grow_with_the_hours_fed(tmp_path):
    held = _held_by_hour(4, tmp_path)
    # a recorder that kept every second held ~5 MB more each hour of these samples (117 MB a day)
    assert held[-1] < 1.5 * held[0] + 1_000_000, held
    assert max(held) < 12_000_000, held
    assert (tmp_path / TIMELINE_JSONL).stat().st_size > 4 * 3600 * 100  # every second went to the file


def test_hour_records_are_exact_and_the_hour_line_shows_them():
    origin = 10_000.0
    seconds = [second(origin + i + 1, 10, 100, hist={20: 50, 40: 45, 90: 5}) for i in range(3600)]
    seconds += [second(origin + 3600 + i + 1, 20, 200, failures=2, hist={30: 100, 60: 90, 200: 10})
                for i in range(3600 + 1800)]
    timeline = RunTimeline(origin)
    closed = timeline.extend(seconds)
    assert [h["hour"] for h in closed] == [1, 2]  # the third hour is still under way
    first, second_, third = timeline.hours()
    assert first == {**first, "start": iso(origin), "end": iso(origin + 3600), "duration_s": 3600.0, "users": 10,
                     "requests": 360_000, "failures": 0, "rps": 100.0, "goodput_rps": 100.0, "error_rate": 0.0,
                     "p50_ms": histogram_percentile(HIST, 50), "p95_ms": histogram_percentile(HIST, 95),
                     "p99_ms": histogram_percentile(HIST, 99), "client_cpu_pct": 20.0}
    later = {30: 100, 60: 90, 200: 10}
    assert (second_["users"], second_["requests"], second_["failures"], second_["rps"]) == (20, 720_000, 7200, 200.0)
    assert second_["error_rate"] == pytest.approx(0.01) and second_["p99_ms"] == histogram_percentile(later, 99)
    assert (third["duration_s"], third["requests"], third["end"]) == (1800.0, 360_000, iso(origin + 3600 + 5400))
    second_["errors"] = {"ModelError": 7000, "ThrottlingException": 200}
    line = hour_line(second_)
    assert line.startswith("hour 2 (03:46 .. 04:46): users 20, 200.0 req/s (goodput 198.0), p50/p95/p99 ")
    assert "errors 7200 (1.00 %; ModelError 7000, ThrottlingException 200)" in line and "client CPU 20 %" in line


def test_timeline_lines_round_trip_and_a_cut_last_line_is_left_out(tmp_path):
    hist = merge_histograms([{1: 2, 250: 3}, {1: 1, 9800: 4}])
    assert decode_hist(encode_hist(hist)) == hist and encode_hist(hist) == "1:3 250:3 9800:4"
    path = tmp_path / TIMELINE_JSONL
    clock = iter(range(100)).__next__  # 1 s per call: flushed every 5 s of this clock
    writer = TimelineWriter(path, flush_every_s=5, clock=clock)
    seconds = [Second(t=float(i), users=1, spawning=False, requests=3, failures=1, hist=hist, sent=2, late=0,
                      dropped=1, target_rate=2.5) for i in range(1, 8)]
    for s in seconds[:3]:
        writer.add(s)
    assert path.read_bytes() == b""  # not flushed yet
    for s in seconds[3:]:
        writer.add(s)
    assert 0 < len(read_seconds(path)) < len(seconds)  # flushed once on the way
    writer.close()
    assert read_seconds(path) == seconds
    with open(path, "ab") as fh:
        fh.write(b'{"t":8.0,"users":1,"spawn')  # killed mid-write
    assert read_seconds(path) == seconds
