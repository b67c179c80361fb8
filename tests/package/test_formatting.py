"""The one formatter: what a figure looks like on every page and line, and that a missing figure
prints as the one marker whatever form it is missing in (None, NaN, infinity, numpy or not)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sm_locust.util.formatting import MISSING, compact, duration, is_missing, latency, money, number, percent

MISSING_FORMS = [None, float("nan"), math.inf, -math.inf, np.float64("nan"), np.float32("nan"), np.float64("inf")]


@pytest.mark.parametrize("value", MISSING_FORMS)
def test_every_form_of_a_missing_figure_prints_the_one_marker(value):
    assert is_missing(value)
    for text in (number(value), number(value, 2, " ms"), percent(value), compact(value, " ms"), latency(value),
                 money(value), duration(value)):
        assert text == MISSING == "n/a"


@pytest.mark.parametrize("value", [0, 0.0, False, "text", np.int64(3), np.float32(1.5)])
def test_present_values_are_not_missing(value):
    assert not is_missing(value)


def test_number_groups_thousands_and_keeps_integers_whole():
    assert number(1234) == "1,234"
    assert number(np.int64(1234567)) == "1,234,567"
    assert number(1234.56) == "1,234.6"
    assert number(np.float64(0.125), 2, " ms") == "0.12 ms"
    assert number(0.5, 2, " %") == "0.50 %"
    assert number(3, 0, " users") == "3 users"
    assert number(True) == "yes" and number(False) == "no"
    assert number("ml.c5.xlarge") == "ml.c5.xlarge"


def test_percent_styles_of_the_report_gates_and_search():
    assert percent(0.075) == "7.5 %"
    assert percent(0.005, 2, unit="%") == "0.50%"  # gates
    assert percent(0.05, 2, unit="", trim=True) == "5"  # the plateau search's reasons
    assert percent(0.075, 2, trim=True) == "7.5 %"
    assert percent(0.0, 1, trim=True) == "0 %"
    assert percent(0.1234, 2) == "12.34 %"


def test_compact_and_latency_read_like_the_user_wrote_them():
    assert compact(250.0, " ms") == "250 ms"
    assert compact(0.125) == "0.125"
    assert latency(48.0) == "48"
    assert latency(12.345, " ms") == "12.3 ms"
    assert latency(1234.4) == "1,234"  # thousands separated, as number's


def test_money_and_durations():
    assert money(1234.5) == "$1,234.50"
    assert money(0.25, 3) == "$0.250"
    assert money(2) == "$2.00"
    assert duration(38.2) == "38 s"
    assert duration(725) == "12 min 5 s"
    assert duration(9000) == "2 h 30 min"
    assert duration(-3) == "0 s"


def test_cli_lines_print_a_missing_latency_as_the_marker():
    from sm_locust.core.verdict import verdict_line
    from sm_locust.record.progress import ProgressSample, parse_progress
    from sm_locust.record.recorder import hour_line

    sample = ProgressSample(elapsed_s=3, users=2, rps=0.0, goodput_rps=0.0, p95_ms=None, failures=0)
    assert "p95=n/a ms" in sample.line() and parse_progress(sample.line()) == sample
    assert ", p95 n/a ms, 0 failures" in verdict_line({"totals": {"requests": 0, "rps": 0.0, "failures": 0}})
    hour = {"hour": 1, "start": "2026-11-21T14:00:00.000Z", "end": "2026-11-21T15:00:00.000Z", "users": 2,
            "rps": 1.0, "goodput_rps": 1.0, "p50_ms": 12.0, "p95_ms": None, "p99_ms": float("nan"), "failures": 0,
            "error_rate": 0.0}
    assert "p50/p95/p99 12/n/a/n/a ms" in hour_line(hour)


def test_a_figure_with_its_interval_reads_one_way_everywhere():
    from sm_locust.measure.uncertainty import Interval
    from sm_locust.util.formatting import percent_interval, with_interval

    assert with_interval(189.2, [186.1, 192.3], " req/s") == "189 req/s (±3)"  # batch means: symmetric
    assert with_interval(120, [112, 131], " ms") == "120 ms [112, 131]"  # a bootstrapped percentile
    assert with_interval(120, Interval(112.0, 131.0), " ms") == "120 ms [112, 131]"
    assert with_interval(10.0, [9.96, 10.04], " req/s") == "10 req/s (±0.04)"  # never "±0" for a real width
    assert with_interval(1234.5, [1200.5, 1268.5], " req/s", 1) == "1,234.5 req/s (±34.0)"
    assert with_interval(5, None, " ms") == "5 ms" == with_interval(5, Interval(None, None), " ms")
    assert with_interval(5, [float("nan"), 6], " ms") == "5 ms"
    assert with_interval(None, [1, 2]) == "n/a"
    assert with_interval(123.8, [78.8, 168.9], " req/s", 1) == "123.8 req/s (±45.1)"  # a rounded centre: still ±
    assert with_interval(38, [37, 38], " ms") == "38 ms [37, 38]"
    # zero width: every batch or resample the same (one bucket, one distinct sample): unknown, never "(±0)"
    assert with_interval(45.0, [45.0, 45.0], " ms", 1) == "45.0 ms" == with_interval(45.0, None, " ms", 1)
    assert with_interval(150, Interval(150.0, 150.0), " req/s") == "150 req/s"
    assert percent_interval(0.5, [0.5, 0.5]) == "50.0 %"


def test_the_run_line_and_the_price_read_in_one_number_format():
    from sm_locust.core.verdict import verdict_line
    from sm_locust.report.render import _per_hour

    totals = {"requests": 12345, "rps": 1299.7, "goodput_rps": 1299.7, "failures": 1234, "p95_ms": 7100.0,
              "ci95": {"rps": [881.8, 1717.6]}}
    line = verdict_line({"totals": totals, "steps": []})
    assert line.startswith("whole run: 12,345 requests, 1,299.7 req/s (±417.9), goodput 1,299.7 req/s, "
                           "p95 7,100 ms, 1,234 failures"), line
    assert _per_hour(None) == "no price per hour" and _per_hour(0.23) == "$0.230/h"
