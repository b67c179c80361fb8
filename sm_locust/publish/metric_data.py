"""An interval as PutMetricData datums, and datums as PutMetricData calls within the API's limits.

Pure. Every datum carries the run's dimensions (`EndpointName`, plus `VariantName`, `TargetModel` or
`InferenceComponentName` when the run fixes one); the metric set is in docs/live-metrics.md
(`Requests` is sent also when 0; failures by error name keep at most 20 names, `error_names.py`).
A histogram of more than 150 distinct values becomes several datums of the same metric and
timestamp; `calls` never puts two datums of the same metric, dimensions and timestamp in one call
and keeps each call within 1,000 datums and a size budget (limits: docs/facts.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from sm_locust.publish.error_names import ErrorNames
from sm_locust.publish.interval import Interval, chunks, latency_values

MAX_DATUMS_PER_CALL = 1000
MAX_VALUES_PER_DATUM = 150
MAX_CALL_BYTES = 1_000_000
CALL_BUDGET_BYTES = 500_000  # estimated size kept under half the limit: the estimate is JSON, the wire CBOR or query
MILLISECONDS = "Milliseconds"
COUNT = "Count"
ERROR_DIMENSION = "Error"
# the run-fixing options and the dimension each adds
TARGET_DIMENSIONS = (("target_variant", "VariantName"), ("target_model", "TargetModel"),
                     ("inference_component", "InferenceComponentName"))
METRICS = {  # name -> unit: the published set (docs/live-metrics.md)
    "EndToEndLatency": MILLISECONDS, "Requests": COUNT, "Failures": COUNT, "Throttles": COUNT, "InFlight": COUNT,
    "TimeToFirstToken": MILLISECONDS, "InterTokenLatency": MILLISECONDS, "OutputTokens": COUNT,
}
LLM_SERIES = (("TimeToFirstToken", "ttft"), ("InterTokenLatency", "itl"))


def run_dimensions(endpoint_name: str, fixed: Mapping[str, str]) -> list[dict[str, str]]:
    """EndpointName, plus VariantName / TargetModel / InferenceComponentName for each one `fixed` names
    (option dest -> value, e.g. {"target_variant": "AllTraffic"}). No per-run dimension: each distinct
    dimension set is one more billed custom metric."""
    dims = [{"Name": "EndpointName", "Value": endpoint_name}]
    for dest, name in TARGET_DIMENSIONS:
        if fixed.get(dest):
            dims.append({"Name": name, "Value": str(fixed[dest])})
    return dims


def _datum(name: str, dims: list[dict], stamp: datetime, resolution: int, **value) -> dict:
    return {"MetricName": name, "Dimensions": dims, "Timestamp": stamp, "Unit": METRICS[name],
            "StorageResolution": resolution, **value}


def _distribution(name: str, pairs: list[tuple[float, int]], dims: list[dict], stamp: datetime,
                  resolution: int) -> list[dict]:
    return [_datum(name, dims, stamp, resolution, Values=[v for v, _ in part], Counts=[float(c) for _, c in part])
            for part in chunks(pairs, MAX_VALUES_PER_DATUM)]


def interval_datums(interval: Interval, dims: list[dict], resolution: int,
                    names: ErrorNames | None = None) -> list[dict]:
    """The interval's datums (module docstring), stamped with its period's start; the `Error` values are
    the run's bounded set (`names`: publish/error_names.py)."""
    stamp = datetime.fromtimestamp(interval.start, UTC)
    pairs = latency_values(interval.hist, run_max=interval.run_max_ms, run_min=interval.run_min_ms,
                           new_max=interval.new_max_ms, new_min=interval.new_min_ms)
    out = _distribution("EndToEndLatency", pairs, dims, stamp, resolution)
    out.append(_datum("Requests", dims, stamp, resolution, Value=float(interval.requests)))
    out.append(_datum("Failures", dims, stamp, resolution, Value=float(interval.failures)))
    for code, count in sorted((names or ErrorNames()).fold(interval.errors).items()):
        error_dims = [*dims, {"Name": ERROR_DIMENSION, "Value": code}]
        out.append(_datum("Failures", error_dims, stamp, resolution, Value=float(count)))
    out.append(_datum("Throttles", dims, stamp, resolution, Value=float(interval.throttles)))
    out.append(_datum("InFlight", dims, stamp, resolution, Value=round(interval.in_flight, 6)))
    llm = interval.llm
    if llm is not None and llm.requests:
        for name, series in LLM_SERIES:  # the LLM histograms hold tenths of a millisecond
            tenths = llm.hists.get(series) or {}
            out += _distribution(name, [(k / 10.0, c) for k, c in sorted(tenths.items()) if c > 0], dims, stamp,
                                 resolution)
        out.append(_datum("OutputTokens", dims, stamp, resolution, Value=float(llm.output_tokens)))
    return out


def datum_key(datum: Mapping) -> tuple:
    """What makes two datums the same data point: metric, dimensions, timestamp."""
    dims = tuple((d["Name"], d["Value"]) for d in datum.get("Dimensions") or ())
    return datum["MetricName"], dims, str(datum.get("Timestamp"))


def estimated_bytes(datum: Mapping) -> int:
    """A generous size estimate of one datum on the wire."""
    return 2 * len(json.dumps(datum, default=str))


def calls(datums: Sequence[Mapping], *, max_datums: int = MAX_DATUMS_PER_CALL,
          budget_bytes: int = CALL_BUDGET_BYTES) -> list[list[Mapping]]:
    """Datums grouped into PutMetricData calls, in order: each call at most `max_datums`, within the size
    budget, and never two datums with the same `datum_key` (a split histogram goes out over several calls)."""
    out: list[list[Mapping]] = []
    current: list[Mapping] = []
    keys: set[tuple] = set()
    size = 0
    for datum in datums:
        key, weight = datum_key(datum), estimated_bytes(datum)
        if current and (len(current) >= max_datums or size + weight > budget_bytes or key in keys):
            out.append(current)
            current, keys, size = [], set(), 0
        current.append(datum)
        keys.add(key)
        size += weight
    if current:
        out.append(current)
    return out
