"""Server-side counters shared by all worker processes of the local endpoint.

Tests compare what the server saw with what the client counted (the proof that nothing retries),
and the CloudWatch-style publisher turns these into Invocations, ModelLatency, etc. The counters
live in one shared-memory array created before gunicorn forks its workers, so every worker adds
to the same totals.
"""

from __future__ import annotations

import multiprocessing

FIELDS = (
    "requests",  # every invocation request received (runtime API and /invocations)
    "invocations",  # requests that reached the model or an injected model-side fault
    "successes",
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
)
_INDEX = {name: i for i, name in enumerate(FIELDS)}


class SharedCounters:
    """Named float counters in shared memory, safe across forked workers."""

    def __init__(self) -> None:
        self._array = multiprocessing.get_context("fork").Array("d", len(FIELDS), lock=True)

    def add(self, **amounts: float) -> None:
        with self._array.get_lock():
            for name, amount in amounts.items():
                self._array[_INDEX[name]] += amount

    def record_max(self, name: str, value: float) -> None:
        with self._array.get_lock():
            i = _INDEX[name]
            if value > self._array[i]:
                self._array[i] = value

    def snapshot(self) -> dict[str, float]:
        with self._array.get_lock():
            values = list(self._array)
        return {name: (int(v) if not name.endswith(("_sum", "_max")) else v) for name, v in zip(FIELDS, values)}
