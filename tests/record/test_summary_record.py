"""summary.json as typed records (record/model.py): every stored file reads and writes back byte for
byte, today's builder writes the bytes the dict builder wrote, and the readers' methods."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sm_locust.errors import UsageError
from sm_locust.record.model import (
    DEFAULT_SLO_PERCENTILE,
    Llm,
    ShapeError,
    Step,
    Summary,
    Totals,
    load_words,
    percentile_key,
)
from sm_locust.record.schema import check_summary
from sm_locust.record.summary import build_summary, run_summary, write_json
from tests.record.summary_inputs import constant_inputs, inputs

DATA = Path(__file__).resolve().parents[1] / "data"
STORED = sorted([*DATA.glob("summaries/*.json"), *DATA.glob("report/golden/summary.json")])


def test_the_stored_files_are_there():
    assert len(STORED) == 3


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_stored_summary_reads_and_writes_back_the_same_bytes(path, tmp_path):
    text = path.read_text()
    summary = Summary.from_json(json.loads(text))
    assert summary.schema == 1
    written = write_json(tmp_path / "summary.json", summary.to_json()).read_text()
    assert written == text if "summaries" in path.parts else json.loads(written) == json.loads(text)


@pytest.mark.parametrize(("name", "build"), [("search", inputs), ("constant", constant_inputs)])
def test_the_typed_builder_writes_the_bytes_the_dict_builder_wrote(name, build, tmp_path):
    written = write_json(tmp_path / "summary.json", build_summary(**build())).read_text()
    assert written == (DATA / "summaries" / f"built-2026-12-07-{name}.json").read_text()
    assert run_summary(**build()).to_json() == json.loads(written)


def test_the_first_writers_file_reads_with_its_figures_and_none_for_later_keys():
    summary = Summary.from_json(json.loads((DATA / "report/golden/summary.json").read_text()))
    assert (summary.totals.requests, summary.totals.failures, summary.totals.p95_ms) == (140, 2, 140)
    assert summary.totals.errors == {"ModelError": 1, "ThrottlingException": 1}
    assert [s.users for s in summary.steps] == [1, 2] and [s.rps for s in summary.steps] == [8.0, 20.0]
    assert summary.steps[0].load == "1 user" and summary.steps[1].load == "2 users"
    assert summary.plateau is not None and summary.plateau.reason == "max users reached"
    assert summary.plateau.percentile(99) == 150 and summary.plateau.load_text == "2 users"
    # keys a later writer added read as "not recorded"
    assert summary.duration_s is None and summary.verdict is None and summary.complete is None
    assert summary.totals.interval("p95_ms") is None and not summary.totals.records_interval("p95_ms")
    assert summary.steps[0].goodput_rps is None and not summary.inconclusive


def test_todays_file_reads_with_its_figures():
    summary = Summary.from_json(json.loads((DATA / "summaries/built-2026-12-07-search.json").read_text()))
    assert summary.totals.requests == 1790 and summary.totals.in_flight_at_stop == 2
    assert summary.totals.interval("p95_ms") == (44, 46)
    assert summary.totals.records_interval("p99_ms") and summary.totals.interval("p99_ms") is None
    assert summary.totals.percentile(DEFAULT_SLO_PERCENTILE) == summary.totals.p95_ms == 45
    closed, opened = summary.steps
    assert closed.load == "2 users" and closed.target_rate is None
    assert opened.load == "50 req/s offered" and opened.late_fraction is not None
    assert closed.percentile(99.9) == closed.p99_9_ms and closed.percentile(90) == closed.p90_ms
    assert closed.llm is not None and closed.llm.percentile(95, "ttft_") == 20 and closed.llm.ci95 is None
    assert summary.llm is not None and summary.llm.interval("ttft_p95_ms") == (18, 23)
    assert summary.plateau is not None and summary.step(summary.plateau.capacity_step) is opened
    assert summary.step(None) is None and summary.step(7) is None
    assert summary.by_name is not None and summary.by_name["InvokeEndpoint"].request_types == ["POST"]
    assert summary.payload is not None and summary.payload.avg_bytes == 10 and summary.payload.source == "body.json"
    assert summary.payload.to_json() == {"source": "body.json", "count": 1, "min_bytes": 10, "avg_bytes": 10,
                                         "max_bytes": 10}
    assert summary.stop_reason == "run time 40 s reached (-t)" and summary.complete is True
    assert summary.extra == {"future_section": {"added": "by a later version"}}  # kept, not read


def test_a_client_bound_step_makes_the_verdict_inconclusive_naming_it():
    summary = run_summary(**constant_inputs())
    assert summary.inconclusive and summary.killed  # complete: false
    assert summary.verdict is not None and summary.verdict.reason is not None
    assert summary.verdict.reason.startswith("step 1 (2 users) was client-bound (and 1 more step)")


def test_unknown_keys_of_a_newer_writer_are_kept_aside_at_every_level():
    data = json.loads((DATA / "summaries/built-2026-12-07-search.json").read_text())
    data["schema"] = 2
    data["queued_elsewhere"] = {"queued": 3}
    data["steps"][0]["loop_lag_ms"] = {"p99": 4.5}
    data["totals"]["loop_lag_ms"] = 2
    summary = Summary.from_json(data)
    assert summary.schema == 2 and summary.extra["queued_elsewhere"] == {"queued": 3}
    assert summary.steps[0].extra == {"loop_lag_ms": {"p99": 4.5}}
    assert list(summary.to_json()) == list(data) and summary.to_json() == data


def test_a_key_of_the_wrong_kind_is_named_and_refused_with_one_line():
    data = json.loads((DATA / "summaries/built-2026-12-07-search.json").read_text())
    data["steps"][1]["rps"] = "fast"
    with pytest.raises(ShapeError, match=r"^steps\[1\]\.rps is 'fast' \(a JSON string\), not a number$"):
        Summary.from_json(data)
    with pytest.raises(UsageError, match=r"s\.json is not an sm-locust summary.json: steps\[1\]\.rps is 'fast'"):
        check_summary(data, "s.json")
    for bad, where in (({"totals": None}, "totals is None"), ({"steps": {}}, "steps is {}"),
                       ({"by_name": {"x": 3}}, "by_name.x is a JSON number, not an object"),
                       ({"totals": {"errors": {"E": 1.5}}}, "totals.errors.E is 1.5, not a whole number")):
        with pytest.raises(ShapeError, match="^" + where.replace(".", r"\.")):
            Summary.from_json(bad)


def test_traffic_plateau_tokens_seconds_behind_and_cache_sides_read_typed_and_are_held_to_their_kinds():
    data = {"schema": 1, "traffic": {"phases": [{"duration_s": 300, "rps": 20}, {"duration_s": 600, "rps": 150.5}],
                                     "time_scale": 30.0},
            "plateau": {"users": 4, "llm": {"output_tokens_per_s": 140.0, "ttft_p95_ms": 250.0}},
            "autoscaling": {"slo_breach_s": 781.0, "breach_client_bound_s": 12.0},
            "model_cache": {"source": "endpoint", "requests": 99, "hit_rate": 0.9,
                            "cold": {"requests": 9, "p95_ms": 900, "wait_p50_ms": 350}, "warm": None}}
    summary = Summary.from_json(data)
    assert summary.traffic is not None and summary.traffic.time_scale == 30.0
    assert [(p.duration_s, p.rps) for p in summary.traffic.phases] == [(300, 20), (600, 150.5)]
    assert summary.plateau is not None and summary.plateau.llm is not None
    assert summary.plateau.llm.output_tokens_per_s == 140.0 and summary.plateau.llm.percentile(95) == 250.0
    assert summary.autoscaling is not None and summary.autoscaling.breach_client_bound_s == 12.0
    cache = summary.model_cache
    assert cache is not None and cache.cold is not None and cache.warm is None
    assert (cache.cold.requests, cache.cold.p95_ms, cache.cold.wait_p50_ms, cache.cold.p50_ms) == (9, 900, 350, None)
    assert summary.to_json() == data
    for bad, where in (({"traffic": {"phases": [{"duration_s": "5 min", "rps": 20}]}},
                        "traffic.phases[0].duration_s is '5 min' (a JSON string), not a number"),
                       ({"traffic": {"phases": {}}}, "traffic.phases is {}"),
                       ({"plateau": {"llm": [140.0]}}, "plateau.llm is [140.0] (a JSON list), not an object"),
                       ({"autoscaling": {"breach_client_bound_s": "12"}},
                        "autoscaling.breach_client_bound_s is '12' (a JSON string), not a number"),
                       ({"model_cache": {"cold": {"p95_ms": "slow"}}},
                        "model_cache.cold.p95_ms is 'slow' (a JSON string), not a number")):
        with pytest.raises(ShapeError, match="^" + re.escape(where)):
            Summary.from_json(bad)


def test_a_record_built_in_code_writes_its_keys_in_the_order_given():
    step = Step.make(users=3, rps=10.0, requests=30, failures=0)
    assert list(step.to_json()) == ["users", "rps", "requests", "failures"]
    later = step.adding(target_rate=None, judged=False)
    assert list(later.to_json()) == ["users", "rps", "requests", "failures", "target_rate", "judged"]
    assert later.judged is False and later.load == "3 users"
    assert Totals.make(requests=4, failures=1).failure_rate == 0.25
    assert Totals.make(requests=4, failures=1, error_rate=0.5).failure_rate == 0.5
    assert Llm.make(ttft_p95_ms=9).percentile(95) == 9 and Llm.make(itl_p50_ms=2).percentile(50, "itl_") == 2


def test_one_name_per_percentile_and_one_wording_per_load():
    assert [percentile_key(p) for p in (50, 90.0, 95, 99, 99.9)] == ["p50_ms", "p90_ms", "p95_ms", "p99_ms",
                                                                   "p99_9_ms"]
    assert percentile_key(95, "ttft_") == "ttft_p95_ms"
    assert [load_words(1, None), load_words(12, None), load_words(0, 40.0), load_words(3, 2.5)] == [
        "1 user", "12 users", "40 req/s offered", "2.5 req/s offered"]


def test_a_section_grows_by_one_field_and_reads_it_typed():
    from dataclasses import dataclass

    from sm_locust.record.model import json_field

    @dataclass(frozen=True, kw_only=True)
    class LaggedStep(Step):
        loop_lag_ms: float | None = json_field("number?")

    data = {"users": 2, "rps": 9.5, "loop_lag_ms": 3.25, "later": True}
    step = LaggedStep.from_json(data)
    assert (step.loop_lag_ms, step.rps, step.extra) == (3.25, 9.5, {"later": True})
    assert step.to_json() == data and list(step.to_json()) == list(data)
    with pytest.raises(ShapeError, match=r"^loop_lag_ms is 'slow' \(a JSON string\), not a number$"):
        LaggedStep.from_json({**data, "loop_lag_ms": "slow"})


def test_unjudged_reading_skips_a_section_it_cannot_read_and_writes_it_back():
    data = {"schema": 1, "totals": [], "steps": "none", "plateau": 3, "autoscaling": {"instances": [{"t_s": 1,
                                                                                                   "desired": 2}]}}
    summary = Summary.of(data)  # not judged: what a reader of this process's own dict does
    assert summary.totals.requests == 0 and summary.steps == () and summary.plateau is None
    assert summary.autoscaling is not None and summary.autoscaling.instances[0].desired == 2
    assert summary.to_json() == data
    with pytest.raises(ShapeError, match="^totals is"):
        Summary.from_json(data)
    fixed = summary.adding(plateau={"users": 2})
    assert fixed.plateau is not None and fixed.plateau.users == 2 and fixed.to_json()["plateau"] == {"users": 2}


def test_a_run_a_signal_stopped_says_its_answer_is_not_decided(tmp_path):
    from sm_locust.record.model import Verdict
    from sm_locust.record.summary import interrupted_verdict, mark_interrupted

    cut = "interrupted by SIGTERM before the run's end: its answer is not decided"
    assert interrupted_verdict(Verdict.make(status="ok", reason=None), "SIGTERM").to_json() == \
        {"status": "inconclusive", "reason": cut}
    assert interrupted_verdict(None, "SIGTERM").reason == cut
    starved = Verdict.make(status="inconclusive", reason="the load generator was the bottleneck")
    assert interrupted_verdict(starved, "SIGINT").reason == \
        "interrupted by SIGINT before the run's end: its answer is not decided; the load generator was the bottleneck"
    path = tmp_path / "summary.json"
    path.write_text('{"schema": 1, "totals": {"requests": 40}, "verdict": {"status": "ok", "reason": null}}')
    mark_interrupted(path, "SIGTERM")
    data = json.loads(path.read_text())
    assert data["totals"] == {"requests": 40} and data["verdict"] == {"status": "inconclusive", "reason": cut}
    (tmp_path / "bad.json").write_text("[1, 2")
    mark_interrupted(tmp_path / "bad.json", "SIGTERM")  # unreadable: left as it is
    assert (tmp_path / "bad.json").read_text() == "[1, 2"


def test_the_scaling_slo_reads_typed_and_writes_back_as_read():
    block = {"slo": {"slo_ms": 250.0, "percentile": 99, "unknown": 1}, "slo_breach_s": 4.0}
    scaling = Summary.from_json({"schema": 1, "autoscaling": block}).autoscaling
    assert scaling is not None and scaling.slo is not None
    assert (scaling.slo.slo_ms, scaling.slo.percentile) == (250.0, 99)
    assert scaling.to_json() == block
    with pytest.raises(ShapeError, match=r"autoscaling\.slo\.slo_ms"):
        Summary.from_json({"schema": 1, "autoscaling": {"slo": {"slo_ms": "fast"}}})
    assert Summary.from_json({"schema": 1, "autoscaling": {"slo": None}}).autoscaling.slo is None
