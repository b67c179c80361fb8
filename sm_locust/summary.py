"""`summary.json`: the public, versioned result of a run (documented in docs/summary.md).

Schema 1 keys are a contract: later versions add keys, never rename or remove these.
`build_summary` is pure (fed plain data); `write_json` writes atomically so a reader never sees a
half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from sm_locust.steps import iso, step_records
from sm_locust.timeline import Second

SCHEMA_VERSION = 1


def build_summary(
    *,
    endpoint: str,
    started_at: float,
    ended_at: float,
    totals: Mapping,
    errors: Mapping[str, int],
    seconds: Sequence[Second],
    plateau: Mapping | None = None,
    extra: Mapping | None = None,
    open_loop: Mapping | None = None,
) -> dict:
    """Assemble summary.json from totals (requests, failures, p50_ms, p95_ms, p99_ms) and the timeline."""
    duration = max(1e-9, ended_at - started_at)
    requests = int(totals.get("requests", 0))
    summary = {
        "schema": SCHEMA_VERSION,
        "endpoint": endpoint,
        "started_at": iso(started_at),
        "ended_at": iso(ended_at),
        "duration_s": round(duration, 3),
        "totals": {
            "requests": requests,
            "failures": int(totals.get("failures", 0)),
            "rps": round(requests / duration, 3),
            "p50_ms": totals.get("p50_ms"),
            "p95_ms": totals.get("p95_ms"),
            "p99_ms": totals.get("p99_ms"),
            "errors": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        },
        "steps": step_records(seconds),
        "plateau": dict(plateau) if plateau else None,
    }
    if open_loop:
        summary["totals"]["open_loop"] = dict(open_loop)
    if extra:
        for key, value in extra.items():
            summary.setdefault(key, value)
    return summary


def write_json(path: str | Path, data) -> Path:
    """Write JSON atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
