"""The autoscaling sweep end to end on the local fleet emulation, with a compressed clock (x60: the
8-minute traffic runs in 8 s per configuration): the one end-to-end proof of issue 20's local side.

What a user relies on: the measured reaction and ready times are those the policy's model gives
(within one period), the instance counts polled from DescribeEndpoint are the emulator's own log,
a minimum that covers the peak breaches nothing while one that does not breaches while instances
start, and the cheaper configuration that holds the SLO is recommended.
"""

from __future__ import annotations

import json

import psutil
import pytest

from sm_locust.scaling.policy import ScalingPolicy, TargetTracking
from tests.conftest import SAMPLE_PAYLOAD, run_cli

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

PERIOD_S = 60.0  # InvocationsPerInstance's period
POLL_S = 10.0  # DescribeEndpoint every 10 emulated seconds

SWEEP = f"""\
name: scaling-e2e
deploy: local
endpoint: {{service_time_ms: 200, max_concurrency: 4}}   # one instance serves 20 req/s
autoscaling:
  min_instances: [1, 2]
  max_instances: 3
  target_value: 840            # 14 req/s per instance, per minute
  scale_out_cooldown_s: 60
  scale_in_cooldown_s: 300
  instance_start_s: 120
  time_scale: 60
traffic:
  - {{duration_s: 60, rps: 4}}
  - {{duration_s: 360, rps: 30}}     # the new instances serve 300 s into it
  - {{duration_s: 60, rps: 4}}
load: {{payload: {SAMPLE_PAYLOAD}}}
objective: {{slo_ms: 800, percentile: 95, max_breach_s: 0}}
price_per_hour: 0.23
"""


def _decisions_of(log):
    """The pure control loop fed the metric periods the emulator logged: what it should have decided."""
    loop = TargetTracking(ScalingPolicy(**log["policy"]).check(), log["fleet"]["instances"], log["instance_start_s"])
    for period in log["periods"]:
        loop.observe(period["t_s"], period["value"])
    return loop.decisions


def _pairs(samples):
    return [(s["desired"], s["in_service"]) for s in samples]


def test_an_autoscaling_sweep_on_the_emulation_matches_the_model_and_its_own_log(tmp_path):
    (tmp_path / "scaling.yaml").write_text(SWEEP)
    r = run_cli("sweep", "scaling.yaml", "--out", "out", cwd=tmp_path, timeout=240)
    out = tmp_path / "out"
    assert (out / "sweep.json").exists(), r.stdout + r.stderr
    doc = json.loads((out / "sweep.json").read_text())
    starved = [c for c in doc["configurations"] if c["status"] == "inconclusive"]
    if starved and r.returncode == 1:  # the sweep's own answer on a machine too busy to measure (sweep/trust.py)
        pytest.skip(f"the load generator was starved twice, so the sweep rightly said INCONCLUSIVE: "
                    f"{starved[0]['label']}: {starved[0]['reason']}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc["kind"] == "autoscaling" and doc["traffic"][1] == {"duration_s": 360, "rps": 30}
    one, two = doc["configurations"]
    assert (one["label"], two["label"]) == ("min_instances 1", "min_instances 2")
    for c in (one, two):
        assert c["status"] == "ok", c
        # the model: three periods above the target from the surge at 60 s, the instances 120 s later
        assert c["model_reaction_s"] == 180 and c["model_ready_s"] == 300
        # measured: from the first period the client's counts put above the target (one period early when a
        # period the surge cuts sits near the target: the emulator, counting what arrived, may not agree) to
        # the change as DescribeEndpoint showed it (up to 3 polls after the emulator's own, checked below).
        # CI read 250 s: the alarm one period early and the change polled 10 s after the model's 240 s
        resolution = PERIOD_S + 3 * POLL_S
        assert abs(c["reaction_s"] - c["model_reaction_s"]) <= resolution, c["scale_events"]
        assert abs(c["ready_s"] - c["model_ready_s"]) <= resolution, c["scale_events"]
        # how far it scaled: what the control loop decides from the periods the emulator logged. From the
        # traffic alone it is ceil(1800 / 840) = 3, but a client stall at a period's end moves that
        # period's sends into the next (x60: a 0.8-s stall on a busy machine is 48 emulated seconds)
        # and the loop, rightly, asks for 2: the log, not the traffic, is what it saw
        decided = [d.to_count for d in _decisions_of(json.loads((out / c["run_dir"] / "fleet_log.json").read_text()))]
        assert decided and c["scale_events"][0]["to"] == decided[0] and c["peak_instances"] == max(decided), \
            (c["scale_events"], decided)
        assert c["cost_usd"] == pytest.approx(c["instance_hours"] * 0.23)  # the traffic's, as the fleet scaled
        # what DescribeEndpoint said is what the emulator logged, one poll apart at most (and a little)
        polled, logged = c["instances"], c["emulator_instances"]
        assert _pairs(polled) == _pairs(logged), (polled, logged)
        assert all(abs(p["t_s"] - q["t_s"]) <= 3 * POLL_S for p, q in zip(polled, logged, strict=True))
        assert (out / c["run_dir"] / "summary.json").exists() and (out / c["run_dir"] / "fleet_log.json").exists()
    assert two["slo_breach_s"] == 0  # two instances hold 30 req/s while the third starts
    assert one["slo_breach_s"] > 0  # one instance does not: a queue until the new ones serve
    assert one["instance_hours"] < two["instance_hours"]
    assert doc["recommendation"]["label"] == "min_instances 2"
    assert doc["why_not"]["min_instances 1"].startswith(f"{one['slo_breach_s']:.0f} s over the SLO while 2 instances "
                                                       "started")
    lines = r.stdout.splitlines()
    assert any(line.strip().startswith("[1/2] phase 2/3 at ") for line in lines), r.stdout
    assert any(line.strip().startswith("[1/2] scale out 1 -> 3 at ") for line in lines), r.stdout
    said = [line.strip() for line in lines if line.strip().startswith("[1/2] ")]
    live = said.index("[1/2] scale out under way: desired 1 -> 3, 1 in service")  # said when polled, live:
    assert live < said.index(next(x for x in said if x.startswith("[1/2] phase 3/3 at ")))  # before the last phase
    page = (out / "sweep.html").read_text()
    assert 'id="fig-as-instances"' in page and "min_instances 2: 0 s over the p95 800 ms SLO" in page
    report = (out / one["run_dir"] / "report.html").read_text()
    assert 'id="fig-autoscaling"' in report
    assert not [p for p in psutil.process_iter(["cmdline"]) if "serve" in (p.info["cmdline"] or [])
                and "--instances" in (p.info["cmdline"] or []) and str(out) in " ".join(p.info["cmdline"] or [])]
