"""What a sweep prints: one line per configuration, a progress bar with an ETA, and the deployers'
and runs' progress lines, all through one `Printer` (thread-safe; deployments run in threads).

The ETA is the mean wall time of the configurations measured so far (resumed ones excluded) times
the configurations still to measure: with overlapped deployments that mean already includes the
saving. A line may quote an endpoint's failure or a sweep file's value: the Printer sanitises every
line it prints (`sm_locust.sanitize`).
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from sm_locust.sanitize import clean
from sm_locust.sweep.rows import Row
from sm_locust.util.formatting import duration

PREFIX = "sm-locust sweep:"
MAX_PRINTED = 4000  # characters of one printed line
BAR_WIDTH = 20


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


def eta_s(elapsed_s: float, measured: int, remaining: int) -> float | None:
    if remaining <= 0:
        return 0.0
    if measured <= 0:
        return None
    return elapsed_s / measured * remaining


def progress_line(done: int, total: int, elapsed_s: float, eta: float | None, then: str | None = None) -> str:
    """The progress bar: `done` of `total` measured once; `then`, when every one is but another round
    is under way or follows (measuring again, confirming the ranking), says which instead of 'done'."""
    if done >= total:
        left = f"measured once; {then}" if then else "done"
    else:
        left = f"about {duration(eta)} left" if eta is not None else "ETA after the first"
    return f"{PREFIX} {bar(done, total)} {done}/{total} configurations, {duration(elapsed_s)} elapsed, {left}"


class Printer:
    """Prints whole lines to the stream it was given (stdout at construction), from any thread."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.stream.write(clean(line, MAX_PRINTED, newlines=True) + "\n")
            self.stream.flush()


def configuration_line(index: int, total: int, row: Row, figures: Callable[[], str]) -> str:
    """The line printed when a configuration is done: `[2/6] <label>: <figures> (38 s)`, its status
    and reason instead of figures when it did not measure, `(measured before ...)` when resumed;
    `figures()` is the kind's text for a measured configuration."""
    head = f"{PREFIX} [{index}/{total}] {row.label}: "
    took = f" ({duration(row.timing.wall_s)})" if row.timing is not None else ""
    if row.status != "ok":
        status = row.status.upper() if row.status == "inconclusive" else row.status  # said loudly: never a result
        return f"{head}{status}: {row.reason}{took}"
    resumed = " (measured before: run folder complete)" if row.resumed else ""
    return f"{head}{figures()}{resumed}{took}"


def say(printer, text: str) -> None:
    """`printer` is a Printer or any callable taking a line (tests pass list.append)."""
    printer(f"{PREFIX} {text}")


class StepEcho(io.TextIOBase):
    """stdout of a run (redirected): forwards the per-step lines, indented under the configuration."""

    def __init__(self, printer: Printer, prefix: str):
        self.printer = printer
        self.prefix = prefix
        self._buffer = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if line.startswith("sm-locust: step "):
                self.printer(f"{self.prefix}{line[len('sm-locust: '):]}")
        return len(text)
