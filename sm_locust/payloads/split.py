"""Fan-out preparation (`--split K`): each invocation's rows pre-encoded as K parts, before the test.

Why here: the parts are built once, with the rest of the payload pool, never on the request
path; sending them (`sm_locust.users.fanout.invoke_split`) only reads `extra[PARTS]`. A body a
serializer built (.npy/.npz and function sources, which keep their request object as
`extra[template.SOURCE]`) is split by slicing the object's rows and encoding each slice with the
same serializer and headers; a body read as bytes is split in its own format by the serializers
(`sm_locust.serializers.split_body`: JSON `instances`/`inputs`, JSON Lines, CSV lines, .npy, a
TF-Serving PredictRequest, a numpy-raw buffer whose `shape=` custom attribute gives its rows).
Anything else is a UsageError before the test starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.template import SOURCE
from sm_locust.serializers import split_body, split_rows

PARTS = "split_parts"  # Invocation.extra key: the pre-encoded parts
MAX_SPLIT = 64


def check_split(k: object) -> int:
    """`k` as the number of parts, or a UsageError naming the bad value."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_SPLIT:
        raise UsageError(f"--split must be a whole number from 1 (no fan-out) to {MAX_SPLIT}; got {k!r}")
    return int(k)


def split_invocation(invocation: Invocation, k: int, where: str) -> tuple[Invocation, ...]:
    """The K parts of one invocation (request object rows sliced before encoding when known)."""
    source = invocation.extra.get(SOURCE)
    if source is None:
        parts = split_body(invocation.body, invocation.content_type, k, where, invocation.custom_attributes)
        return tuple(dataclasses.replace(invocation, body=p.body, rows=p.rows, custom_attributes=p.custom_attributes,
                                         extra={}) for p in parts)
    out = []
    for i, obj in enumerate(split_rows(source.obj, k, source.where or where), start=1):
        part = source.template.encode(obj, source.serializer, where=f"{source.where or where} part {i}")
        out.append(dataclasses.replace(part, extra={}))
    return tuple(out)


def split_invocations(invocations: Sequence[Invocation], k: int, description: str = "") -> list[Invocation]:
    """Each invocation with its K pre-encoded parts in `extra[PARTS]` (done once, before the test)."""
    k = check_split(k)
    out = []
    for i, inv in enumerate(invocations, start=1):
        parts = split_invocation(inv, k, f"{description or 'payload'} body {i}")
        extra = {key: v for key, v in inv.extra.items() if key != SOURCE}
        extra[PARTS] = parts
        out.append(dataclasses.replace(inv, extra=extra))
    return out


def parts_of(invocation: Invocation) -> tuple[Invocation, ...] | None:
    """The pre-encoded parts of a split invocation, or None."""
    return invocation.extra.get(PARTS)


__all__ = ["MAX_SPLIT", "PARTS", "check_split", "parts_of", "split_invocation", "split_invocations"]
