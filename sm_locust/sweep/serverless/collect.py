"""A serverless configuration's run folder -> its row's figures: the I/O around the pure
`measure.py` and `cost.py`.

Reads what the runner left (`serverless.json`: the phases, the local endpoint's counters, every
cold-start request; the load run's `summary.json`, `timeline.jsonl` and `locust_stats.csv`), cuts
the run into the tests' figures, takes ModelLatency (what serverless bills) and ModelSetupTime from
the local endpoint's counters or, on SageMaker, from CloudWatch, and prices the configuration.
A CloudWatch figure that cannot be read is a note in the row, never a failure.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sm_locust.aws.clients import AwsClient
from sm_locust.record.model import JsonObject, Record, Summary, json_field
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.sweep.runner import MARKER
from sm_locust.sweep.serverless.cost import ServerlessPrices, configuration_cost
from sm_locust.sweep.serverless.counters import counters_between
from sm_locust.sweep.serverless.measure import Phase, cold_starts, load_figures
from sm_locust.sweep.serverless.plan import RESULTS
from sm_locust.sweep.serverless.rows import ServerlessFigures
from sm_locust.sweep.serverless.spec import CompareInstance
from sm_locust.util.yamlsafe import load_json

CLIENT_DURATION = ("mean warm latency of the stability test, client side (ModelLatency unknown: an upper bound of the "
                   "billed duration)")


@dataclass(frozen=True, kw_only=True)
class ColdStartTest(Record):
    """`serverless.json`'s `cold_start`: the cold-start test's requests and, locally, the endpoint's setup time."""

    requests: list[JsonObject] | None = json_field("list?")
    gap_s: float | None = json_field("number?")
    model_setup_time: JsonObject | None = json_field("object?")
    start: float | None = json_field("number?")
    end: float | None = json_field("number?")


@dataclass(frozen=True, kw_only=True)
class ServerlessResults(Record):
    """`serverless.json` (runner.py writes it): the phases, the load run's times, the local endpoint's counters,
    the cold-start test; read without judging (a key an older runner did not write reads as None)."""

    phases: list[JsonObject] | None = json_field("list?")
    load_started: float | None = json_field("number?")
    load_ended: float | None = json_field("number?")
    endpoint_counters: list[JsonObject] | None = json_field("list?")
    cold_start: ColdStartTest | None = json_field(ColdStartTest)


@dataclass
class Collector:
    """Reads configurations' run folders into rows, for one sweep."""

    deploy: str
    prices: ServerlessPrices
    compare: CompareInstance | None
    cloudwatch: Callable[[], AwsClient]  # the CloudWatch client (made when first needed, on SageMaker only)

    def figures(self, run_dir: Path, memory_mb: int) -> ServerlessFigures:
        """The configuration's figures and cost, from its run folder."""
        results = ServerlessResults.of(load_json((run_dir / RESULTS).read_text()))
        phases = [Phase(**p) for p in results.phases or []]
        cold_data = results.cold_start or ColdStartTest()
        figures = ServerlessFigures(cold=cold_starts(cold_data.requests or []), cold_start_gap_s=cold_data.gap_s)
        bytes_in, bytes_out, stability_window = 0.0, None, None
        if phases:
            summary = Summary.of(load_json((run_dir / "summary.json").read_text()))
            path = timeline_path(run_dir)
            if path is None:
                raise FileNotFoundError(f"no timeline.jsonl in {run_dir}")
            load = load_figures(read_seconds(path), phases, summary.totals, figures.cold.p50_ms)
            figures.stability, figures.concurrency = load.stability, load.concurrency
            stability_window = load.stability_window
            bytes_in = float((summary.payload.avg_bytes if summary.payload is not None else None) or 0.0)
            bytes_out = average_response_bytes(run_dir / "locust_stats.csv")
        if bytes_out is None:
            sizes = [r["bytes_out"] for r in cold_data.requests or [] if r.get("code") == "ok"]
            bytes_out = sum(sizes) / len(sizes) if sizes else 0.0
        setup = None if cold_data.model_setup_time is None else dict(cold_data.model_setup_time)
        if self.deploy == "sagemaker" and cold_data.start and cold_data.end is not None:  # written together
            setup = self.from_cloudwatch(run_dir, "ModelSetupTime", cold_data.start, cold_data.end) or setup
        figures.model_setup_time = setup
        figures.model_latency = self.model_latency(run_dir, results, stability_window)
        duration, source = figures.warm_mean_ms, CLIENT_DURATION
        latency = figures.model_latency or {}
        if latency.get("average_ms") is not None:
            duration, source = latency["average_ms"], f"ModelLatency mean ({latency['source']})"
        figures.cost = configuration_cost(memory_mb, duration, source, bytes_in, bytes_out, self.prices, self.compare,
                                          duration_interval(duration, figures.warm_mean_ms,
                                                            figures.warm_ci95("warm_mean_ms")))
        return figures

    def model_latency(self, run_dir: Path, results: ServerlessResults,
                      stability_window: tuple[float, float] | None) -> dict[str, Any] | None:
        """The container's mean time per successful request (what serverless bills): locally over the
        stability test (one caller: on this machine concurrent requests share its cores, on SageMaker each
        instance serves one request at a time), on AWS over the load run from CloudWatch."""
        samples = results.endpoint_counters or []
        if samples and stability_window is not None:
            grown = counters_between(samples, *stability_window)
            if grown and grown.successes:
                return {"source": "the local endpoint's counters, stability test", "count": int(grown.successes),
                        "average_ms": grown.model_latency_us_sum / grown.successes / 1000.0,
                        "cold_starts": int(grown.cold_starts)}
        if self.deploy == "sagemaker" and results.load_started and results.load_ended:
            return self.from_cloudwatch(run_dir, "ModelLatency", results.load_started, results.load_ended)
        return None

    def from_cloudwatch(self, run_dir: Path, metric: str, start: float, end: float) -> dict[str, object] | None:
        try:
            marker = load_json((run_dir / MARKER).read_text())
        except (OSError, ValueError):
            marker = {}
        if not isinstance(marker, dict):
            marker = {}
        endpoint = marker.get("endpoint_name")
        if not endpoint:
            return None
        try:
            client = self.cloudwatch()
            variant = (marker.get("settings") or {}).get("variant_name") or "AllTraffic"
            return cloudwatch_ms(client, metric, endpoint, variant, start, end)
        except Exception as exc:  # noqa: BLE001 - the figure is optional; the sweep goes on
            return {"source": "CloudWatch", "count": 0, "note": f"not read: {type(exc).__name__}: {exc}"}


def duration_interval(duration: float | None, warm_mean: float | None, warm_ci95: object) -> list[float] | None:
    """The billed duration's 95 % interval: the warm mean's, relative (ModelLatency's mean, read as
    one figure, varies between runs as the client's mean of the same requests does)."""
    if duration is None or not warm_mean or not isinstance(warm_ci95, (list, tuple)) or len(warm_ci95) != 2:
        return None
    return [duration * warm_ci95[0] / warm_mean, duration * warm_ci95[1] / warm_mean]


def average_response_bytes(path: Path) -> float | None:
    """Locust's Average Content Size of the run (its Aggregated row), or None."""
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("Name") == "Aggregated":
                    return float(row.get("Average Content Size") or 0.0)
    except (OSError, ValueError):
        return None
    return None


def cloudwatch_ms(cloudwatch: AwsClient, metric: str, endpoint_name: str, variant: str, start: float,
                  end: float) -> dict[str, object]:
    """A microsecond metric of the endpoint (ModelSetupTime, ModelLatency) over the minutes of
    [start, end]: its count, average and maximum in ms (count 0 and a note when CloudWatch has none yet)."""
    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName=metric,
        Dimensions=[{"Name": "EndpointName", "Value": endpoint_name}, {"Name": "VariantName", "Value": variant}],
        StartTime=datetime.fromtimestamp(math.floor(start / 60) * 60, UTC),
        EndTime=datetime.fromtimestamp(math.ceil(end / 60) * 60, UTC),
        Period=60, Statistics=["Average", "Maximum", "SampleCount"]).get("Datapoints") or []
    count = sum(p.get("SampleCount", 0) for p in points)
    if not count:
        return {"source": "CloudWatch", "count": 0, "note": f"no {metric} in CloudWatch yet (it arrives a few minutes "
                "late); run the sweep again later to read it (measured configurations are not re-run)"}
    total = sum(p["Average"] * p["SampleCount"] for p in points)
    return {"source": "CloudWatch", "count": int(count), "average_ms": total / count / 1000.0,
            "maximum_ms": max(p["Maximum"] for p in points) / 1000.0}


