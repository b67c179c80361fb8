"""Fan-out (`--split K`): one logical request of N rows sent as K concurrent sub-requests.

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
  as the client reports any call.

Locust's `total` row (and so summary.json `totals`) adds up every entry: with `--split` it counts
the logical requests *and* their parts. Read the `InvokeEndpointSplit` entry for the caller's view
and the `/part` entry for the endpoint's.

The parts run in gevent greenlets sharing the User's client (a boto3 client may be used
concurrently; its connection pool gives each in-flight part its own connection). Parts are
prepared before the test, never on the request path (`sm_locust.payloads.split`, which asks the
serializers to split each body in its own format); this module only sends them.
"""

from __future__ import annotations

import time
from typing import Any

from sm_locust.invocation import Invocation, InvocationError
from sm_locust.payloads.split import PARTS

INVOKE_ENDPOINT_SPLIT = "InvokeEndpointSplit"
PART_SUFFIX = "/part"


# -- sending ---------------------------------------------------------------------------------


def _send(client: Any, part: Invocation, name: str) -> tuple[dict | None, InvocationError | None]:
    send = getattr(client, "send", None)
    if send is not None:
        return send(part, name)
    result = client.invoke(part, name)  # a client without send(): the failure's code is unknown here
    return result, None if result is not None else InvocationError("PartFailed", "see the /part entry")


def invoke_split(client: Any, invocation: Invocation, name: str | None = None) -> list[dict | None]:
    """Send `invocation`'s parts at once and record the logical request; returns each part's result.

    Never raises for a failed part: each part fires its own request event through the client, and
    the logical request fires one more (`InvokeEndpointSplit`), failed when any part failed.
    """
    from gevent import joinall, killall, spawn

    parts = invocation.extra[PARTS]
    name = name or invocation.request_name(client.endpoint_name)
    part_name = name + PART_SUFFIX
    start_time = time.time()
    started = time.perf_counter()
    others = [spawn(_send, client, part, part_name) for part in parts[1:]]
    try:
        outcomes = [_send(client, parts[0], part_name)]
        joinall(others)
    except BaseException:  # the User is being stopped (GreenletExit): its parts stop with it
        killall(others, block=False)
        raise
    response_time = (time.perf_counter() - started) * 1000.0
    for g in others:
        if g.successful():
            outcomes.append(g.value)
        else:  # a client bug, not a model error: still an event, never raised into the User
            outcomes.append((None, InvocationError(type(g.exception).__name__, str(g.exception))))
    exception = next((err for _, err in outcomes if err is not None), None)
    client.environment.events.request.fire(
        request_type=INVOKE_ENDPOINT_SPLIT,
        name=name,
        response_time=response_time,
        response_length=sum(len(r["body"]) for r, _ in outcomes if r is not None),
        exception=exception,
        context={"endpoint": client.endpoint_name, "parts": len(parts)},
        start_time=start_time,
        url=None,
    )
    return [r for r, _ in outcomes]
