"""Growth past a step that queued: throughput flat over one span of loads ends the growth, so an endpoint
whose capacity still rises past a queued step must be measured past it. Two such endpoints, both bent at
16 and 32 users and queued at 64 (cycles ~1.8x and 2x the unqueued one): one whose capacity rises with
concurrency (1,700 req/s at 64 users, 2,300 at 128), one flat from 34 to 64 users and rising again past
64 (a second tier: a worker pool that grows only once its queue is full). Neither may be answered with
the capacity at 64 users."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.plateau.test_plateau_resolution import MeasuredEndpoint, run


@dataclass
class RisingEndpoint(MeasuredEndpoint):
    """Capacity that rises with concurrency (concave): 1,700 req/s at 64 users, 2,300 at 128, 2,350 from 256."""

    anchors: tuple[tuple[float, float], ...] = ((1, 47.0), (4, 188.0), (16, 700.0), (32, 1250.0), (64, 1700.0),
                                                (128, 2300.0), (256, 2350.0), (512, 2350.0))


@dataclass
class TieredEndpoint(MeasuredEndpoint):
    """Flat at ~1,500 req/s from 34 to 64 users, then a second tier: 2,300 req/s from 128 users."""

    anchors: tuple[tuple[float, float], ...] = ((1, 47.0), (4, 188.0), (16, 700.0), (32, 1300.0), (34, 1500.0),
                                                (64, 1510.0), (128, 2300.0), (512, 2300.0))


@pytest.mark.parametrize("kind", [RisingEndpoint, TieredEndpoint])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_queued_step_whose_throughput_still_grows_past_it_is_not_the_capacity(kind, seed):
    endpoint = kind(concurrency=32, service_ms=20.0, noise=0.02, seed=seed)
    loads, verdict = run(endpoint)
    assert loads[:5] == [1, 4, 16, 32, 64], loads  # x2 from 16 (bent), 64 queued
    assert 64 / endpoint.throughput(64) > 1.75 * (1 / endpoint.throughput(1)), "64 users must queue clearly"
    assert 128 in loads, loads  # measured past the queued step
    assert verdict.capacity_rps is not None and verdict.capacity_rps >= 0.95 * endpoint.throughput(128), \
        (loads, verdict.text())
