"""`--publish prometheus[:HOST:PORT]`: the run's figures at `/metrics` on the master, for Prometheus
and Grafana (deploy/grafana/sm-locust.json).

A collector: nothing is counted on the request path; each scrape reads the master's merged stats, so
a last scrape equals summary.json's totals (metric names: docs/live-metrics.md). Failures keep at
most 20 error names (`error_names.py`). `prometheus_client` (the `prometheus` extra) is imported
only with `--publish prometheus`; the server binds 127.0.0.1:9646 unless told otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sm_locust.errors import UsageError
from sm_locust.invocation import error_code, is_invocation
from sm_locust.plateau.tokens import Bucket
from sm_locust.publish.error_names import ErrorNames

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from locust.stats import RequestStats

    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)
PREFIX = "sm_locust"
LATENCY_BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TOKEN_BOUNDS_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
METRIC_NAMES = (  # what the Grafana dashboard may name (tests check it names no other)
    "sm_locust_requests_total", "sm_locust_failures_total", "sm_locust_request_latency_seconds_bucket",
    "sm_locust_request_latency_seconds_sum", "sm_locust_request_latency_seconds_count", "sm_locust_in_flight",
    "sm_locust_users", "sm_locust_step", "sm_locust_llm_requests_total", "sm_locust_output_tokens_total",
    "sm_locust_time_to_first_token_seconds_bucket", "sm_locust_time_to_first_token_seconds_sum",
    "sm_locust_time_to_first_token_seconds_count", "sm_locust_inter_token_latency_seconds_bucket",
    "sm_locust_inter_token_latency_seconds_sum", "sm_locust_inter_token_latency_seconds_count",
)


def cumulative_buckets(hist: Mapping[int, int], bounds_s: tuple[float, ...], scale_ms: float = 1.0,
                       total: int | None = None) -> list[tuple[str, float]]:
    """A histogram of `key * scale_ms` milliseconds -> count as Prometheus buckets: (le, cumulative
    count) for each bound in seconds, then "+Inf" = `total` (default: every count)."""
    out: list[tuple[str, float]] = []
    items = sorted(hist.items())
    for bound in bounds_s:
        limit = bound * 1000.0
        out.append((repr(bound), float(sum(c for k, c in items if k * scale_ms <= limit))))
    out.append(("+Inf", float(sum(hist.values()) if total is None else total)))
    return out


@dataclass
class RunView:
    """What a scrape reads, as callables (the live run's, or a test's)."""

    stats: Callable[[], RequestStats]  # Locust's RequestStats (the master's merged ones)
    endpoint: Callable[[], str]
    users: Callable[[], int]
    step: Callable[[], int]
    in_flight: Callable[[], float]
    llm: Callable[[], Bucket | None]


class RunCollector:
    """A prometheus_client collector over a `RunView` (registered on a registry of its own)."""

    def __init__(self, view: RunView):
        self.view = view
        self.error_names = ErrorNames(on_fold=lambda text: log.warning("sm-locust: Prometheus: %s", text))

    def collect(self) -> Iterator[Metric]:
        # lazy: prometheus_client is the optional extra `prometheus`, only loaded with --publish prometheus
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        view = self.view
        endpoint = view.endpoint() or ""
        stats = view.stats()
        requests = CounterMetricFamily(f"{PREFIX}_requests", "Logical invocations completed (summary.json totals)",
                                       labels=["endpoint", "name"])
        failures = CounterMetricFamily(f"{PREFIX}_failures", "Failed invocations by error code",
                                       labels=["endpoint", "name", "error"])
        latency = HistogramMetricFamily(f"{PREFIX}_request_latency_seconds", "End-to-end latency of the invocations "
                                        "(Locust's ~2-significant-digit buckets)", labels=["endpoint", "name"])
        merged: dict[str, list] = {}
        for entry in stats.entries.values():
            if is_invocation(entry.method, entry.name):
                merged.setdefault(entry.name, []).append(entry)
        for name, entries in sorted(merged.items()):
            count = sum(e.num_requests for e in entries)
            hist: dict[int, int] = {}
            for e in entries:
                for key, n in e.response_times.items():
                    hist[key] = hist.get(key, 0) + n
            requests.add_metric([endpoint, name], count)
            latency.add_metric([endpoint, name], cumulative_buckets(hist, LATENCY_BOUNDS_S, total=count),
                               sum_value=sum(e.total_response_time for e in entries) / 1000.0)
        by_error: dict[tuple[str, str], int] = {}
        for err in stats.errors.values():
            if is_invocation(err.method, str(err.name)):
                key = (str(err.name), error_code(err.error))
                by_error[key] = by_error.get(key, 0) + err.occurrences
        by_code: dict[str, int] = {}
        for (_, code), n in by_error.items():
            by_code[code] = by_code.get(code, 0) + n
        self.error_names.fold(by_code)  # admits this scrape's new names, most frequent first
        labelled: dict[tuple[str, str], int] = {}
        for (name, code), n in by_error.items():
            label = self.error_names.name_of(code)
            labelled[(name, label)] = labelled.get((name, label), 0) + n
        for (name, label), n in sorted(labelled.items()):
            failures.add_metric([endpoint, name, label], n)
        yield requests
        yield failures
        yield latency
        for metric, text, value in (("in_flight", "Mean requests in flight over the last 10 s (Little's law)",
                                     view.in_flight()),
                                    ("users", "Users running", view.users()),
                                    ("step", "The load step under way (0 before the first)", view.step())):
            gauge = GaugeMetricFamily(f"{PREFIX}_{metric}", text, labels=["endpoint"])
            gauge.add_metric([endpoint], float(value))
            yield gauge
        llm = view.llm()
        if llm is not None and llm.requests:
            tokens = CounterMetricFamily(f"{PREFIX}_output_tokens", "Output tokens of the answers completed",
                                         labels=["endpoint"])
            tokens.add_metric([endpoint], llm.output_tokens)
            answers = CounterMetricFamily(f"{PREFIX}_llm_requests", "LLM answers counted", labels=["endpoint"])
            answers.add_metric([endpoint], llm.requests)
            yield answers
            yield tokens
            for metric, series in (("time_to_first_token_seconds", "ttft"), ("inter_token_latency_seconds", "itl")):
                tenths = llm.hists.get(series) or {}
                family = HistogramMetricFamily(f"{PREFIX}_{metric}", f"LLM {series.upper()} per answer (gap)",
                                               labels=["endpoint"])
                family.add_metric([endpoint], cumulative_buckets(tenths, TOKEN_BOUNDS_S, scale_ms=0.1),
                                  sum_value=sum(k * n for k, n in tenths.items()) / 10000.0)
                yield family


def serve(view: RunView, host: str, port: int) -> WSGIServer:
    """Start prometheus_client's HTTP server with a registry holding only the run's collector; returns
    the server (shut it down with `.shutdown()`). A one-line UsageError when the extra is missing or
    the port is taken."""
    try:
        # lazy: the optional extra `prometheus`, only with --publish prometheus
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise UsageError("--publish prometheus needs prometheus_client: pip install 'sm-locust[prometheus]'") from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(view))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise UsageError(f"--publish prometheus:{host}:{port}: cannot listen there: {exc.strerror or exc}") from None
    return server
