"""Fan-out sending (`--split K`): one logical request of N rows sent as K concurrent sub-requests.

Why: a caller with a large batch can send it as K smaller requests at once, on separate
connections, so more of the endpoint's workers serve it in parallel; each part pays its own
per-request overhead. What the caller feels is the time until the *last* part returns, and what
the endpoint sees is K smaller requests, so one split call is recorded both ways:

- ONE logical request: request_type `InvokeEndpointSplit`, name = the usual entry name
  (`endpoint`, `endpoint/variant`); response time from the first send until the last part
  returns; response length the sum of the parts' bodies; a failure when any part fails, named by
  the first failing part's error (in part order), so the failure table still reads
  `ThrottlingException: ...`, `InvalidResponse: ...`;
- each part as its own request: request_type `InvokeEndpoint`, name `<entry name>/part`, exactly
  as the client reports any call (`SageMakerClient.send`).

Locust's `total` row adds up every entry: with `--split` it counts the logical requests *and*
their parts (summary.json's totals leave the `/part` entries out, by the one counting rule,
`sm_locust.invocation.is_invocation`). Read the `InvokeEndpointSplit` entry for the caller's
view and the `/part` entry for the endpoint's.

The parts run in gevent greenlets sharing the User's client (both transports' clients may be used
concurrently; the connection pool gives each in-flight part its own connection). Parts are
prepared before the test, never on the request path (`sm_locust.payloads.split`, which asks the
serializers to split each body in its own format); this module only sends them.
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
