"""The Locust child hands back summary.json as the typed run record (`record.model.Summary`), through
`start_run`: the record is the file, key for key and in order."""

from __future__ import annotations

import json

import pytest

from sm_locust.api.options import run_arguments
from sm_locust.core.plan import plan_run
from sm_locust.core.start import start_run
from sm_locust.record.model import Summary
from tests.conftest import SAMPLE_PAYLOAD


@pytest.mark.e2e
def test_a_run_returns_its_summary_as_the_typed_record_of_the_file(endpoint, tmp_path):
    given = {"endpoint_name": "ep", "endpoint_url": endpoint.url, "payload": str(SAMPLE_PAYLOAD), "users": 2,
             "spawn_rate": 10, "run_time": "2s", "quiet": True, "out": str(tmp_path / "run")}
    out, summary = start_run(plan_run(run_arguments(given, [])), echo=lambda line: None)
    assert isinstance(summary, Summary)
    written = json.loads((out / "summary.json").read_text())
    assert summary.to_json() == written and list(summary.to_json()) == list(written)
    assert summary.totals.requests == written["totals"]["requests"] > 0
    assert summary.totals.failures == 0 and summary.complete is True
