"""The Python API's entry points at their edges (issue 32 item 5): the checks the CLI makes, and a wrong
type is a one-line UsageError naming the call, before anything is read, written or started."""

from __future__ import annotations

import json
import math

import pytest

import sm_locust
from sm_locust.api.options import run_arguments
from sm_locust.errors import UsageError

SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                      "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps(SUMMARY))
    return folder


def one_line(call) -> str:
    with pytest.raises(UsageError) as info:
        call()
    message = info.value.message
    assert "\n" not in message and len(message) < 300
    return message


@pytest.mark.parametrize("options, needle", [
    ({"price_per_hour": -1}, "--price-per-hour must be more than 0, got -1"),  # was: "$-1.19 per 1M" written
    ({"price_per_hour": math.nan}, "--price-per-hour must be a finite number, got nan"),
    ({"instance_count": 0}, "--instance-count must be more than 0, got 0"),
    ({"instance_count": 1.5}, "--instance-count must be a whole number"),
    ({"target_rps": math.inf}, "--target-rps must be a finite number, got inf"),  # was: OverflowError
    ({"wait_timeout": -5}, "--wait-timeout must be more than 0"),
    ({"serverless_memory_mb": 0}, "--serverless-memory-mb must be more than 0"),
    ({"period": 30}, "--period 30 must be a multiple of 60"),
])
def test_report_runs_the_clis_checks_before_it_writes(run_folder, options, needle):
    result = sm_locust.load(run_folder)
    before = sorted(p.name for p in run_folder.iterdir())
    assert needle in one_line(lambda: result.report(cloudwatch=False, **options))
    assert sorted(p.name for p in run_folder.iterdir()) == before  # nothing written


def test_a_value_that_is_not_a_run_folder_is_named(run_folder):
    for bad in (None, 123, b"run", ["run"]):
        assert one_line(lambda bad=bad: sm_locust.load(bad)).startswith("load() takes a run folder")
    assert "a sweep is a sweep file's path or a mapping" in one_line(lambda: sm_locust.sweep(123))


def test_compare_takes_a_list_of_runs_not_a_string(run_folder):
    """Was: compare('run') iterated the string's letters ('r is not a folder')."""
    for bad in (str(run_folder), run_folder, sm_locust.load(run_folder), 123, None):
        assert one_line(lambda bad=bad: sm_locust.compare(bad)).startswith("compare() takes a list of runs")
    assert "not int 5" in one_line(lambda: sm_locust.compare([run_folder, 5]))
    assert "--target-rps must be more than 0" in one_line(lambda: sm_locust.compare([run_folder], target_rps=-5))


def test_locust_args_is_a_list():
    """Was: locust_args='--bogus' became Locust's arguments '-', '-', 'b', ... ("Unknown User(s): u, g, -, s, o, b")."""
    for bad in ("--bogus", b"--bogus", 5):
        assert one_line(lambda bad=bad: run_arguments({}, bad)).startswith("locust_args= takes a list")
    assert run_arguments({}, ("--stop-timeout", 5)).passthrough == ("--stop-timeout", "5")


def test_a_mix_whose_weights_overflow_is_one_line_before_anything_starts(tmp_path):
    """Was: a traceback in the notebook (the weights summed to inf)."""
    message = one_line(lambda: sm_locust.run("ep", endpoint_url="http://127.0.0.1:9", payload=__file__,
                                             target_models="a=1e308,b=1e308", out=tmp_path / "run", progress=False))
    assert "--target-models" in message and "sum past the largest number" in message
    assert not (tmp_path / "run").exists()
