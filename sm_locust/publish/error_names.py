"""The error names a run publishes: a bounded set, the rest folded into `Other`.

Why: each distinct `Error` dimension value is one more billed CloudWatch custom metric, and each
distinct `error` label one more Prometheus series. An endpoint answering a new error code per request
made a 6-s run publish 249 `Error` values. A run publishes at most `MAX_ERROR_NAMES` names (the first
ones seen; within one interval the most frequent first), each at most `MAX_ERROR_NAME_CHARS`
characters of `[A-Za-z0-9_.:/-]` (anything else becomes `_`); every other code is counted under
`Other`, and the first fold is said once. summary.json's `totals.errors` keeps every code as counted.
Pure; one `ErrorNames` per run and per surface (CloudWatch, Prometheus).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping

MAX_ERROR_NAMES = 20
MAX_ERROR_NAME_CHARS = 64
OTHER = "Other"
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_.:/-]")


def error_name(code: object) -> str:
    """`code` as a publishable name: the charset and length above; `Error` when nothing is left."""
    name = _NOT_ALLOWED.sub("_", str(code))[:MAX_ERROR_NAME_CHARS]
    return name if name.strip("_") else "Error"


class ErrorNames:
    """The names one run publishes, first come first kept, at most `limit` (`Other` not counted);
    `on_fold(text)` is called once, when the first code is folded into `Other`."""

    def __init__(self, limit: int = MAX_ERROR_NAMES, on_fold: Callable[[str], None] | None = None):
        self.limit = limit
        self.kept: dict[str, None] = {}
        self.folded = 0  # codes counted under Other (occurrences, not names)
        self._on_fold = on_fold
        self._lock = threading.Lock()

    def fold(self, errors: Mapping[str, int] | Iterable[tuple[str, int]]) -> dict[str, int]:
        """Counts by code -> counts by published name (several codes may add up under one name)."""
        pairs = list(errors.items()) if isinstance(errors, Mapping) else list(errors)
        out: dict[str, int] = {}
        said = None
        with self._lock:
            for code, count in sorted(pairs, key=lambda p: (-p[1], str(p[0]))):
                name = error_name(code)
                if name not in self.kept and name != OTHER and len(self.kept) < self.limit:
                    self.kept[name] = None
                if name not in self.kept:
                    if not self.folded and count > 0:
                        said = (f"more than {self.limit} distinct error codes: the rest are published as "
                                f"'{OTHER}' (summary.json's totals.errors keeps each one)")
                    self.folded += count
                    name = OTHER
                out[name] = out.get(name, 0) + count
        if said and self._on_fold is not None:
            self._on_fold(said)
        return out

    def name_of(self, code: object) -> str:
        """The name `code` is published under now (its own once kept, else `Other`); admits nothing."""
        name = error_name(code)
        return name if name in self.kept else OTHER


def fold_like(published: Iterable[str], errors: Mapping[str, int]) -> dict[str, int]:
    """summary.json's counts by code, folded onto the names a run published: a code whose name was
    published keeps it, every other one counts under `Other` (to compare what CloudWatch holds)."""
    names = set(published) - {OTHER}
    out: dict[str, int] = {}
    for code, count in errors.items():
        name = error_name(code)
        name = name if name in names else OTHER
        out[name] = out.get(name, 0) + int(count)
    return out
