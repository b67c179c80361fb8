"""Open-loop sends are timed from their intended send time with either transport (no coordinated omission)."""

from __future__ import annotations

import time

import locust  # noqa: F401
from locust.env import Environment

import pytest

from sm_locust.invocation import INVOKE_ENDPOINT, Invocation
from sm_locust.transport import TRANSPORTS, create_client
from sm_locust.users.openloop import invoke_from_intended
from tests.conftest import SAMPLE_PAYLOAD

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_late_send_counts_its_delay_in_the_response_time(endpoint, transport):
    env = Environment()
    env.create_local_runner()  # the runner is what records request events into env.stats
    client = create_client(transport, env, "ep", endpoint_url=endpoint.url, region="us-east-1")
    invocation = Invocation(body=SAMPLE_PAYLOAD.read_bytes())
    times: list[float] = []
    env.events.request.add_listener(lambda response_time, **_: times.append(response_time))
    t0 = time.perf_counter()
    client.invoke(invocation)  # on time (and warms the connection)
    on_time_wall_ms = (time.perf_counter() - t0) * 1000
    intended = time.perf_counter() - 0.4  # this send should have left 400 ms ago
    t0 = time.perf_counter()
    invoke_from_intended(client, invocation, intended, lag_s=0.4)
    late_wall_ms = (time.perf_counter() - t0) * 1000
    entry = env.stats.entries[("ep", INVOKE_ENDPOINT)]
    assert entry.num_requests == 2 and entry.num_failures == 0
    on_time, late = times
    assert on_time <= on_time_wall_ms + 1  # the on-time call counts its own time only
    assert 400 <= late <= 400 + late_wall_ms + 1  # the late one counts the delay before sending, and its own
