"""When a streamed frame arrived: the event loop's wake-up time, not when its greenlet got to run.

One gevent loop serves every stream of a process. When several sockets turn readable at once, the
loop wakes from its poll once and runs their greenlets one after another: the last one reads its
frame after all the others have parsed theirs, and a `perf_counter()` taken then adds that queue to
the token's gap (the ITL tail grows with the streams a process holds, the median does not). libev
and libuv stamp each iteration with the time their poll returned (`loop.now()`, wall-clock
seconds); a frame read in that iteration was on its socket by then. `arrival_stamp()` returns that
time on `perf_counter`'s scale: `perf_counter() - (time.time() - loop.now())`. The correction is
used only within (0, `MAX_CORRECTION_S`) (a wall-clock step leaves the reading as it is), and stamps
never go backwards within a stream (`corrected`). docs/facts.md, "A streamed token's arrival time".
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_CORRECTION_S = 1.0


def corrected(perf_now: float, wall_now: float, loop_now: float, previous: float | None = None) -> float:
    """The frame's arrival on `perf_counter`'s scale: `perf_now` less how long ago the loop woke
    (`wall_now - loop_now`, used when within (0, MAX_CORRECTION_S)), never before `previous`."""
    behind = wall_now - loop_now
    stamp = perf_now - behind if 0.0 < behind < MAX_CORRECTION_S else perf_now
    return stamp if previous is None or stamp >= previous else previous


def _plain(previous: float | None = None) -> float:
    return time.perf_counter()


def arrival_clock() -> Callable[[float | None], float]:
    """`stamp(previous)`: the calling greenlet's loop's wake-up time (perf_counter scale), not before `previous`;
    plain `perf_counter()` outside gevent."""
    try:
        from gevent import get_hub  # lazy: the transport module is imported by processes without gevent too
    except ImportError:
        return _plain
    loop = get_hub().loop
    perf, wall, now = time.perf_counter, time.time, loop.now

    def stamp(previous: float | None = None) -> float:
        return corrected(perf(), wall(), now(), previous)

    return stamp
