"""The report's autoscaling part (report/autoscaling.py) and summary.json's `autoscaling` block as the
readers hold it (record/schema.py), on a synthetic run folder."""

from __future__ import annotations

import json

from sm_locust.measure.timeline import Second
from sm_locust.record.schema import summary_problem
from sm_locust.record.timeline import TimelineWriter
from sm_locust.report.autoscaling import FIG_ID, autoscaling_figure, autoscaling_rows, autoscaling_view
from sm_locust.report.render import _div, _missing
from sm_locust.scaling.figures import autoscaling_figures
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.timeline import InstanceSample

T0 = 1_700_000_000.0
POLICY = ScalingPolicy(1, 3, 4200, scale_out_cooldown_s=60).check()
INSTANCES = [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1), InstanceSample(720, 3, 3)]


def run_folder(tmp_path):
    """40 real seconds at x30: 20 then 150 req/s, slow while the third instance starts."""
    seconds = []
    for i in range(40):
        rate = 150 if 10 <= i < 30 else 20
        latency = 900 if 14 <= i < 26 else 30
        seconds.append(Second(t=T0 + i + 1, users=0, spawning=False, requests=rate, failures=0, hist={latency: rate},
                              sent=rate))
    writer = TimelineWriter(tmp_path / "timeline.jsonl")
    for s in seconds:
        writer.add(s)
    writer.close()
    figures = autoscaling_figures(INSTANCES, seconds, started_at=T0, policy=POLICY, slo_ms=250, price_per_hour=0.23,
                                  time_scale=30.0, source="local fleet (DescribeEndpoint)")
    summary = {"schema": 1, "started_at": "2023-11-14T22:13:20.000Z", "autoscaling": figures}
    return summary


def test_the_block_passes_the_readers_and_a_broken_one_is_named(tmp_path):
    summary = run_folder(tmp_path)
    assert summary_problem(json.loads(json.dumps(summary))) is None
    summary["autoscaling"]["instances"][1]["desired"] = "three"
    problem = summary_problem(summary)
    assert problem == "autoscaling.instances[1].desired is 'three' (a JSON string), not a whole number >= 0"


def test_the_report_draws_instances_under_throughput_and_latency_with_breaches_shaded(tmp_path):
    summary = run_folder(tmp_path)
    view = autoscaling_view(summary, tmp_path)
    assert view.t_s[0] == 30.0 and view.t_s[-1] == 1200.0  # run seconds, x30
    assert view.latency_ms[20] == 900 and view.slo_ms == 250
    [html] = autoscaling_figure(view, _div, _missing)
    assert f'id="{FIG_ID}"' in html
    assert '"x0":420.0' in html.replace(" ", "") and '"x1":780.0' in html.replace(" ", "")  # the breach, shaded
    assert "in service" in html and "desired" in html
    rows = dict(autoscaling_rows(view))
    assert rows["Scale out"] == "1 -> 3 at 480 s, 180 s after the metric crossed, serving 420 s after"
    assert rows["Seconds over the p95 SLO"] == "360"
    assert rows["Autoscaling clock"].startswith("emulated, x30")


def test_no_block_no_section(tmp_path):
    assert autoscaling_view({"schema": 1}, tmp_path) is None
    assert autoscaling_figure(None, _div, _missing) == [] and autoscaling_rows(None) == []
