"""The error names a run publishes are a bounded set (publish/error_names.py): at most MAX_ERROR_NAMES, the rest
under `Other` and said once; each name of a bounded length and charset. CloudWatch's `Error` dimension and
Prometheus' `error` label both go through it."""

from __future__ import annotations

import locust  # noqa: F401  (gevent patching before boto3)
from locust.stats import RequestStats

from sm_locust.invocation import InvocationError
from sm_locust.publish.error_names import (
    MAX_ERROR_NAME_CHARS,
    MAX_ERROR_NAMES,
    OTHER,
    ErrorNames,
    error_name,
    fold_like,
)
from sm_locust.publish.interval import Interval
from sm_locust.publish.metric_data import ERROR_DIMENSION, interval_datums
from sm_locust.publish.prometheus import RunCollector, RunView
from sm_locust.publish.verify import Published, compare


def codes(n: int, start: int = 0) -> dict[str, int]:
    return {f"Code{i:04d}": 1 for i in range(start, start + n)}


def test_at_the_bound_every_name_is_its_own_and_nothing_is_said():
    said: list[str] = []
    names = ErrorNames(on_fold=said.append)
    assert names.fold(codes(MAX_ERROR_NAMES)) == codes(MAX_ERROR_NAMES)
    assert said == [] and names.folded == 0


def test_past_the_bound_the_rest_is_other_said_once_and_the_total_kept():
    said: list[str] = []
    names = ErrorNames(on_fold=said.append)
    first = names.fold({**codes(MAX_ERROR_NAMES), "ZLate": 1, "Zlater": 4})  # the most frequent first
    assert first["Zlater"] == 4 and first[OTHER] == 1 + 1 and len(first) == MAX_ERROR_NAMES + 1
    later = names.fold(codes(200, start=1000))  # a new code per request, over many intervals
    assert later == {OTHER: 200}
    assert sum(first.values()) + sum(later.values()) == MAX_ERROR_NAMES + 5 + 200
    assert len(said) == 1 and "more than 20 distinct error codes" in said[0] and names.folded == 202


def test_within_an_interval_the_most_frequent_codes_are_kept_first():
    names = ErrorNames(limit=2)
    assert names.fold({"Rare": 1, "Often": 50, "Sometimes": 7}) == {"Often": 50, "Sometimes": 7, OTHER: 1}
    assert names.name_of("Rare") == OTHER and names.name_of("Often") == "Often"


def test_a_name_is_bounded_in_length_and_charset():
    assert error_name("ModelError") == "ModelError"
    assert error_name("x" * MAX_ERROR_NAME_CHARS) == "x" * MAX_ERROR_NAME_CHARS
    assert error_name("x" * (MAX_ERROR_NAME_CHARS + 1)) == "x" * MAX_ERROR_NAME_CHARS
    assert error_name("HTTP 500\x1b]0;t\x07é") == "HTTP_500__0_t__"
    assert error_name("\x1b\x07") == "Error"


def test_cloudwatch_publishes_at_most_the_bound_of_error_values_over_a_run():
    names = ErrorNames()
    values: set[str] = set()
    for period in range(10):
        interval = Interval(start=1_700_000_000.0 + 60 * period, elapsed_s=60.0, requests=30, failures=30,
                            hist={10: 30}, sum_ms=300.0, run_max_ms=10.0, run_min_ms=10.0, new_max_ms=None,
                            new_min_ms=None, errors=codes(30, start=30 * period))
        for datum in interval_datums(interval, [{"Name": "EndpointName", "Value": "ep"}], 60, names):
            values |= {d["Value"] for d in datum["Dimensions"] if d["Name"] == ERROR_DIMENSION}
    assert len(values) == MAX_ERROR_NAMES + 1 and OTHER in values


def test_a_prometheus_scrape_holds_at_most_the_bound_of_error_labels():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    stats = RequestStats()
    for i in range(153):
        stats.log_request("InvokeEndpoint", "ep", 10.0, 10)
        stats.log_error("InvokeEndpoint", "ep", InvocationError(f"Code{i:04d}", "boom"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(RunView(stats=lambda: stats, endpoint=lambda: "ep", users=lambda: 1,
                                           step=lambda: 1, in_flight=lambda: 0.0, llm=lambda: None)))
    for _ in range(2):  # a second scrape keeps the same labels
        labels = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for s in family.samples:
                if s.name == "sm_locust_failures_total":
                    labels[s.labels["error"]] = s.value
        assert len(labels) == MAX_ERROR_NAMES + 1 and labels[OTHER] == 153 - MAX_ERROR_NAMES
        assert sum(labels.values()) == 153


def test_verify_compares_summary_counts_folded_as_published():
    errors = codes(25)
    published = ErrorNames().fold(errors)
    summary = {"totals": {"requests": 25, "errors": errors}}
    assert fold_like(published, errors) == published
    assert compare(Published(samples=25, sum_ms=250.0, max_ms=10.0, errors=published), summary)[0]
    assert not compare(Published(samples=25, sum_ms=250.0, max_ms=10.0, errors={**published, OTHER: 4}), summary)[0]
