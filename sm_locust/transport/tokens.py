"""Token counters for streamed responses: `f(stream body bytes) -> int`.

A counter sees the whole stream body (all PayloadPart bytes joined, so a line split across two
chunks is counted once) after the stream ends. The count lands in the stream entry's context
(`tokens`) and in `StreamResponse.tokens`.

- `json_lines_with_token`: lines that are JSON objects with a `token` key, optionally behind an
  SSE `data:` prefix - the TGI / LMI (`{"token": {"text": ...}}`) streaming format, one token each.
- `whitespace_words`: whitespace-separated words of the UTF-8 text - a rough count for plain text.
"""

from __future__ import annotations

import json
from collections.abc import Callable

TOKEN_COUNTERS: dict[str, Callable[[bytes], int]] = {}


def _register(func):
    TOKEN_COUNTERS[func.__name__] = func
    return func


@_register
def json_lines_with_token(body: bytes) -> int:
    """Count JSON-object lines having a `token` key (`data:` prefixes allowed)."""
    count = 0
    for line in body.splitlines():
        line = line.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if not line.startswith(b"{") or b'"token"' not in line:
            continue
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict) and "token" in parsed:
            count += 1
    return count


@_register
def whitespace_words(body: bytes) -> int:
    """Count whitespace-separated words."""
    return len(body.decode("utf-8", errors="replace").split())
