"""What a sweep prints: one line per configuration, a progress bar with an ETA, and the deployers'
and runs' progress lines, all through one `Printer` (thread-safe; deployments run in threads).

The ETA is the mean wall time of the configurations measured so far (resumed ones excluded) times
the configurations still to measure: with overlapped deployments that mean already includes the
saving.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

PREFIX = "sm-locust sweep:"
BAR_WIDTH = 20


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {(seconds % 3600) // 60:.0f} min"


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


def eta_s(elapsed_s: float, measured: int, remaining: int) -> float | None:
    if remaining <= 0:
        return 0.0
    if measured <= 0:
        return None
    return elapsed_s / measured * remaining


def progress_line(done: int, total: int, elapsed_s: float, eta: float | None) -> str:
    left = "done" if done >= total else (f"about {duration_text(eta)} left" if eta is not None else "ETA after the first")
    return f"{PREFIX} {bar(done, total)} {done}/{total} configurations, {duration_text(elapsed_s)} elapsed, {left}"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value * 100:.1f} %".replace(".0 %", " %")


def configuration_line(index: int, total: int, label: str, row: Mapping[str, Any], percentile_label: str) -> str:
    """`[2/6] max_concurrency 5: 121.3 req/s at 6 users, p95 44 ms, 0 % errors; $0.46 per 1M (38 s)`."""
    head = f"{PREFIX} [{index}/{total}] {label}: "
    status = row.get("status")
    took = f" ({duration_text(row.get('wall_s'))})" if row.get("wall_s") is not None else ""
    if status != "ok":
        return f"{head}{status}: {row.get('reason')}{took}"
    if not row.get("capacity_rps"):
        return f"{head}no sustainable throughput ({row.get('no_capacity_reason') or 'see its run folder'}){took}"
    users = row.get("knee_users")
    at = f" at {users:g} user{'s' if users != 1 else ''}" if isinstance(users, (int, float)) else ""
    latency = row.get("latency_ms")
    text = (f"{head}{row['capacity_rps']:.1f} req/s{at}, {percentile_label} "
            f"{'?' if latency is None else f'{latency:.0f}'} ms, {_pct(row.get('error_rate'))} errors")
    if row.get("cost_per_1m") is not None:
        text += f"; ${row['cost_per_1m']:.2f} per 1M"
    if row.get("resumed"):
        text += " (measured before: run folder complete)"
    return text + took


class Printer:
    """Prints whole lines to the stream it was given (stdout at construction), from any thread."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()



def say(printer, text: str) -> None:
    """`printer` is a Printer or any callable taking a line (tests pass list.append)."""
    printer(f"{PREFIX} {text}")
