"""Per-target figures of a traffic mix: summary.json's `targets` and `model_cache`.

A mixed request keeps its endpoint's one Locust entry; this counts it per target from the request
event's `context["target"]`, with bounded memory: 3 integers per target, a latency histogram for the
first `DETAIL_LIMIT` targets and one shared `others` beyond. `targets`: the top `TOP_TARGETS` then
`others`, summing to totals.requests (logical invocations). `model_cache` splits cold from warm by
the endpoint's marks (`MODEL_WAIT_HEADER`, with `hit_rate_ci95` by batch means), else by the latency's
two modes (`latency_modes`, no interval), else claims no split. A streamed request's time to first
token is kept per target too, cold apart from warm by the same marks (an LLM's LoRA adapters,
`serve --llm --llm-adapters`): `targets[].ttft_cold` / `ttft_warm`, and run-wide in `model_cache`.
Workers ship deltas, the master merges.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from locust.runners import WorkerRunner
from locust.stats import bucket_response_time

from sm_locust.invocation import TTFT, is_invocation
from sm_locust.measure.steady import histogram_percentile, merge_histograms
from sm_locust.measure.uncertainty import rate_ci
from sm_locust.util.shipped import WorkerShipped

REPORT_KEY = "sm_locust_targets"
TOP_TARGETS = 20
DETAIL_LIMIT = 2000
OTHERS = "others"
MIN_MODE_RATIO = 4.0  # a load takes seconds, a warm request milliseconds: modes closer than 4x are not that
VALLEY_BIN = 0.2  # log-latency bin for the valley test (~22 % wide)
MAX_VALLEY = 0.25  # a valley holds at most a quarter of the smaller peak
MIN_MODE_REQUESTS = 3
MAX_BLOCKS = 512  # time blocks of successful / cold counts kept for the hit rate's interval

# a target's counters: requests, failures, cold (the endpoint said it waited for its model's load)
REQUESTS, FAILURES, COLD_N = range(3)


def _add(hist: dict[int, int], bucket: int, count: int = 1) -> None:
    hist[bucket] = hist.get(bucket, 0) + count


def _percentiles(hist: Mapping[int, int]) -> dict:
    return {"p50_ms": histogram_percentile(hist, 50.0), "p95_ms": histogram_percentile(hist, 95.0),
            "p99_ms": histogram_percentile(hist, 99.0)}


class TargetTable:
    """What was sent to each target (pure: fed requests or other tables' wire data)."""

    def __init__(self, detail_limit: int | None = DETAIL_LIMIT):
        self.detail_limit = detail_limit  # None: every target keeps a histogram (a worker's 3-s table)
        self.counts: dict[str, list[int]] = {}
        self.hists: dict[str, dict[int, int]] = {}
        self.others: dict[int, int] = {}  # latencies of targets beyond the detail limit
        self.ok: dict[int, int] = {}  # every successful request
        self.cold: dict[int, int] = {}  # successful requests the endpoint said waited for a load
        self.waits: dict[int, int] = {}  # how long they waited (ms buckets)
        self.block_s = 1  # seconds per time block (doubles past MAX_BLOCKS)
        self.blocks: dict[int, list[int]] = {}  # block number (epoch s // block_s) -> [successful, cold]
        self.ttfts: dict[str, tuple[dict[int, int], dict[int, int]]] = {}  # target -> (cold, warm) TTFT histograms
        self.ttft_others: tuple[dict[int, int], dict[int, int]] = ({}, {})  # targets beyond the detail limit

    def __bool__(self) -> bool:
        return bool(self.counts)

    def _hist(self, target: str) -> dict[int, int]:
        hist = self.hists.get(target)
        if hist is None:
            if self.detail_limit is not None and len(self.hists) >= self.detail_limit:
                return self.others
            hist = self.hists[target] = {}
        return hist

    def _counts(self, target: str) -> list[int]:
        counts = self.counts.get(target)
        if counts is None:
            counts = self.counts[target] = [0, 0, 0]
        return counts

    def _coarsen(self) -> None:
        """Double the time blocks' width, merging pairs."""
        self.block_s *= 2
        merged: dict[int, list[int]] = {}
        for k, (ok, cold) in self.blocks.items():
            into = merged.setdefault(k // 2, [0, 0])
            into[0] += ok
            into[1] += cold
        self.blocks = merged

    def _count_block(self, t: float, ok: int, cold: int) -> None:
        block = self.blocks.setdefault(int(t // self.block_s), [0, 0])
        block[0] += ok
        block[1] += cold
        while len(self.blocks) > MAX_BLOCKS:
            self._coarsen()

    def add(self, target: str, response_time_ms: float, failed: bool, wait_ms: float | None = None,
            now: float | None = None) -> None:
        """One request to `target`; `wait_ms`: the endpoint said it waited that long for its model (None: no);
        `now`: when it ended (epoch seconds; None: not counted in time blocks)."""
        counts = self._counts(target)
        counts[REQUESTS] += 1
        bucket = bucket_response_time(response_time_ms)
        _add(self._hist(target), bucket)
        if failed:
            counts[FAILURES] += 1
            return
        _add(self.ok, bucket)
        if wait_ms is not None:
            counts[COLD_N] += 1
            _add(self.cold, bucket)
            _add(self.waits, bucket_response_time(wait_ms))
        if now is not None:
            self._count_block(now, 1, int(wait_ms is not None))

    def _ttft(self, target: str) -> tuple[dict[int, int], dict[int, int]]:
        pair = self.ttfts.get(target)
        if pair is None:
            if self.detail_limit is not None and len(self.ttfts) >= self.detail_limit:
                return self.ttft_others
            pair = self.ttfts[target] = ({}, {})
        return pair

    def add_ttft(self, target: str, ttft_ms: float, wait_ms: float | None = None) -> None:
        """One stream's time to first token at `target`; `wait_ms`: the endpoint said it waited for a load."""
        cold, warm = self._ttft(target)
        _add(cold if wait_ms is not None else warm, bucket_response_time(ttft_ms))

    # -- worker -> master ---------------------------------------------------------------------------
    def to_wire(self) -> dict:
        """Plain data for a worker report (msgpack: int keys are fine)."""
        return {"c": self.counts, "h": self.hists, "o": self.others, "ok": self.ok, "cold": self.cold,
                "waits": self.waits, "bs": self.block_s, "blk": self.blocks,
                "t": {name: list(pair) for name, pair in self.ttfts.items()}, "to": list(self.ttft_others)}

    def merge_wire(self, data: Mapping) -> None:
        for target, counts in (data.get("c") or {}).items():
            mine = self._counts(str(target))
            for i, n in enumerate(counts[:3]):
                mine[i] += int(n)
        for target, hist in (data.get("h") or {}).items():
            mine_hist = self._hist(str(target))
            for bucket, n in hist.items():
                _add(mine_hist, int(bucket), int(n))
        for key, into in (("o", self.others), ("ok", self.ok), ("cold", self.cold), ("waits", self.waits)):
            for bucket, n in (data.get(key) or {}).items():
                _add(into, int(bucket), int(n))
        for target, pair in (data.get("t") or {}).items():
            for into, hist in zip(self._ttft(str(target)), pair, strict=False):
                for bucket, n in hist.items():
                    _add(into, int(bucket), int(n))
        for into, hist in zip(self.ttft_others, data.get("to") or (), strict=False):
            for bucket, n in hist.items():
                _add(into, int(bucket), int(n))
        width = int(data.get("bs") or 1)
        while self.block_s < width:
            self._coarsen()
        for k, (ok, cold) in (data.get("blk") or {}).items():
            self._count_block(int(k) * width, int(ok), int(cold))

    # -- summary.json ---------------------------------------------------------------------------------
    def entries(self, top: int = TOP_TARGETS) -> list[dict]:
        """summary.json `targets`: the `top` most requested targets (among those with a histogram), then
        `others` for the rest; the requests of all entries sum to every request counted."""
        told = bool(self.cold)
        shown = heapq.nsmallest(top, ((-self.counts[name][REQUESTS], name) for name in self.hists))
        out = []
        for _, name in shown:
            counts = self.counts[name]
            record = {"name": name, "requests": counts[REQUESTS], "failures": counts[FAILURES],
                      **_percentiles(self.hists[name])}
            if told:
                record["cold"] = counts[COLD_N]
            record.update(self._ttft_records(self.ttfts.get(name), told))
            out.append(record)
        shown_names = {name for _, name in shown}
        rest = len(self.counts) - len(shown_names)
        if rest:
            requests = failures = cold = 0
            for name, counts in self.counts.items():
                if name not in shown_names:
                    requests += counts[REQUESTS]
                    failures += counts[FAILURES]
                    cold += counts[COLD_N]
            hist = merge_histograms([self.others, *(h for name, h in self.hists.items() if name not in shown_names)])
            record = {"name": OTHERS, "targets": rest, "requests": requests, "failures": failures, **_percentiles(hist)}
            if told:
                record["cold"] = cold
            pairs = [self.ttft_others, *(p for name, p in self.ttfts.items() if name not in shown_names)]
            record.update(self._ttft_records((merge_histograms([p[0] for p in pairs]),
                                              merge_histograms([p[1] for p in pairs])), told))
            out.append(record)
        return out

    @staticmethod
    def _ttft_records(pair: tuple[Mapping[int, int], Mapping[int, int]] | None, told: bool) -> dict:
        """A target's TTFT: `ttft_cold` and `ttft_warm` when the endpoint marks cold requests, else `ttft`."""
        if pair is None or not (pair[0] or pair[1]):
            return {}
        if told or pair[0]:
            return {"ttft_cold": _mode_record(pair[0]), "ttft_warm": _mode_record(pair[1])}
        return {"ttft": _mode_record(pair[1])}

    def ttft_split(self) -> dict:
        """Every stream's TTFT, cold and warm (model_cache's `ttft_cold` / `ttft_warm`); {} without streams."""
        pairs = [self.ttft_others, *self.ttfts.values()]
        cold = merge_histograms([p[0] for p in pairs])
        warm = merge_histograms([p[1] for p in pairs])
        if not (cold or warm):
            return {}
        return {"ttft_cold": _mode_record(cold), "ttft_warm": _mode_record(warm)}

    def model_cache(self) -> dict | None:
        """summary.json `model_cache`: cold vs warm, from the endpoint's answers, else the latency's modes."""
        if self.cold:  # the endpoint marks the requests that waited: the others were warm
            total = sum(self.ok.values())
            warm = {b: n - self.cold.get(b, 0) for b, n in self.ok.items() if n > self.cold.get(b, 0)}
            cold = _mode_record(self.cold)
            if cold is not None:
                cold.update(wait_p50_ms=histogram_percentile(self.waits, 50.0),
                            wait_p95_ms=histogram_percentile(self.waits, 95.0))
            return {"source": "endpoint", "requests": total, "hit_rate": round(sum(warm.values()) / total, 6),
                    "hit_rate_ci95": self.hit_rate_ci95(), "threshold_ms": None, "cold": cold,
                    "warm": _mode_record(warm), **self.ttft_split()}
        if not self.ok:
            return None
        threshold = latency_modes(self.ok)
        if threshold is None:
            return {"source": "latency-modes", "requests": sum(self.ok.values()), "hit_rate": None,
                    "hit_rate_ci95": None, "threshold_ms": None, "cold": None, "warm": None}
        cold = {b: n for b, n in self.ok.items() if b >= threshold}
        warm = {b: n for b, n in self.ok.items() if b < threshold}
        total = sum(self.ok.values())
        return {"source": "latency-modes", "requests": total, "hit_rate": round(sum(warm.values()) / total, 6),
                "hit_rate_ci95": None, "threshold_ms": threshold, "cold": _mode_record(cold),
                "warm": _mode_record(warm)}

    def hit_rate_ci95(self) -> list[float] | None:
        """The endpoint-marked hit rate's 95 % interval from the time blocks (module docstring), or None."""
        ordered = [self.blocks[k] for k in sorted(self.blocks)]
        return rate_ci([ok - cold for ok, cold in ordered], [ok for ok, _ in ordered]).as_list(4)



def _mode_record(hist: Mapping[int, int]) -> dict | None:
    requests = sum(hist.values())
    return {"requests": requests, **_percentiles(hist)} if requests else None


def latency_modes(hist: Mapping[int, int], *, min_ratio: float = MIN_MODE_RATIO, max_valley: float = MAX_VALLEY,
                  min_requests: int = MIN_MODE_REQUESTS) -> int | None:
    """The latency (ms bucket) from which requests are the slow mode of a two-mode histogram, or None
    when the histogram does not have two clearly separate modes.

    Otsu's split of the log latencies (the threshold maximising the between-class variance), kept only
    when both classes hold `min_requests`, their geometric means are `min_ratio` x apart, and a valley
    separates them: on a log scale (bins `VALLEY_BIN` wide) some bin between the two classes' peaks
    holds at most `max_valley` x the smaller peak (one wide or flat mode has no such valley).
    """
    points = sorted((math.log(max(bucket, 0.5)), n, bucket) for bucket, n in hist.items() if n > 0)
    if len(points) < 2:
        return None
    total_n = sum(n for _, n, _ in points)
    total_s = sum(x * n for x, n, _ in points)
    best, best_i = -1.0, 0
    n0 = s0 = 0.0
    for i in range(1, len(points)):
        x, n, _ = points[i - 1]
        n0 += n
        s0 += x * n
        n1 = total_n - n0
        between = n0 * n1 * (s0 / n0 - (total_s - s0) / n1) ** 2
        if between > best:
            best, best_i = between, i
    low, high = points[:best_i], points[best_i:]
    (n_low, m_low), (n_high, m_high) = _mean(low), _mean(high)
    if min(n_low, n_high) < min_requests or m_high - m_low < math.log(min_ratio):
        return None
    bins: dict[int, int] = {}
    for x, n, _ in points:
        key = math.floor(x / VALLEY_BIN)
        bins[key] = bins.get(key, 0) + n
    split = math.floor(high[0][0] / VALLEY_BIN)
    low_bins = {k: n for k, n in bins.items() if k < split}
    high_bins = {k: n for k, n in bins.items() if k >= split}
    low_peak = max(low_bins, key=lambda k: (low_bins[k], k)) if low_bins else split
    high_peak = max(high_bins, key=lambda k: (high_bins[k], -k))
    valley = [bins.get(k, 0) for k in range(low_peak + 1, high_peak)]
    smaller_peak = min(low_bins.get(low_peak, 0), high_bins[high_peak])
    if not valley or min(valley) > max_valley * smaller_peak:
        return None
    return high[0][2]


def _mean(points: Iterable[tuple[float, int, int]]) -> tuple[int, float]:
    """(count, mean) of weighted log latencies."""
    items = list(points)
    n = sum(c for _, c, _ in items)
    return n, sum(x * c for x, c, _ in items) / n


class TargetStats(WorkerShipped):
    """One Locust process's `TargetTable`; on a master also the workers' (registers its own handlers)."""

    ATTRIBUTE = "sm_locust_targets"
    REPORT_KEY = REPORT_KEY

    def __init__(self, environment: object = None, detail_limit: int | None = DETAIL_LIMIT):
        self.environment = environment
        self.detail_limit = detail_limit
        self.table = self._new_table()
        if environment is not None:
            self.attach(environment)

    def listen(self, environment: Any) -> None:
        self.environment = environment
        self.table = self._new_table()
        environment.events.request.add_listener(self.on_request)

    def on_request(self, request_type: str, name: str, response_time: float, exception: object = None,
                   context: Mapping | None = None, **_kw) -> None:
        if not context:
            return
        target = context.get("target")
        if target is None:
            return
        if request_type == TTFT:
            self.table.add_ttft(target, response_time or 0.0, context.get("model_wait_ms"))
            return
        if not is_invocation(request_type, name):
            return
        self.table.add(target, response_time or 0.0, exception is not None, context.get("model_wait_ms"), time.time())

    def _new_table(self) -> TargetTable:
        """A worker keeps every target's histogram (it ships and forgets them every 3 s: the master bounds)."""
        on_worker = isinstance(getattr(self.environment, "runner", None), WorkerRunner)
        return TargetTable(None if on_worker else self.detail_limit)

    def reset(self) -> None:
        self.table = self._new_table()

    def take_delta(self) -> dict | None:  # worker side: ship, then forget
        if not self.table:
            return None
        wire = self.table.to_wire()
        self.table = self._new_table()
        return wire

    def merge_delta(self, delta: Mapping, client_id: str) -> None:
        if delta:
            self.table.merge_wire(delta)

    def annotate(self, summary: dict, *, models: bool) -> dict:
        """Add `targets` (and, for a multi-model mix or marked cold requests, `model_cache`) to summary.json
        when requests named targets; returns it. `models`: the mix names models (TargetModel), so cold vs
        warm applies; a component mix gets it only when the endpoint marked cold requests (LoRA adapters)."""
        if not self.table:
            return summary
        summary["targets"] = self.table.entries()
        if models or self.table.cold:
            cache = self.table.model_cache()
            if cache is not None:
                summary["model_cache"] = cache
        return summary
