"""A run's progress for the Python API: one line that updates in place, not hundreds of lines.

`RunProgress` is fed every line the Locust child prints (the progress line of record/progress.py,
the shapes' step lines, Locust's errors) and keeps the latest of each; it is pure. The display shows
its line: a replaced display (or tqdm widget) in a notebook, a tqdm bar or a line rewritten in place
in a terminal, a line every `EVERY_S` seconds when output is a file or a pipe, nothing with
`progress=False`. Everything Locust printed is in the run folder's locust.log.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from sm_locust.errors import UsageError
from sm_locust.record.progress import ProgressSample, parse_progress
from sm_locust.sanitize import clean
from sm_locust.util.formatting import load_words

STATUS_PREFIX = "sm-locust: "
EVERY_S = 5.0  # a line this often when the output is not a terminal (like `sm-locust run -q`)
WIDTH = 200  # a notebook output is wide; a terminal line is cut to the terminal instead
CHOICES = ("auto", "line", "tqdm", "off")


class RunProgress:
    """The latest progress sample, step line and error of a run, from Locust's output lines."""

    def __init__(self, total_s: float | None = None, interval_s: float = 1.0):
        self.total_s = total_s
        self.interval_s = interval_s
        self.sample: ProgressSample | None = None
        self.status = ""
        self.errors = 0
        self.last_error = ""

    def feed(self, line: str) -> bool:
        """Take one output line; True when the line changed what is shown."""
        sample = parse_progress(line)
        if sample is not None:
            self.sample = sample
            if self.status.startswith("running Locust"):  # said once at the start: the figures take over
                self.status = ""
            return True
        if line.startswith(STATUS_PREFIX):
            self.status = line[len(STATUS_PREFIX):].strip()
            return True
        if "/ERROR/" in line or "/CRITICAL/" in line or line.startswith("Traceback"):
            self.errors += 1
            self.last_error = line.split(": ", 1)[-1].strip()
            return True
        return False

    @property
    def elapsed_s(self) -> float:
        return self.sample.elapsed_s if self.sample else 0.0

    def figures(self) -> str:
        """`8 users, 180.6 req/s, p95 89 ms, 0 failed/s (so far)` (empty before the first sample): the
        last seconds' figures, provisional; a step's own are on its step line."""
        s = self.sample
        if s is None:
            return ""
        p95 = "-" if s.p95_ms is None else f"{s.p95_ms:.0f}"
        text = f"{load_words(s.users, None)}, {s.rps:.1f} req/s"
        if abs(s.goodput_rps - s.rps) >= 0.05:
            text += f" (goodput {s.goodput_rps:.1f})"
        text += f", p95 {p95} ms, {s.failures / max(self.interval_s, 1e-9):.0f} failed/s"
        return text + (f", {s.backoffs} back-offs" if s.backoffs else "") + " (so far)"

    def text(self) -> str:
        """The one line: elapsed time, the last second's figures, the last step line, errors."""
        clock = f"{self.elapsed_s:.0f} s" + (f" of {self.total_s:.0f} s" if self.total_s else "")
        parts = [f"[{clock}] {self.figures()}" if self.sample else "starting Locust"]
        if self.errors:
            last = self.last_error if len(self.last_error) <= 60 else self.last_error[:59] + "…"
            parts.append(f"{self.errors} error line{'s' if self.errors != 1 else ''} in locust.log (last: {last})")
        if self.status:
            parts.append(self.status)
        line = " | ".join(parts)
        return line if len(line) <= WIDTH else line[:WIDTH - 1] + "…"


# ------------------------------------------------------------------------------------- displays

class Display:
    """Shows a RunProgress; `close` shows the final line."""

    def update(self, progress: RunProgress) -> None:
        pass

    def close(self, final: str) -> None:
        pass


class NotebookLine(Display):
    """One output in a Jupyter notebook, replaced on every update (a display id)."""

    def __init__(self) -> None:
        from IPython.display import display  # lazy: IPython, there only in a notebook

        self._handle = display({"text/plain": "sm-locust: starting"}, raw=True, display_id=True)

    def _show(self, text: str) -> None:
        self._handle.update({"text/plain": text}, raw=True)

    def update(self, progress: RunProgress) -> None:
        self._show(f"sm-locust {progress.text()}")

    def close(self, final: str) -> None:
        self._show(f"sm-locust: {final}")


class TerminalLine(Display):
    """A terminal line rewritten in place; to a file or pipe, a line every `every_s` and per step."""

    def __init__(self, stream: TextIO | None = None, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = is_tty(self.stream)
        self.every_s, self.clock = every_s, clock
        self._printed_at: float | None = None
        self._status = ""

    def update(self, progress: RunProgress) -> None:
        text = clean(f"sm-locust {progress.text()}", None)
        if self.tty:
            width = max(20, shutil.get_terminal_size((WIDTH, 20)).columns - 1)
            self.stream.write("\r" + text[:width] + "\x1b[K")
            self.stream.flush()
            return
        now = self.clock()
        if progress.status != self._status or self._printed_at is None or now - self._printed_at >= self.every_s:
            self._status, self._printed_at = progress.status, now
            print(text, file=self.stream, flush=True)

    def close(self, final: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        print(f"sm-locust: {clean(final, None)}", file=self.stream, flush=True)  # it names the run's folder


class TqdmBar(Display):
    """A tqdm bar over the run's seconds (its length when known), the figures as its postfix."""

    def __init__(self, total_s: float | None, notebook: bool = False, stream: TextIO | None = None):
        bar_class = importlib.import_module("tqdm.notebook" if notebook else "tqdm.std").tqdm  # optional: imported late
        self.stream = stream or (sys.stdout if notebook else sys.stderr)
        fmt = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}]{postfix}" if total_s
               else "{desc}: {n:.0f} s{postfix}")
        self.bar = bar_class(total=total_s, desc="sm-locust", unit="s", bar_format=fmt, file=self.stream, leave=True,
                             dynamic_ncols=True)
        self.total_s = total_s

    def update(self, progress: RunProgress) -> None:
        elapsed = progress.elapsed_s
        self.bar.n = min(elapsed, self.total_s) if self.total_s else elapsed
        self.bar.set_postfix_str(" | ".join(p for p in (progress.figures(), progress.status) if p), refresh=False)
        self.bar.refresh()

    def close(self, final: str) -> None:
        self.bar.close()
        print(f"sm-locust: {clean(final, None)}", file=self.stream, flush=True)


# ------------------------------------------------------------------------------------- choosing

def in_notebook() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel; a terminal IPython has none)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def is_tty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def choose_display(progress: object, *, notebook: bool, tty: bool, has_tqdm: bool, has_widgets: bool) -> str:
    """Which display a run gets: "notebook-line", "terminal-line", "tqdm", "tqdm-notebook" or "off".

    `progress`: True / "auto" (a tqdm bar when tqdm is installed, in a notebook only with ipywidgets
    for a widget bar, on a terminal only when it is one (`tty`): a log file gets periodic lines, not
    a bar's every redraw; else the line), "line", "tqdm" (UsageError without tqdm), False / "off"."""
    choice = "auto" if progress is True else "off" if progress in (False, None) else progress
    if choice not in CHOICES:
        raise UsageError(f"progress={progress!r}: choose True, False, or one of {', '.join(repr(c) for c in CHOICES)}")
    if choice == "off":
        return "off"
    if choice == "tqdm" and not has_tqdm:
        raise UsageError("progress='tqdm' needs tqdm: pip install tqdm (or pass progress=True for a plain line)")
    bar = choice == "tqdm" or (choice == "auto" and has_tqdm and (has_widgets if notebook else tty))
    if bar:
        return "tqdm-notebook" if notebook and has_widgets else "tqdm"
    return "notebook-line" if notebook else "terminal-line"


def make_display(progress: object, total_s: float | None) -> Display:
    notebook = in_notebook()
    kind = choose_display(progress, notebook=notebook, tty=is_tty(sys.stderr), has_tqdm=installed("tqdm"),
                          has_widgets=installed("ipywidgets"))
    if kind == "notebook-line":
        return NotebookLine()
    if kind == "terminal-line":
        return TerminalLine()
    if kind in ("tqdm", "tqdm-notebook"):
        return TqdmBar(total_s, notebook=kind == "tqdm-notebook")
    return Display()
