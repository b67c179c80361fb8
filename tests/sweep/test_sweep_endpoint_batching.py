"""The local endpoint's dynamic batching (a sweep knob): the batcher groups concurrent requests up
to the maximum size, waits at most the delay, holds one concurrency slot per batch, hands each
request its own rows' predictions; and on the served endpoint a batch really costs less per request,
so throughput at the same concurrency rises."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sm_locust.endpoint.batching import Batcher, batch_service_s, predict_batch
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.model import RankingModel, sample_rows
from tests.conftest import SAMPLE_PAYLOAD


def test_batch_service_time_costs_less_per_request():
    assert batch_service_s(40, 0.2, 1) == pytest.approx(0.040)
    assert batch_service_s(40, 0.2, 8) == pytest.approx(0.040 * 2.4)
    assert batch_service_s(40, 0.2, 8) / 8 < batch_service_s(40, 0.2, 1)
    assert batch_service_s(40, 1.0, 4) == pytest.approx(0.160)  # item cost 1: no saving


def test_predict_batch_gives_each_request_its_own_rows():
    model = RankingModel()
    a, b = sample_rows(3, seed=1), sample_rows(5, seed=2)
    out = predict_batch(model, [a, b])
    assert [len(o) for o in out] == [3, 5]
    np.testing.assert_allclose(out[0], model.predict(*a), rtol=1e-6)
    np.testing.assert_allclose(out[1], model.predict(*b), rtol=1e-6)


def _submit_all(batcher: Batcher, items: list, stagger_s: float = 0.0) -> list:
    with ThreadPoolExecutor(len(items)) as pool:
        futures = []
        for item in items:
            futures.append(pool.submit(batcher.submit, item))
            if stagger_s:
                time.sleep(stagger_s)
        return [f.result(timeout=5) for f in futures]


def test_concurrent_requests_form_batches_up_to_the_maximum_size():
    sizes: list[int] = []
    batcher = Batcher(4, 0.2, lambda items: [x * 10 for x in items], on_batch=sizes.append)
    assert _submit_all(batcher, list(range(8))) == [x * 10 for x in range(8)]
    assert sum(sizes) == 8 and max(sizes) <= 4 and len(sizes) >= 2


def test_the_first_request_waits_at_most_the_delay():
    sizes: list[int] = []
    batcher = Batcher(16, 0.05, lambda items: items, on_batch=sizes.append)
    t0 = time.monotonic()
    with ThreadPoolExecutor(1) as pool:  # a batcher that waited for a full batch would never answer it
        assert pool.submit(batcher.submit, "alone").result(timeout=30) == "alone"
    assert time.monotonic() - t0 >= 0.04  # it did wait for company (how little past 50 ms: bench/timing.py)
    assert sizes == [1]


def test_a_batch_holds_one_slot_and_stays_open_while_it_waits_for_it():
    slots = threading.BoundedSemaphore(1)
    running = []
    sizes: list[int] = []

    def run(items):
        running.append(len(items))
        time.sleep(0.05)
        return items

    batcher = Batcher(8, 0.0, run, slots=slots, on_batch=sizes.append)
    slots.acquire()  # the only slot is busy: requests pile up in the open batch
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(batcher.submit, i) for i in range(6)]
        time.sleep(0.1)
        slots.release()
        assert [f.result(timeout=5) for f in futures] == list(range(6))
    assert sizes[0] >= 5  # all (or all but a straggler) ran in the batch that waited for the slot


def test_a_failing_batch_fails_every_request_in_it():
    def run(items):
        raise ValueError("model exploded")

    batcher = Batcher(4, 0.05, run)
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(batcher.submit, i) for i in range(3)]
        for f in futures:
            with pytest.raises(ValueError, match="model exploded"):
                f.result(timeout=5)


def test_batching_settings_are_validated():
    with pytest.raises(ValueError, match="batch-item-cost"):
        EndpointConfig(batch_item_cost=1.5).validate()
    with pytest.raises(ValueError, match="max-batch-size"):
        EndpointConfig(max_batch_size=-1).validate()


def _throughput(url: str, clients: int, seconds: float) -> float:
    body = SAMPLE_PAYLOAD.read_bytes()
    done = []
    stop = time.monotonic() + seconds

    def client():
        n = 0
        while time.monotonic() < stop:
            req = urllib.request.Request(f"{url}/endpoints/ep/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert len(json.loads(resp.read())["predictions"]) == 10
            n += 1
        done.append(n)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / seconds


@pytest.mark.e2e
def test_served_batches_raise_throughput_and_run_side_by_side(endpoint_factory):
    # 40-ms slots: 25 req/s per slot unbatched; a batch of 8 (item cost 0.2) holds a slot 96 ms, so
    # 4 slots serve up to ~333 req/s if the batches really run side by side in the (gevent) worker;
    # one batch at a time would cap it at 8 / 0.096 = 83 req/s. The two endpoints start, and are
    # measured, at the same time: separate processes, and the plain one's 8 waiting clients cost little CPU
    with ThreadPoolExecutor(2) as pool:
        plain_f = pool.submit(endpoint_factory, max_concurrency=1, service_time_ms=40)
        batched_f = pool.submit(endpoint_factory, max_concurrency=4, service_time_ms=40, max_batch_size=8,
                                max_batch_delay_ms=5)
        plain, batched = plain_f.result(), batched_f.result()
        plain_f, batched_f = pool.submit(_throughput, plain.url, 8, 1.5), pool.submit(_throughput, batched.url, 32, 1.5)
        plain_rps, batched_rps = plain_f.result(), batched_f.result()
    assert plain_rps < 30
    # above the cap of one batch at a time, and 4x the plain one measured side by side
    assert batched_rps > 8 / 0.096 and batched_rps > 4 * plain_rps
    stats = batched.stats()
    assert 0 < stats["batches"] < stats["successes"]


def test_serve_flags_reach_the_config():
    from sm_locust.cli import build_parser
    from sm_locust.cli.serve import config_from_args

    args = build_parser("serve").parse_args(["serve", "--max-batch-size", "8", "--max-batch-delay-ms", "5",
                                             "--batch-item-cost", "0.3"])
    config = config_from_args(args)
    assert (config.max_batch_size, config.max_batch_delay_ms, config.batch_item_cost) == (8, 5.0, 0.3)
    from sm_locust.endpoint.server import LocalEndpoint

    command = LocalEndpoint(config).command()
    assert command[command.index("--max-batch-size") + 1] == "8"
    assert command[command.index("--batch-item-cost") + 1] == "0.3"
