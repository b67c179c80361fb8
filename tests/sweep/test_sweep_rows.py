"""Typed rows: one order of sweep.json keys for every configuration whatever happened to it, groups
absent until they happened, and the same row read by key as in the file."""

from __future__ import annotations

import json

from sm_locust.sweep.costing import Price
from sm_locust.sweep.realtime.rows import RealtimeFigures, RealtimeRow
from sm_locust.sweep.rows import Marks, Teardown, Timing
from tests.sweep_fakes import FakeRunner, fake_sweep

SHARED = ["index", "label", "key", "settings", "status", "reason", "resumed", "run_dir", "client_bound"]
PRICE = ["price_per_hour", "price_source", "instance_type", "instance_count"]


def row() -> RealtimeRow:
    return RealtimeRow(index=1, label="max_concurrency 2", key="abc", settings={"max_concurrency": 2},
                       run_dir="max_concurrency-2-abc", price=Price(0.2, "price_per_hour", None))


def test_a_row_is_written_in_one_order_whatever_order_it_was_filled_in():
    r = row()
    assert list(r.as_dict()) == SHARED + PRICE  # pending: nothing happened yet
    r.teardown = Teardown(deployed={"endpoint_name": "e"}, billed_s=12.0)  # deleted first...
    r.marks = Marks(meets_objective=False, lost_because="x", pareto=False)  # ...ranked...
    r.figures = RealtimeFigures(capacity_rps=50.0)  # ...measured...
    r.timing = Timing(wall_s=3.0)  # ...timed last
    r.report_gaps = []
    keys = list(r.as_dict())
    assert keys[:15] == SHARED + PRICE + ["report_gaps", "wall_s"]
    assert keys.index("cost_per_hour_at_target") < keys.index("meets_objective") < keys.index("deployed")
    assert keys[-3:] == ["report", "deployed", "billed_s"]  # no price known, no cost_usd; nothing left behind
    assert r["capacity_rps"] == 50.0 and r["deploy_s"] is None and r.cost_usd is None


def test_groups_are_absent_until_they_happen_and_optional_keys_until_known():
    r = row()
    r.fail("skipped", "max_cost_usd 1 would be passed")
    r.marks = Marks(meets_objective=False, lost_because="skipped")
    d = r.as_dict()
    assert "wall_s" not in d and "capacity_rps" not in d and "pareto" not in d and "deployed" not in d
    assert (d["status"], d["reason"]) == ("skipped", "max_cost_usd 1 would be passed")
    r.teardown = Teardown(deployed={}, billed_s=1.0, cost_usd=0.001, left_behind=["endpoint e"])
    assert list(r.as_dict())[-4:] == ["deployed", "billed_s", "cost_usd", "left_behind"]


def test_every_configuration_of_a_sweep_has_the_same_keys_in_the_same_order(tmp_path):
    sweep = fake_sweep(tmp_path, 3, 1)
    runner = FakeRunner(sweep, printer=lambda line: None, handle_signals=False)
    runner.tested = []
    runner.run()
    written = json.loads((sweep.out_dir / "sweep.json").read_text())["configurations"]
    assert [c["status"] for c in written] == ["ok", "ok", "ok"]
    assert [list(c) for c in written[1:]] == [list(written[0])] * 2  # the first and the later ones alike
