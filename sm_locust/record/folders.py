"""Where a run folder goes when none is named: `reports/<UTC stamp>-<endpoint>/`, a new one each time.

One rule for `sm-locust run` and for plain Locust (each web UI swarm gets its own folder).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

DEFAULT_REPORTS_DIR = "reports"


def run_id(endpoint_name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now or time.time()))
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", endpoint_name).strip("-") or "run"
    return f"{stamp}-{safe}"


def choose_out_dir(out: str | None, endpoint_name: str) -> Path:
    if out:
        return Path(out)
    base = Path(DEFAULT_REPORTS_DIR) / run_id(endpoint_name)
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate
