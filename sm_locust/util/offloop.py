"""CPU-bound set-up work off the gevent loop: `off_loop(work)` runs `work` in a native thread of gevent's
threadpool and waits for it cooperatively, so the loop keeps running every other greenlet meanwhile
(a Locust worker's heartbeats, its users, the recorder). Where threading is not gevent's (no Locust in
the process) or already inside such a native thread, `work` runs in place.

Why: building a boto3 client imports boto3 and parses its service model and endpoint rules (JSON,
pure Python): ~0.3 s of CPU on an idle machine, seconds on a loaded one. On the loop nothing else
runs for that time, and a Locust master marks a worker missing when its heartbeats stop for about
4 s (docs/facts.md, "Locust"): a run whose workers build their clients as the test starts could end
with no request sent.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")

_native_local: threading.local | None = None  # per native thread (`_inside`), made on first use


def _gevent(module: str = "gevent") -> ModuleType:
    """gevent's `module`, already imported whenever it patched threading (nothing imported here: a
    process without Locust never loads gevent for this)."""
    return sys.modules[module]


def _inside() -> threading.local:
    """A native thread-local (gevent's patched `threading.local` is per greenlet, not per thread)."""
    global _native_local
    if _native_local is None:
        _native_local = _gevent("gevent.monkey").get_original("threading", "local")()
    return _native_local


def loop_is_patched() -> bool:
    """True when threading is gevent's (Locust imported: every greenlet shares one OS thread)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def in_native_worker() -> bool:
    """True inside `off_loop`'s native thread (the work running there)."""
    return loop_is_patched() and bool(getattr(_inside(), "active", False))


def off_loop(work: Callable[[], T]) -> T:
    """`work()`, run in gevent's threadpool when the calling thread is gevent's loop (module doc); its
    exception is raised here."""
    if not loop_is_patched() or in_native_worker():
        return work()
    return _gevent().get_hub().threadpool.apply(_marked, (work,))


def begin_off_loop(work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` as `off_loop` would, without waiting: the returned call gives its result (waiting
    cooperatively until it is there) or raises its exception. Without gevent's threading `work` runs now."""
    if not loop_is_patched() or in_native_worker():
        try:
            value = work()
        except Exception as exc:  # handed to the caller of the result, as from the thread
            failure = exc

            def raise_it() -> T:
                raise failure

            return raise_it
        return lambda: value
    return _gevent().get_hub().threadpool.spawn(_marked, work).get


def _marked(work: Callable[[], T]) -> T:
    """`work()` in the native thread, marked so that a nested `off_loop` runs in place."""
    local = _inside()
    local.active = True
    try:
        return work()
    finally:
        local.active = False
