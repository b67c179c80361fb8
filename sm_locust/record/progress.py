"""The progress line a run prints every `--sm-progress` seconds, written and parsed in one place.

The recorder prints it; `sm-locust run -q` echoes it and the Python API parses it back for its
progress display, so format and parser cannot drift (tests/api/test_api_progress.py round-trips it).
Its figures are the last `window_s` seconds', provisional ("so far"): a step's figures are those of
its judged step line. Nothing here imports Locust or gevent (a notebook kernel imports it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sm_locust.util.formatting import MISSING, is_missing

PREFIX = "sm-locust ["


@dataclass(frozen=True)
class ProgressSample:
    """The last few seconds of a run, as one progress line reports them."""

    elapsed_s: float
    users: int
    rps: float
    goodput_rps: float
    p95_ms: float | None
    failures: int
    backoffs: int = 0
    window_s: int = 1  # the seconds the figures cover

    def line(self) -> str:
        p95 = MISSING if is_missing(self.p95_ms) else f"{self.p95_ms:.0f}"
        return (f"{PREFIX}{self.elapsed_s:5.0f}s] users={self.users:<4d} rps={self.rps:8.1f}  "
                f"goodput={self.goodput_rps:8.1f}  p95={p95} ms  failures={self.failures}"
                + (f"  backoffs={self.backoffs} (connection errors)" if self.backoffs else "")
                + f"  (last {self.window_s} s, so far)")


_LINE = re.compile(
    r"^sm-locust \[\s*(?P<elapsed>-?\d+)s\] users=(?P<users>\d+)\s+rps=\s*(?P<rps>[\d.]+)\s+"
    r"goodput=\s*(?P<goodput>[\d.]+)\s+p95=(?P<p95>[\d.]+|n/a) ms\s+failures=(?P<failures>\d+)"
    r"(?:\s+backoffs=(?P<backoffs>\d+) \(connection errors\))?(?:\s+\(last (?P<window>\d+) s, so far\))?")


def parse_progress(line: str) -> ProgressSample | None:
    """The sample a progress line reports, or None for any other line."""
    match = _LINE.match(line.strip())
    if match is None:
        return None
    p95 = match["p95"]
    return ProgressSample(elapsed_s=float(match["elapsed"]), users=int(match["users"]), rps=float(match["rps"]),
                          goodput_rps=float(match["goodput"]), p95_ms=None if p95 == MISSING else float(p95),
                          failures=int(match["failures"]), backoffs=int(match["backoffs"] or 0),
                          window_s=int(match["window"] or 1))
