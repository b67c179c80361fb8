"""deploy/grafana/sm-locust.json: a Grafana dashboard for `--publish prometheus`, checked without Grafana:
valid JSON with unique panel ids and grid places, every query on the Prometheus datasource variable, and
every sm_locust_* series it names one the master's /metrics serves (sm_locust.publish.prometheus)."""

from __future__ import annotations

import json
import re

from sm_locust.publish.prometheus import METRIC_NAMES
from tests.conftest import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "sm-locust.json"


def test_the_grafana_dashboard_queries_only_what_metrics_serves():
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    places = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels]
    assert len(set(places)) == len(places)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    named: set[str] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            assert 'endpoint=~"$endpoint"' in expr, expr
            named |= set(re.findall(r"\bsm_locust_[a-z_]+", expr))
    assert named <= set(METRIC_NAMES), named - set(METRIC_NAMES)
    # the figures are all there: requests, failures, latency histogram, in flight, users, step, LLM
    assert {"sm_locust_requests_total", "sm_locust_failures_total", "sm_locust_request_latency_seconds_bucket",
            "sm_locust_in_flight", "sm_locust_users", "sm_locust_step", "sm_locust_output_tokens_total",
            "sm_locust_time_to_first_token_seconds_bucket"} <= named
