"""Fan-out sending (`--split K`): one logical request of N rows sent as K concurrent sub-requests.

One split call is recorded both ways: ONE logical request (`InvokeEndpointSplit`, the usual name,
first send to last part, failed when any part fails, named by the first failing part) and each part
as its own `InvokeEndpoint` request named `<entry name>/part`. Locust's `total` row counts both;
summary.json's totals leave the parts out (`invocation.is_invocation`). Parts run in greenlets
sharing the User's client, each on its own pooled connection; they are prepared before the test
(`payloads.split`), never on the request path.
"""

from __future__ import annotations

from gevent import joinall, killall, spawn

from sm_locust.invocation import PART_SUFFIX, Invocation, InvocationError
from sm_locust.payloads.split import PARTS
from sm_locust.transport.contract import InvokeResult, SageMakerClient, measure

INVOKE_ENDPOINT_SPLIT = "InvokeEndpointSplit"


def invoke_split(client: SageMakerClient, invocation: Invocation, name: str | None = None) -> list[InvokeResult | None]:
    """Send `invocation`'s parts at once and record the logical request; returns each part's result.

    Never raises for a failed part: each part fires its own request event through the client, and
    the logical request fires one more (`InvokeEndpointSplit`), failed when any part failed.
    """
    parts = invocation.extra[PARTS]
    name = name or invocation.request_name(client.endpoint_name)
    part_name = name + PART_SUFFIX
    results: list[InvokeResult | None] = [None] * len(parts)
    with measure(client.request_event, INVOKE_ENDPOINT_SPLIT, name,
                 {"endpoint": client.endpoint_name, "parts": len(parts)}, stopped=client.stopped_request) as request:
        others = [spawn(client.send, part, part_name) for part in parts[1:]]
        try:
            outcomes = [client.send(parts[0], part_name)]
            joinall(others)
        except BaseException:  # the User is being stopped (GreenletExit): its parts stop with it
            killall(others, block=False)
            raise
        request.stop()
        for g in others:
            if g.successful():
                outcomes.append(g.value)
            else:  # a client bug, not a model error: still an event, never raised into the User
                outcomes.append((None, InvocationError(type(g.exception).__name__, str(g.exception))))
        request.exception = next((err for _, err in outcomes if err is not None), None)
        request.response_length = sum(len(r.body) for r, _ in outcomes if r is not None)
        results = [r for r, _ in outcomes]
    return results
