"""Server-side counters shared by all worker processes of the local endpoint.

Tests compare what the server saw with what the client counted (the proof that nothing retries),
and the CloudWatch-style publisher turns these into Invocations, ModelLatency, etc. The counters
live in one shared-memory array created before gunicorn forks its workers, so every worker adds
to the same totals.
"""

from __future__ import annotations

import multiprocessing

FIELDS: tuple[str, ...] = (
    "requests",  # every invocation request received (runtime API and /invocations)
    "invocations",  # requests that reached the model or an injected model-side fault
    "successes",
    "rows",  # rows the model decoded in the successful invocations (a Triton request: its batch size)
    "stream_errors",  # streams ended with a SageMaker exception frame (ModelStreamError, InternalStreamFailure)
    "in_band_errors",  # LLM streams ended with their format's in-band error (endpoint/llm.py)
    "errors_4xx",
    "errors_5xx",
    "dropped",
    "model_latency_us_sum",
    "model_latency_us_max",
    "overhead_latency_us_sum",
    "ValidationError",
    "ModelError",
    "ModelNotReadyException",
    "ThrottlingException",
    "InternalFailure",
    "ServiceUnavailable",
    "DropConnection",
    "batches",  # batches run by the dynamic batcher (--max-batch-size > 1)
    "cold_starts",  # serverless emulation: instances started cold (endpoint/serverless.py)
    "model_setup_time_us_sum",  # serverless emulation: their setup time (CloudWatch ModelSetupTime)
    "model_cache_lookups",  # multi-model emulation: requests that named a hosted model (ModelCacheHit's samples)
    "model_cache_hits",  # ... whose model was in memory (ModelCacheHit's sum)
    "model_loading_wait_time_us_sum",  # ... the waits for a download and/or load (ModelLoadingWaitTime)
    "model_downloading_time_us_sum",  # ModelDownloadingTime, one per download (endpoint/multimodel.py)
    "model_loading_time_us_sum",  # ModelLoadingTime, one per load
    "model_unloading_time_us_sum",  # ModelUnloadingTime, one per unload
    "llm_messages_1",  # LLM chats received by their number of messages (endpoint/llm_wire.py chat_counts)
    "llm_messages_3",
    "llm_messages_5",
    "llm_messages_other",
    "llm_roles_alternating",  # ... whose roles alternate user / assistant, ending with the user's
    "llm_assistant_messages",  # assistant messages received (a multi-turn chat's earlier answers)
    "llm_assistant_echoed",  # ... that are an answer this emulation streamed
    "llm_prefill_tokens",  # LLM prompt tokens prefilled as requests entered the batch (after the prefix cache)
    "llm_prefix_cache_hit_blocks",  # --llm-prefix-cache-blocks: prompt blocks the prefix cache supplied
    "llm_prefix_cache_miss_blocks",  # ... full prompt blocks prefilled (endpoint/llm_prefix.py)
    "async_accepted",  # serve --async: InvokeEndpointAsync requests queued (endpoint/asyncqueue.py)
    "async_results",  # ... answers written to the OutputLocation
    "async_failures",  # ... failure documents written to the FailureLocation
    "async_notifications",  # ... SNS notifications published (--async-success-topic / --async-error-topic)
    "async_notification_errors",  # ... notifications SNS refused (the result is in S3 all the same)
    "async_time_in_backlog_us_sum",  # ... acceptance -> a worker took it (CloudWatch TimeInBacklog)
    "async_total_processing_time_ms_sum",  # ... acceptance -> answered and announced (TotalProcessingTime)
    "async_oldest_waiting_since",  # ... epoch s the oldest request still queued was accepted, 0: none (a gauge)
    "async_instances",  # ... with --async-max-instances: instances in service (endpoint/asyncscaling.py; a gauge)
    "async_desired_instances",  # ... the policies' desired count (a gauge)
    "async_instance_seconds_sum",  # ... emulated instance-seconds in service since the first request (a gauge)
    "async_emulated_s_sum",  # ... emulated seconds since the first request (a gauge)
    "async_scale_events",  # ... scale-outs and scale-ins decided
)

# Latency statistics per publishing window (count, sum, min, max of each request's value), kept by
# `add` whenever a `<base>_sum` below is added to (one add = one request) and read-and-reset by
# `take_window`: the StatisticValues the CloudWatch publisher sends (sm_locust/endpoint/metrics.py).
WINDOWED = ("model_latency_us", "overhead_latency_us", "model_setup_time_us", "model_loading_wait_time_us",
            "model_downloading_time_us", "model_loading_time_us", "model_unloading_time_us",
            "async_time_in_backlog_us", "async_total_processing_time_ms")
WINDOW_STATS = ("count", "sum", "min", "max")
WINDOW_FIELDS = tuple(f"{base}_window_{stat}" for base in WINDOWED for stat in WINDOW_STATS)
FIELDS = FIELDS + WINDOW_FIELDS
_INDEX = {name: i for i, name in enumerate(FIELDS)}
_WINDOW_OF = {f"{base}_sum": tuple(_INDEX[f"{base}_window_{stat}"] for stat in WINDOW_STATS) for base in WINDOWED}
_FLOAT_SUFFIXES = ("_sum", "_max", "_min", "_since")  # the rest are counts


class SharedCounters:
    """Named float counters in shared memory, safe across forked workers."""

    def __init__(self) -> None:
        self._array = multiprocessing.get_context("fork").Array("d", len(FIELDS), lock=True)

    def add(self, **amounts: float) -> None:
        with self._array.get_lock():
            for name, amount in amounts.items():
                self._array[_INDEX[name]] += amount
                if name in _WINDOW_OF:
                    self._observe(_WINDOW_OF[name], amount)

    def _observe(self, indexes: tuple[int, ...], value: float) -> None:  # (count, sum, min, max)
        count, total, low, high = indexes
        a = self._array
        if a[count] == 0 or value < a[low]:
            a[low] = value
        if a[count] == 0 or value > a[high]:
            a[high] = value
        a[count] += 1
        a[total] += value

    def set_value(self, name: str, value: float) -> None:
        """A gauge: `name` becomes `value` (the last writer wins)."""
        with self._array.get_lock():
            self._array[_INDEX[name]] = value

    def record_max(self, name: str, value: float) -> None:
        with self._array.get_lock():
            i = _INDEX[name]
            if value > self._array[i]:
                self._array[i] = value

    def snapshot(self) -> dict[str, float]:
        with self._array.get_lock():
            values = self._array[:]
        return _named(values)

    def take_window(self) -> dict[str, float]:
        """A snapshot, and the `*_window_*` fields reset to zero in the same locked step, so no
        request falls between two windows (only the one CloudWatch publisher calls this)."""
        with self._array.get_lock():
            values = self._array[:]
            for name in WINDOW_FIELDS:
                self._array[_INDEX[name]] = 0.0
        return _named(values)


def _named(values: list[float]) -> dict[str, float]:
    return {name: (v if name.endswith(_FLOAT_SUFFIXES) else int(v)) for name, v in zip(FIELDS, values, strict=True)}
