"""`sm-locust run --traffic FILE`: open-loop rate phases (shapes/traffic.py), their checks, and a short
real run whose sends follow the phases."""

from __future__ import annotations

import json

import pytest

from sm_locust.config.options import parse_options
from sm_locust.core.rules import chosen_shape
from sm_locust.errors import UsageError
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.shapes.settings import ShapeSettings, load_traffic
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli


def settings(**options) -> ShapeSettings:
    return ShapeSettings.from_options(parse_options(options))


def test_traffic_from_a_file_or_inline(tmp_path):
    path = tmp_path / "traffic.yaml"
    path.write_text("- {duration_s: 300, rps: 20}\n- {duration_s: 600, rps: 150}\n")
    assert load_traffic(str(path)).as_list() == [{"duration_s": 300, "rps": 20}, {"duration_s": 600, "rps": 150}]
    assert load_traffic('{"phases": [{"duration_s": 5, "rps": 1}]}').duration_s == 5


@pytest.mark.parametrize("value, needle", [
    ("missing.yaml", "--traffic 'missing.yaml' is neither a readable file nor phases written inline"),
    ("[{duration_s: 5, rps: 1", "--traffic '[{duration_s: 5, rps: 1': not valid YAML"),
    ("[]", "--traffic is empty"),
    ("[{duration_s: 5}]", "--traffic[0] needs rps"),
])
def test_bad_traffic_is_one_line(value, needle):
    with pytest.raises(UsageError) as info:
        load_traffic(value)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_traffic_implies_its_shape_and_rules_out_the_others():
    assert chosen_shape(None, target_rps=None, traffic="[{duration_s: 5, rps: 1}]") == "traffic"
    with pytest.raises(UsageError, match="use it with --shape traffic"):
        settings(traffic="[{duration_s: 5, rps: 1}]").check("open")
    with pytest.raises(UsageError, match="--time-scale compresses the phases of --traffic"):
        settings(time_scale=30.0).check(None)
    with pytest.raises(UsageError, match="--time-scale must be more than 0"):
        settings(traffic="[{duration_s: 5, rps: 1}]", time_scale=0.0)
    with pytest.raises(UsageError, match="--shape traffic needs --traffic FILE"):
        settings().check("traffic")
    assert settings(traffic="[{duration_s: 5, rps: 1}]", rate_per_user=5.0).check("traffic").rate_per_user == 5.0


@pytest.mark.e2e
def test_an_empty_traffic_file_stops_the_run_before_anything_starts(tmp_path):
    (tmp_path / "traffic.yaml").write_text("[]\n")
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--payload",
                     str(SAMPLE_PAYLOAD), "--traffic", "traffic.yaml", "--out", "out", cwd=tmp_path, timeout=60)
    assert_one_line_error(result, 2, "--traffic is empty")
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_a_run_sends_each_phase_at_its_rate(endpoint, tmp_path):
    phases = [{"duration_s": 2, "rps": 8}, {"duration_s": 2, "rps": 0}, {"duration_s": 2, "rps": 24}]
    (tmp_path / "traffic.json").write_text(json.dumps(phases))
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                     "--traffic", "traffic.json", "--out", "out", cwd=tmp_path, timeout=90)
    assert result.returncode == 0, result.stderr + result.stdout
    for line in ("traffic: 3 phases, 6 s", "phase 1/3 at 0 s: 8 req/s for 2 s", "phase 2/3 at 2 s: 0 req/s for 2 s",
                 "phase 3/3 at 4 s: 24 req/s for 2 s", "stopped: traffic finished (6 s)"):
        assert line in result.stdout, result.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["traffic"] == {"phases": phases, "time_scale": 1.0}
    sent = [s.sent or 0 for s in read_seconds(timeline_path(tmp_path / "out"))]
    # each change takes effect at the shape's next tick: within half a second either way on a busy machine
    # (seen: the stop 0.12 s late, 3 more sends at 24/s)
    assert 8 * 2 + 24 * 2 - 12 <= sum(sent) <= 8 * 2 + 24 * 2 + 12
    assert max(sent) >= 20 and min(sent[2:4]) <= 2  # the third phase at 24/s; the second sends nothing
