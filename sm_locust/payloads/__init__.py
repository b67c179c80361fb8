"""Payload sources: turn what the user points `--payload` at into a pool of prepared invocations.

Every body is encoded once, before the test starts; the request path only picks the next
`Invocation` from the pool. The walking skeleton knows one source: a single file sent verbatim.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation


class PayloadPool:
    """A fixed set of invocations, handed out round-robin."""

    def __init__(self, invocations: Sequence[Invocation], description: str = ""):
        if not invocations:
            raise UsageError(f"no payloads found in {description or 'the payload source'}; point --payload at a non-empty source")
        self.invocations = list(invocations)
        self.description = description
        self._cycle = itertools.cycle(self.invocations)

    def next(self) -> Invocation:
        return next(self._cycle)

    def __len__(self) -> int:
        return len(self.invocations)

    def sizes(self) -> dict:
        """Body sizes in bytes, as summary.json reports them."""
        lengths = [len(i.body) for i in self.invocations]
        return {
            "count": len(lengths),
            "min_bytes": min(lengths),
            "avg_bytes": round(sum(lengths) / len(lengths), 1),
            "max_bytes": max(lengths),
        }


def read_payload_file(path: str | Path) -> bytes:
    """The bytes of a payload file, or a one-line UsageError saying why it cannot be read."""
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"payload file {str(p)!r} does not exist; pass --payload PATH to a readable file") from None
    except IsADirectoryError:
        raise UsageError(f"payload {str(p)!r} is a folder; pass --payload PATH to a file") from None
    except OSError as exc:
        raise UsageError(f"cannot read payload file {str(p)!r}: {exc.strerror}") from None


def load_payloads(
    source: str | Path,
    *,
    content_type: str | None = "application/json",
    accept: str | None = None,
    **headers: str | None,
) -> PayloadPool:
    """Build the pool for `--payload SOURCE` (the skeleton: one file, sent verbatim)."""
    body = read_payload_file(source)
    if not body:
        raise UsageError(f"payload file {str(source)!r} is empty; SageMaker rejects empty bodies")
    return PayloadPool([Invocation(body=body, content_type=content_type, accept=accept, **headers)], str(source))
