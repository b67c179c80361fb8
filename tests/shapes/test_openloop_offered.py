"""A rate-mode plateau in-process against a local endpoint: a step whose load generator did not offer its
rate is client-bound (measure.steady `undelivered_reason`), measured again, then the verdict is
INCONCLUSIVE naming the load generator; on an ordinary run the recorded offer and the flag agree."""

from __future__ import annotations

import argparse
import json

import gevent
import locust  # noqa: F401  (gevent patching before boto3)
from locust.env import Environment

import pytest

from sm_locust.config.options import all_option_specs
from sm_locust.locustfiles.sagemaker import InvokeEndpointUser
from sm_locust.measure.looplag import FIX_WORKERS
from sm_locust.measure.steady import MIN_OFFERED_RATIO
from sm_locust.payloads import load_payloads
from sm_locust.record.recorder import RunRecorder
from sm_locust.shapes.plateau import PlateauShape
from sm_locust.users.openloop import OpenLoopUser
from tests.conftest import SAMPLE_PAYLOAD

OFFER = ("the load generator ran as few as", "the load generator offered")  # undelivered_reason's openings


class HalfTokens(OpenLoopUser):
    """A load generator that starts only every other rate token it runs: Locust counts them all, the
    endpoint is offered half the rate (what a spawn that fell behind offers, without needing a busy CPU)."""

    started = 0

    def on_start(self) -> None:
        type(self).started += 1
        if type(self).started % 2:
            super().on_start()


def _run(endpoint_url: str, token_class: type[OpenLoopUser], tmp_path, **values) -> dict:
    """A rate-mode plateau search with `token_class` as its rate tokens; summary.json once it ended."""
    opts = argparse.Namespace(**{spec.dest: spec.default for spec in all_option_specs()})
    opts.headless = True
    for key, value in dict(endpoint_name="ep", endpoint_url=endpoint_url, payload=str(SAMPLE_PAYLOAD),
                           search_mode="rate", step_seconds=12.0, min_step_seconds=6.0, **values).items():
        setattr(opts, key, value)
    env = Environment(user_classes=[InvokeEndpointUser, token_class], shape_class=PlateauShape(), parsed_options=opts)
    env.sm_locust_payloads = load_payloads(str(SAMPLE_PAYLOAD))
    runner = env.create_local_runner()
    env.sm_locust_recorder = RunRecorder(env, tmp_path, endpoint="ep")
    runner.start_shape()
    runner.greenlet.join(timeout=150)
    gevent.sleep(0)
    return json.loads((tmp_path / "summary.json").read_text())


def _offer_relations(steps: list[dict]) -> None:
    """What holds on any machine: a step said short of its offer recorded an offer whose interval is wholly
    under the rule's share of its rate, and every such step is client-bound (an earlier rule may name it)."""
    for step in steps:
        offered, target = step.get("offered_ci95"), step["target_rate"]
        short = offered is not None and offered[1] < MIN_OFFERED_RATIO * target
        if str(step.get("client_bound_reason") or "").startswith(OFFER):
            assert short, step
        if short:
            assert step["client_bound"] is True, step


@pytest.mark.e2e
@pytest.mark.timeout(200)
def test_a_generator_that_offers_half_its_rate_ends_inconclusive_naming_it(endpoint_factory, tmp_path):
    # 8 slots x 10 ms = 800 req/s: 20 req/s asked, 10 offered, all served; without the rule the search read
    # "not served" (50 %) and took 20 req/s for the endpoint's limit
    ep = endpoint_factory(max_concurrency=8, service_time_ms=10.0)
    HalfTokens.started = 0
    summary = _run(ep.url, HalfTokens, tmp_path, start_rps=20.0, max_rps=200.0)
    steps = summary["steps"]
    _offer_relations(steps)
    assert [s["target_rate"] for s in steps] == [20.0, 20.0]  # measured again once, then the search ended
    assert all(s["client_bound"] and s["offered_rps"] < MIN_OFFERED_RATIO * 20.0 for s in steps), steps
    assert steps[1]["measured_again"] == "client-bound"
    reason = steps[-1]["client_bound_reason"]
    assert reason.startswith(OFFER) and reason.endswith(f"({FIX_WORKERS})"), reason
    plateau = summary["plateau"]
    assert plateau["client_bound"] and plateau["inconclusive"] and not plateau["reached"], plateau["text"]
    assert plateau["text"].startswith("INCONCLUSIVE: the load generator was the bottleneck"), plateau["text"]
    assert summary["verdict"]["status"] == "inconclusive"


@pytest.mark.e2e
@pytest.mark.timeout(200)
def test_an_ordinary_rate_search_records_an_offer_that_agrees_with_its_flag(endpoint_factory, tmp_path):
    # every token starts: on a quiet machine no step is short of its offer; on a busy one a short step
    # must be flagged, and a flag must rest on its recorded interval
    ep = endpoint_factory(max_concurrency=8, service_time_ms=10.0)
    summary = _run(ep.url, OpenLoopUser, tmp_path, start_rps=20.0, max_rps=80.0)
    steps = summary["steps"]
    assert steps and all(s["target_rate"] <= 80.0 for s in steps)
    _offer_relations(steps)
    for step in steps:
        if "offered_rps" not in step:  # recorded only when the point fell short: the rule never fired
            assert not str(step.get("client_bound_reason") or "").startswith(OFFER), step
