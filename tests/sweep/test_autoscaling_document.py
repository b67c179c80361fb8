"""sweep.json of an autoscaling sweep read back typed: its configurations' scale events and instances are
summary.json's records, a key an older sweep.json lacks reads as None, and the page's CSV quotes them."""

from sm_locust.record.model import InstanceSample
from sm_locust.sweep.autoscaling import render
from sm_locust.sweep.autoscaling.document import read_document

EVENT = {"t_s": 30.4, "direction": "out", "from": 1, "to": 3, "reaction_s": 50.0, "reaction_s_ci95": [45, 50]}
CONFIGURATION = {"index": 1, "label": "min 1", "status": "ok", "policy": {"min_instances": 1},
                 "scale_events": [EVENT], "instances": [{"t_s": 0, "desired": 1, "in_service": 1}],
                 "reaction_s_ci95": [45, 50], "cost_usd": 0.12}


def test_a_configuration_reads_as_records():
    document = read_document({"deploy": "local", "traffic": [{"rps": 2, "duration_s": 60}],
                              "configurations": [CONFIGURATION, {"index": 2, "label": "older"}]})
    first, older = document.configurations or ()
    (event,) = first.scale_events or ()
    assert (event.direction, event.from_, event.to, event.reaction_s_ci95) == ("out", 1, 3, (45, 50))
    assert first.instances == (InstanceSample.of({"t_s": 0, "desired": 1, "in_service": 1}),)
    assert (first.cost_usd, first.policy, first.reaction_s_ci95) == (0.12, {"min_instances": 1}, (45, 50))
    assert (older.scale_events, older.instances, older.cost_usd, older.run_dir) == (None, None, None, None)
    assert document.deploy == "local" and [p.rps for p in document.traffic or ()] == [2]


def test_a_document_without_heading_keys_reads_them_as_empty_text():
    document = read_document({"configurations": []})
    assert (document.deploy, document.started_at, document.ended_at) == ("", "", "")
    assert read_document({"deploy": None}).deploy is None


def test_the_csv_row_quotes_the_typed_scale_events_and_policy():
    header, rows = render.csv_rows({"configurations": [CONFIGURATION, {"index": 2, "label": "older"}]})
    assert rows[0]["scale_events"] == "out 1->3 at 30 s" and rows[0]["min_instances"] == 1
    assert rows[1]["scale_events"] == "" and rows[1]["min_instances"] is None
    assert header[-1] == "scale_events"


def test_the_emulators_log_reads_typed_and_moves_to_the_run_seconds(tmp_path):
    import json

    from sm_locust.record.model import Summary
    from sm_locust.sweep.autoscaling.runner import FLEET_LOG
    from sm_locust.sweep.autoscaling.sweep import emulator_instances

    summary = Summary.make(schema=1, started_at="2026-01-01T00:00:10Z")  # the run starts 10 s after the fleet
    started = 1767225600.0  # 2026-01-01T00:00:00Z
    log = {"time_scale": 2.0, "started_at": started, "instances": [{"t_s": 0, "desired": 1, "in_service": 1},
                                                                   {"t_s": 30, "desired": 2, "in_service": 1}]}
    (tmp_path / FLEET_LOG).write_text(json.dumps(log))
    assert emulator_instances(tmp_path, summary) == [{"t_s": 0.0, "desired": 1, "in_service": 1},
                                                     {"t_s": 10.0, "desired": 2, "in_service": 1}]
    (tmp_path / FLEET_LOG).write_text(json.dumps({"instances": log["instances"]}))
    assert emulator_instances(tmp_path, summary) is None  # no fleet start: nothing to place
