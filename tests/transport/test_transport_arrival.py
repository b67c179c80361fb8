"""A streamed frame is stamped with the loop's wake-up time (transport/arrival.py), not with when its greenlet
got to run after the others the same wake-up released."""

from __future__ import annotations

import time

import gevent
import gevent.socket

import pytest

from sm_locust.transport.arrival import MAX_CORRECTION_S, arrival_clock, corrected


def test_the_correction_is_how_long_ago_the_loop_woke():
    assert corrected(100.0, 5000.0, 4999.95) == pytest.approx(99.95)
    assert corrected(100.0, 5000.0, 5000.0) == 100.0  # woke just now: nothing to take off
    assert corrected(100.0, 5000.0, 5000.0 - MAX_CORRECTION_S - 1) == 100.0  # a wall-clock step: left alone
    assert corrected(100.0, 5000.0, 5000.2) == 100.0  # the loop's time ahead of the wall clock: left alone
    assert corrected(100.0, 5000.0, 4999.95, previous=99.99) == 99.99  # never before the stream's last frame


def test_a_greenlet_run_late_in_its_wake_up_is_stamped_at_the_wake_up():
    stamps: list[tuple[float, float]] = []
    pairs = {name: gevent.socket.socketpair() for name in ("a", "b")}

    def reader(name: str) -> None:
        stamp = arrival_clock()
        pairs[name][0].recv(16)
        stamps.append((time.perf_counter(), stamp()))
        if len(stamps) == 1:  # the first to run parses for 60 ms without yielding: the other waits its turn
            end = time.perf_counter() + 0.06
            while time.perf_counter() < end:
                pass

    greenlets = [gevent.spawn(reader, name) for name in pairs]
    gevent.sleep(0.01)  # both wait on their socket
    for _, writer in pairs.values():
        writer.send(b"x")  # both readable before the loop polls again: one wake-up releases both
    gevent.joinall(greenlets, timeout=5)
    (first_read, first_stamp), (second_read, second_stamp) = stamps
    assert second_read - first_read >= 0.055  # read after the first's parsing ...
    assert abs(second_stamp - first_stamp) < second_read - first_read - 0.04  # ... stamped at the wake-up
    for a, b in pairs.values():
        a.close()
        b.close()
