"""The report's charts read right (issue 31), on synthetic runs: "vs load" lines joined by load with
the order the steps ran numbered on the markers, whole-number load axes, each percentile once, the
SLO drawn where one was given, the knee on the line it marks and none for a constant load, and the
Summary led by the run's question (an LLM run's tokens, a multi-model run's cache); an autoscaling
sweep's page draws each configuration's latency, traffic and instances."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from sm_locust.record.model import Autoscaling, Llm, SustainablePoint
from sm_locust.report.autoscaling import AutoscalingView, autoscaling_figure, phase_steps
from sm_locust.report.llm import LlmStep, LlmView
from sm_locust.report.loadaxis import by_load, integer_ticks, out_of_order
from sm_locust.report.render import ReportModel, figures, headline_rows, steps_table
from sm_locust.report.slos import RunSlos
from sm_locust.report.targets import TargetView
from sm_locust.sweep.autoscaling.render import configuration_figures, fig_cost, fig_instances, seconds_title

USERS = [1, 4, 8, 16, 12, 5]  # a search's visits, out of load order
GOODPUT = [50.0, 180.0, 300.0, 320.0, 318.0, 220.0]
P95 = [20.0, 25.0, 60.0, 400.0, 150.0, 30.0]


def steps_frame(users=USERS, goodput=GOODPUT, p95=P95) -> pd.DataFrame:
    return pd.DataFrame({"step": range(1, len(users) + 1), "users": users, "rps": goodput, "goodput_rps": goodput,
                         "p50_ms": [p / 2 for p in p95], "p95_ms": p95, "p99_ms": [p * 1.5 for p in p95],
                         "client_avg_ms": [p / 1.8 for p in p95], "error_rate": [0.0] * len(users)})


def model(steps: pd.DataFrame, point: dict | None = None, **kwargs) -> ReportModel:
    sustainable = None if point is None else SustainablePoint.make(**point)
    return ReportModel(title="t", run={}, steps=steps, seconds=pd.DataFrame({"epoch_s": []}), point=sustainable,
                       cost=kwargs.pop("cost", {}), errors={}, **kwargs)


def trace(fig: go.Figure, name: str):
    return next(t for t in fig.data if t.name == name)


def test_by_load_orders_the_steps_and_keeps_the_visit_order():
    ordered = by_load(steps_frame())
    assert list(ordered["users"]) == [1, 4, 5, 8, 12, 16]
    assert list(ordered["visit"]) == [1, 2, 6, 3, 5, 4]
    assert out_of_order(ordered) and not out_of_order(by_load(steps_frame([1, 2, 3], [1.0] * 3, [1.0] * 3)))


def test_load_axes_get_whole_number_ticks():
    assert integer_ticks([1, 4, 8, 16, 12, 5]) == {"tickmode": "linear", "tick0": 0, "dtick": 2, "tickformat": "d"}
    assert integer_ticks([1, 2, 3])["dtick"] == 1 and integer_ticks([3, 3])["dtick"] == 1
    assert integer_ticks([0, 500])["dtick"] == 42 and integer_ticks([]) == {}


def test_throughput_is_joined_by_load_with_numbered_markers_and_the_knee_on_its_line():
    m = model(steps_frame(), {"users": 12, "step": 5, "rps": 330.0, "capacity_rps": 319.0},
              slos=RunSlos(latency_slo_ms=100.0, slo_percentile=95.0))
    fig = figures(m)["fig-throughput"]
    goodput = trace(fig, "goodput (successful/s)")
    assert list(goodput.x) == [1, 4, 5, 8, 12, 16]  # no line loops back
    assert list(goodput.text) == ["1", "2", "6", "3", "5", "4"]  # the order they ran, on the markers
    knee = trace(fig, "knee")
    assert list(knee.x) == [12] and list(knee.y) == [318.0]  # the step's own goodput, not the verdict's 330
    over = trace(fig, "over the p95 SLO")
    assert list(over.x) == [12, 16]  # p95 150 and 400 ms > 100 ms
    assert fig.layout.xaxis.dtick == 2 and fig.layout.xaxis.tickformat == "d"
    assert "numbers: the order the steps ran" in fig.layout.title.text


def test_each_percentile_once_and_the_slo_as_a_line():
    fig = figures(model(steps_frame(), {"users": 12, "step": 5, "rps": 318.0},
                        slos=RunSlos(latency_slo_ms=100.0, slo_percentile=95.0)))["fig-latency-users"]
    names = [t.name for t in fig.data]
    assert names == ["p50", "p95", "p99", "avg"]
    assert [s.y0 for s in fig.layout.shapes if s.line.dash == "dash" and s.y0 == s.y1] == [100.0]
    assert any("p95 SLO 100 ms" in a.text for a in fig.layout.annotations)


def test_a_constant_load_has_no_knee_and_says_so():
    m = model(steps_frame([8], [150.0], [40.0]), {"users": 8, "step": 1, "rps": 150.0, "goodput_rps": 150.0})
    fig = figures(m)["fig-throughput"]
    assert [t.name for t in fig.data if t.name == "knee"] == [] and not fig.layout.shapes
    assert "constant load" in fig.layout.title.text
    assert headline_rows(m)[0][0] == "Throughput (constant load: 8 users, no knee to find)"


def test_an_llm_run_leads_with_tokens_and_draws_ttft_and_itl_with_their_slos():
    steps = [{"users": u, "output_tokens_per_s": 40.0 * u, "ttft_p50_ms": 100.0 * u, "ttft_p95_ms": 150.0 * u,
              "itl_p50_ms": 20.0 + u, "itl_p95_ms": 30.0 + u} for u in (1, 4, 2)]
    held = tuple(LlmStep(s["users"], Llm.make(**{k: v for k, v in s.items() if k != "users"})) for s in steps)
    view = LlmView(run=Llm.make(output_tokens_per_s=100.0), steps=held, point=held[1].llm, where="the plateau's step")
    slos = RunSlos(ttft_slo_ms=1000.0, itl_slo_ms=60.0, slo_percentile=95.0)
    m = model(steps_frame([1, 4, 2], [1.0, 3.0, 2.0], [900.0, 1500.0, 1100.0]), {"users": 4, "step": 2, "rps": 3.0},
              llm=view, slos=slos, cost={"price_per_hour_usd": 1.212, "instance_count": 1})
    rows = [k for k, _ in headline_rows(m)]
    assert rows[:4] == ["Output tokens/s (the plateau's step)", "Time to first token p50 / p95 / p99",
                        "Inter-token latency p50 / p95 / p99", "$ per 1M output tokens"]
    drawn = figures(m)
    tokens = drawn["fig-llm-tokens"]
    assert list(tokens.data[0].x) == [1, 2, 4] and list(tokens.data[0].text) == ["1", "3", "2"]
    latency = drawn["fig-llm-latency"]
    assert [t.name for t in latency.data] == ["TTFT p50", "TTFT p95", "ITL p50", "ITL p95"]  # each once
    lines = {(s.yref, s.y0) for s in latency.layout.shapes if s.line.dash == "dash" and s.y0 == s.y1}
    assert lines == {("y", 1000.0), ("y2", 60.0)}  # each SLO on its own panel
    table = steps_table(m.steps, view)
    assert "<th>output tokens/s</th><th>TTFT p95 ms</th><th>ITL p95 ms</th>" in table and "<td>160.0</td>" in table


def test_a_multi_model_run_leads_with_its_cache():
    cache = {"source": "endpoint", "requests": 1000, "hit_rate": 0.9, "cold": {"requests": 100, "p50_ms": 800.0,
                                                                              "p95_ms": 1200.0},
             "warm": {"requests": 900, "p50_ms": 20.0, "p95_ms": 35.0}}
    targets = TargetView(targets=[{"name": "model-0001.tar.gz", "requests": 600},
                                  {"name": "others", "requests": 400, "targets": 37}], requests=1000,
                         mix={"spec": "zipf:1.1:1000", "targets": 1000}, cache=cache,
                         minutes=[{"time": 0, "hit_pct": 85.0, "loaded": 30.0}, {"time": 60, "hit_pct": 92.0,
                                                                                 "loaded": 38.0}])
    rows = dict(headline_rows(model(steps_frame([8], [100.0], [40.0]), {"users": 8, "step": 1, "rps": 100.0},
                                    targets=targets)))
    assert list(rows)[:4] == ["Model cache hit rate", "Cold vs warm latency p50 / p95", "Models loaded",
                              "Models requested"]
    assert rows["Model cache hit rate"] == "90.0 % of 1,000 successful requests (100 cold)"
    assert rows["Cold vs warm latency p50 / p95"] == "cold 800 / 1,200 ms; warm 20 / 35 ms"
    assert rows["Models loaded"].startswith("38 per instance at the end")
    assert rows["Models requested"] == "38 models requested of 1,000 in the mix (zipf:1.1:1000)"


INSTANCES = [{"t_s": 0.0, "desired": 1, "in_service": 1}, {"t_s": 300.0, "desired": 3, "in_service": 1},
             {"t_s": 540.0, "desired": 3, "in_service": 3}]
SCALING = {"duration_s": 900.0, "instances": INSTANCES, "breaches": [[300.0, 540.0]], "time_scale": 30.0,
           "slo": {"slo_ms": 250.0, "percentile": 95.0}}


def test_the_autoscaling_figure_shows_traffic_latency_and_both_instance_counts():
    view = AutoscalingView(Autoscaling.from_json(SCALING), t_s=[10.0, 20.0], rps=[20.0, 150.0],
                           latency_ms=[40.0, 300.0], slo_ms=250.0,
                           phases=[{"duration_s": 300, "rps": 20}, {"duration_s": 600, "rps": 150}])
    assert phase_steps(view.phases) == ([0.0, 300.0, 900.0], [20.0, 150.0, 150.0])
    assert phase_steps(view.phases, end=200.0) == ([0.0, 200.0], [20.0, 20.0])  # the run stopped in phase 1
    drawn = []
    autoscaling_figure(view, lambda fig, div_id, height=0: drawn.append(fig), lambda *a: None)
    fig = drawn[0]
    assert [t.name for t in fig.data] == ["offered (traffic phases)", "requests/s completed", "p95 per second",
                                          "in service", "desired"]
    assert trace(fig, "in service").fill == "tozeroy" and trace(fig, "desired").line.dash == "dash"  # both seen
    assert fig.layout.yaxis3.dtick == 1 and fig.layout.yaxis3.tickformat == "d"
    assert [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"] == [(300.0, 540.0)] * 3  # every row
    assert fig.layout.yaxis2.range[0] == 0 and fig.layout.yaxis2.range[1] > 300.0  # the p95 at its highest
    assert fig.layout.yaxis.rangemode == "tozero"  # the throughput from 0, not from its lowest rate


def test_the_slo_line_and_its_label_sit_inside_the_latency_panel_when_the_latency_kept_under_it():
    view = AutoscalingView(Autoscaling.from_json(SCALING), t_s=[10.0, 20.0, 30.0], rps=[20.0, 150.0, 150.0],
                           latency_ms=[40.0, None, 160.0], slo_ms=250.0, phases=[{"duration_s": 900, "rps": 150}])
    drawn = []
    autoscaling_figure(view, lambda fig, div_id, height=0: drawn.append(fig), lambda *a: None)
    low, high = drawn[0].layout.yaxis2.range
    [slo] = [s for s in drawn[0].layout.shapes if s.type == "line"]
    assert low == 0 and slo.y0 == 250.0 and high >= 1.1 * 250.0  # not on the panel's top edge


def test_an_autoscaling_sweep_page_draws_each_configuration_from_its_run_folder(tmp_path: Path):
    run = tmp_path / "min_instances-1"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"started_at": "2026-01-01T00:00:00Z", "autoscaling": SCALING,
                                                  "traffic": {"phases": [{"duration_s": 900, "rps": 40}]}}))
    document = {"configurations": [{"index": 1, "label": "min_instances 1", "run_dir": "min_instances-1",
                                    "instances": INSTANCES, "duration_s": 900.0},
                                   {"index": 2, "label": "min_instances 2", "run_dir": "gone"}]}
    page = configuration_figures(document, tmp_path)
    assert 'id="fig-as-run-1"' in page and "min_instances 1: latency and instances over the traffic" in page
    assert 'id="fig-as-run-2" class="note">min_instances 2: not drawn' in page
    assert '"tickformat":"d"' in fig_instances(document).replace(" ", "")


def test_the_sweep_pages_time_axis_says_emulated_only_on_a_local_sweep():
    local = {"deploy": "local", "configurations": [{"settings": {"autoscaling.time_scale": 120.0}, "label": "a",
                                                    "instances": INSTANCES, "duration_s": 900.0}]}
    assert seconds_title(local) == "run seconds (emulated, x120)"
    assert '"text":"run seconds (emulated, x120)"' in fig_instances(local).replace(": ", ":")
    assert seconds_title({**local, "deploy": "sagemaker"}) == "run seconds"  # real seconds on AWS
    mixed = {"deploy": "local", "configurations": [{"settings": {"autoscaling.time_scale": s}} for s in (30, 120)]}
    assert seconds_title(mixed) == "run seconds (emulated)"


def test_a_goodput_above_the_attempt_rate_is_not_drawn_as_goodput():
    steps = steps_frame([1, 4], [0.6, 1.8], [900.0, 1500.0])
    steps["goodput_rps"] = [36.2, 121.1]  # a token-objective step record: output tokens/s, not requests
    fig = figures(model(steps, {"users": 4, "step": 2, "rps": 1.8}))["fig-throughput"]
    assert fig.data[0].name == "client rps (attempted)" and list(fig.data[0].y) == [0.6, 1.8]
    assert trace(fig, "knee").y == (1.8,)


def _range(page: str, axis: str) -> list[float]:
    """The range set on the layout's `axis` (the template's axes, set earlier in the page, have none)."""
    ranges = dict(re.findall(r'"(\w+)":\{"title":\{"text":"[^"]*"\},"range":\[([^\]]*)\]', page.replace(" ", "")))
    return [float(v) for v in ranges[axis].split(",")]


def test_the_cost_chart_leaves_room_for_the_labels_of_its_extreme_points():
    document = {"configurations": [{"label": "min_instances 1", "cost_usd": 0.116, "slo_breach_s": 610.0},
                                   {"label": "min_instances 2", "cost_usd": 0.151, "slo_breach_s": 0.0}]}
    page = fig_cost(document)
    x_range, y_range = _range(page, "xaxis"), _range(page, "yaxis")
    assert x_range[0] < 0.116 - 0.005 and x_range[1] > 0.151 + 0.005  # 15 % of the span each side
    assert y_range[0] < 0 and y_range[1] >= 610.0 * 1.25  # the top label inside the plot
    # one unpriced: all drawn by instance-hours; one without them either is left out, not drawn at None
    document["configurations"] += [{"label": "unpriced", "instance_hours": 0.5, "slo_breach_s": 3.0}]
    page = fig_cost(document)
    assert "unpriced" in page and "min_instances 1" not in page and _range(page, "xaxis")[0] < 0.5
