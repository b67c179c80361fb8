"""Per-target figures (sm_locust.record.targets), the pure parts, on synthetic requests.

summary.json `targets`: the top 20 by requests then `others`, summing to every request; bounded
memory however many targets (the tail shares one histogram); a worker's tables merged on the master
give the figures one process would have; cold vs warm from the endpoint's answer, else from the
latency's two modes (and no split claimed when there is one mode).
"""

from __future__ import annotations

import random
import sys

import pytest

from sm_locust.measure.steady import histogram_percentile
from sm_locust.mix import model_names, zipf_weights
from sm_locust.mix.sampler import Picker
from sm_locust.record.targets import (
    DETAIL_LIMIT,
    MAX_BLOCKS,
    OTHERS,
    TargetStats,
    TargetTable,
    latency_modes,
)


def _zipf_requests(count: int, targets: int, seed: int = 1) -> list[tuple[str, float, bool]]:
    names = model_names(targets)
    picker = Picker(zipf_weights(1.1, targets), seed=seed)
    rng = random.Random(seed)
    return [(names[picker.next()], rng.uniform(5, 50), rng.random() < 0.02) for _ in range(count)]


def test_top_twenty_then_others_sum_to_every_request():
    table = TargetTable()
    requests = _zipf_requests(20_000, 1000)
    for name, ms, failed in requests:
        table.add(name, ms, failed)
    entries = table.entries()
    assert len(entries) == 21 and entries[-1]["name"] == OTHERS
    top = entries[:20]
    assert [e["requests"] for e in top] == sorted((e["requests"] for e in top), reverse=True)
    assert top[0]["name"] == "model-0001.tar.gz"
    assert sum(e["requests"] for e in entries) == 20_000
    assert sum(e["failures"] for e in entries) == sum(failed for _, _, failed in requests)
    others = entries[-1]
    assert others["targets"] == len({name for name, _, _ in requests}) - 20
    mine = sorted(ms for name, ms, _ in requests if name == top[0]["name"])
    assert abs(top[0]["p50_ms"] - mine[len(mine) // 2]) <= 1.0  # Locust's buckets: 1 ms below 100 ms
    assert set(top[0]) == {"name", "requests", "failures", "p50_ms", "p95_ms", "p99_ms"}


def test_few_targets_have_no_others_entry():
    table = TargetTable()
    for name in ("a", "b", "a"):
        table.add(name, 10.0, False)
    assert [(e["name"], e["requests"]) for e in table.entries()] == [("a", 2), ("b", 1)]
    assert not TargetTable()


def test_memory_is_bounded_past_the_detail_limit():
    table = TargetTable(detail_limit=50)
    for i in range(5000):
        table.add(f"m{i}", 10.0 + i % 7, False)
    assert len(table.hists) == 50  # the tail's latencies share one histogram
    entries = table.entries()
    assert sum(e["requests"] for e in entries) == 5000
    assert entries[-1]["targets"] == 5000 - 20
    assert histogram_percentile(table.others, 50.0) is not None
    assert DETAIL_LIMIT >= 1000  # 1,000 models keep their own percentiles by default


def test_worker_tables_merged_on_the_master_equal_one_table():
    requests = _zipf_requests(6000, 300, seed=4)
    one = TargetTable()
    for name, ms, failed in requests:
        one.add(name, ms, failed, 2000.0 if ms > 45 else None)
    master = TargetTable()
    for part in (requests[:2000], requests[2000:4500], requests[4500:]):  # three reports
        worker = TargetTable(None)
        for name, ms, failed in part:
            worker.add(name, ms, failed, 2000.0 if ms > 45 else None)
        master.merge_wire(worker.to_wire())
    assert master.entries() == one.entries()
    assert master.model_cache() == one.model_cache()


def test_cold_and_warm_from_the_endpoints_answer():
    table = TargetTable()
    for i in range(100):  # the endpoint marks the requests that waited (with the wait); a hit carries nothing
        table.add("m", 3000.0 if i < 10 else 20.0, False, 2900.0 if i < 10 else None)
    table.add("m", 5.0, True)  # a failure: neither cold nor warm
    cache = table.model_cache()
    assert cache["source"] == "endpoint" and cache["hit_rate"] == 0.9 and cache["requests"] == 100
    assert cache["cold"] == {"requests": 10, "p50_ms": 3000, "p95_ms": 3000, "p99_ms": 3000, "wait_p50_ms": 2900,
                             "wait_p95_ms": 2900}
    assert cache["warm"]["p95_ms"] == 20 and cache["warm"]["requests"] == 90
    assert table.entries()[0]["cold"] == 10


def test_the_endpoints_hit_rate_carries_its_interval_from_time_blocks():
    rng = random.Random(7)
    table, master = TargetTable(), TargetTable()
    workers = [TargetTable(None), TargetTable(None)]
    for second in range(120):  # 120 s of 20 requests; misses come in runs (a cold phase every 30 s)
        miss = 0.4 if second % 30 < 5 else 0.05
        for k in range(20):
            cold = rng.random() < miss
            args = ("m", 3000.0 if cold else 20.0, False, 2900.0 if cold else None, 1000.0 + second + k / 20)
            table.add(*args)
            workers[k % 2].add(*args)
    cache = table.model_cache()
    low, high = cache["hit_rate_ci95"]
    assert low < cache["hit_rate"] < high and high - low > 0.01
    for worker in workers:  # workers ship their blocks; the master's interval is the one process's
        master.merge_wire(worker.to_wire())
    assert master.model_cache()["hit_rate_ci95"] == cache["hit_rate_ci95"]
    # a long run keeps at most MAX_BLOCKS blocks, widening them; the rate's interval still brackets it
    long = TargetTable()
    for second in range(3 * MAX_BLOCKS):
        long.add("m", 20.0, False, 2900.0 if second % 10 == 0 else None, float(second))
    assert len(long.blocks) <= MAX_BLOCKS and long.block_s == 4
    low, high = long.model_cache()["hit_rate_ci95"]
    assert low <= 0.9 <= high
    # requests without a time (older callers) give no interval, and none is invented
    untimed = TargetTable()
    for i in range(50):
        untimed.add("m", 20.0, False, 2900.0 if i % 5 == 0 else None)
    assert untimed.model_cache()["hit_rate_ci95"] is None


def test_cold_and_warm_from_the_latency_modes_when_the_endpoint_does_not_tell():
    rng = random.Random(2)
    table = TargetTable()
    for _ in range(950):
        table.add("m", rng.lognormvariate(3.0, 0.3), False)  # ~20 ms
    for _ in range(50):
        table.add("m", rng.lognormvariate(8.0, 0.2), False)  # ~3 s: loads
    cache = table.model_cache()
    assert cache["source"] == "latency-modes"
    assert abs(cache["hit_rate"] - 0.95) < 0.002
    assert 100 <= cache["threshold_ms"] <= 2000
    assert "cold" not in table.entries()[0]  # the endpoint told nothing per request


@pytest.mark.parametrize("sampler", [
    lambda rng: rng.lognormvariate(3.0, 0.5),  # one mode
    lambda rng: rng.uniform(10, 500),  # wide, flat
    lambda rng: rng.lognormvariate(3.0, 0.2) * (1.6 if rng.random() < 0.5 else 1.0),  # two modes, too close
])
def test_no_split_is_claimed_without_two_clear_modes(sampler):
    rng = random.Random(5)
    hist: dict[int, int] = {}
    for _ in range(5000):
        bucket = round(sampler(rng))
        hist[bucket] = hist.get(bucket, 0) + 1
    assert latency_modes(hist) is None
    table = TargetTable()
    table.ok = hist
    assert table.model_cache() == {"source": "latency-modes", "requests": 5000, "hit_rate": None,
                                   "hit_rate_ci95": None, "threshold_ms": None, "cold": None, "warm": None}


def test_modes_need_a_few_requests_each():
    assert latency_modes({20: 1000, 3000: 2}) is None
    assert latency_modes({20: 1000, 3000: 3}) == 3000


class _Events:
    def __init__(self):
        self.request = self.test_start = self.report_to_master = self.worker_report = self

    def add_listener(self, fn):
        return fn


class _Environment:
    events = _Events()
    runner = None


def test_only_invocations_naming_a_target_are_counted():
    stats = TargetStats(_Environment())
    stats.on_request("InvokeEndpoint", "ep", 10.0, None, {"target": "a", "model_wait_ms": 8.5})
    stats.on_request("InvokeEndpointWithResponseStream", "ep", 30.0, None, {"target": "a"})
    stats.on_request("TTFT", "ep", 5.0, None, {"target": "a"})  # a latency series, not a request
    stats.on_request("InvokeEndpoint", "ep/part", 5.0, None, {"target": "a"})  # a fan-out part
    stats.on_request("InvokeEndpoint", "ep", 5.0, None, {"target": None})
    stats.on_request("InvokeEndpoint", "ep", 5.0, RuntimeError("x"), {"target": "b"})
    summary = stats.annotate({}, models=True)
    assert [(e["name"], e["requests"], e["failures"]) for e in summary["targets"]] == [("a", 2, 0), ("b", 1, 1)]
    assert summary["model_cache"]["source"] == "endpoint"
    assert stats.annotate({}, models=False)["model_cache"]["source"] == "endpoint"  # components marked cold
    unmarked = TargetStats(_Environment())
    unmarked.on_request("InvokeEndpoint", "ep", 10.0, None, {"target": "a"})
    assert "model_cache" not in unmarked.annotate({}, models=False)  # components: no latency-modes guess


def test_ttft_per_target_is_split_cold_and_warm_by_the_endpoints_marks():
    stats = TargetStats(_Environment())
    for i in range(40):  # adapter a: 4 cold streams (the endpoint said it loaded a for them), 36 warm
        wait = {"model_wait_ms": 500.0} if i % 10 == 0 else {}
        ttft = 560.0 if wait else 60.0
        stats.on_request("TTFT", "ep", ttft, None, {"target": "a", **wait})
        stats.on_request("InvokeEndpointWithResponseStream", "ep", ttft + 200, None, {"target": "a", **wait})
    for _ in range(10):  # b: warm only
        stats.on_request("TTFT", "ep", 70.0, None, {"target": "b"})
        stats.on_request("InvokeEndpointWithResponseStream", "ep", 270.0, None, {"target": "b"})
    summary = stats.annotate({}, models=False)
    a, b = summary["targets"]
    assert (a["cold"], a["ttft_cold"]["requests"], a["ttft_warm"]["requests"]) == (4, 4, 36)
    assert (a["ttft_cold"]["p50_ms"], a["ttft_warm"]["p50_ms"]) == (560, 60)
    assert (b["cold"], b["ttft_cold"], b["ttft_warm"]["requests"]) == (0, None, 10)
    cache = summary["model_cache"]
    assert (cache["ttft_cold"]["requests"], cache["ttft_warm"]["requests"]) == (4, 46)
    assert cache["cold"]["requests"] == 4 and cache["hit_rate"] == pytest.approx(46 / 50)


def test_ttft_without_marks_is_one_figure_per_target_and_merges_across_workers():
    one, master = TargetTable(), TargetTable()
    streams = [("a" if i % 3 else "b", 50.0 + i) for i in range(90)]
    for name, ms in streams:
        one.add_ttft(name, ms)
    for part in (streams[:30], streams[30:]):
        worker = TargetTable(None)
        for name, ms in part:
            worker.add_ttft(name, ms)
            worker.add(name, ms + 100, False)
            one.add(name, ms + 100, False)
        master.merge_wire(worker.to_wire())
    assert master.entries() == one.entries()
    entry = {e["name"]: e for e in one.entries()}["a"]
    assert entry["ttft"]["requests"] == 60 and "ttft_cold" not in entry
    assert one.ttft_split() == {"ttft_cold": None, "ttft_warm": one.ttft_split()["ttft_warm"]}


def test_the_per_target_memory_stays_small():
    table = TargetTable()
    for name, ms, failed in _zipf_requests(50_000, 1000):
        table.add(name, ms, failed)
    size = sum(sys.getsizeof(h) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in h.items())
               for h in table.hists.values())
    size += sum(sys.getsizeof(c) + sys.getsizeof(n) for n, c in table.counts.items())
    assert size / len(table.counts) < 8_000  # bytes per target, histogram included (bench/mix.py measures)


def test_summary_schema_accepts_the_entries_and_names_a_wrong_one():
    from sm_locust.errors import UsageError
    from sm_locust.record.schema import check_summary

    table = TargetTable()
    for name, ms, failed in _zipf_requests(3000, 100):
        table.add(name, ms, failed, 2000.0 if ms > 45 else None)
    summary = {"schema": 1, "totals": {"requests": 3000, "failures": 0, "rps": 1.0}, "steps": [],
               "targets": table.entries(), "model_cache": table.model_cache(),
               "mix": {"field": "target_model", "spec": "zipf:1.1:100", "kind": "zipf", "targets": 100, "seed": 0}}
    assert check_summary(summary, "s.json") is summary
    summary["targets"][3]["requests"] = "many"
    with pytest.raises(UsageError, match=r"targets\[3\].requests is 'many'"):
        check_summary(summary, "s.json")
