"""`sm_locust.sweep(...)` is a plain function, the same before and after any sweep module is imported
(the package `sm_locust.sweep` stays a module in sys.modules); it returns a SweepResult with a table,
the recommendation and an inline view."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import sm_locust
from tests.conftest import SAMPLE_PAYLOAD

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

ORDERS = {
    "attribute first": """
        import sm_locust
        before = sm_locust.sweep
        import sm_locust.sweep.grid, sm_locust.sweep.api, sm_locust.sweep.realtime
        after = sm_locust.sweep
    """,
    "sub-module first": """
        import sm_locust.sweep.runner
        import sm_locust
        before = sm_locust.sweep
        from sm_locust import sweep as after
    """,
    "from-import": """
        from sm_locust import sweep as before
        from sm_locust.sweep.api import load_sweep
        import sm_locust
        after = sm_locust.sweep
    """,
}


def test_the_name_is_the_same_function_whatever_was_imported_first():
    for name, code in ORDERS.items():
        script = textwrap.dedent(code) + textwrap.dedent("""
            import inspect, sys
            from sm_locust.sweep import kinds
            from sm_locust.sweep.api import sweep as entry
            assert before is after, "one object"
            assert inspect.isfunction(before) and before is not entry
            package = sys.modules["sm_locust.sweep"]
            assert inspect.ismodule(package) and not callable(package) and package.kinds is kinds
            print("ok", "locust" in sys.modules)
        """)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout.split() == ["ok", "False"], (name, result.stderr)


def test_the_function_takes_the_sweep_entry_points_arguments():
    """One signature: the function at the package's root forwards every argument of `sweep.api.sweep`."""
    from sm_locust.sweep.api import sweep as entry

    def shape(function):
        return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]

    assert shape(sm_locust.sweep) == shape(entry)


def test_calling_it_runs_a_sweep_and_returns_its_result(tmp_path):
    spec = {"name": "api-sweep", "endpoint": {"service_time_ms": 40}, "grid": {"max_concurrency": [2]},
            "load": {"payload": str(SAMPLE_PAYLOAD), "users": 4, "run_time": "3s"},
            "objective": {"target_rps": 40, "slo_ms": 400}, "price_per_hour": 0.2}
    result = sm_locust.sweep(spec, out=tmp_path / "out")
    assert result.out_dir == tmp_path / "out" and result.exit_code == 0
    table = result.table
    assert isinstance(table, pd.DataFrame) and table["label"].tolist() == ["max_concurrency 2"]
    assert table["status"].tolist() == ["ok"] and table["capacity_rps"].iloc[0] > 0
    assert result.recommendation["label"] == "max_concurrency 2"
    page = result._repr_html_()
    assert result.recommendation["reason"].split(":")[0] in page and "<table" in page and "capacity_rps" in page
