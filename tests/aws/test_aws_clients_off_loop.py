"""Building an AWS client never holds the gevent loop (`util.offloop`, `aws.clients`).

In a Locust process a boto3 client's build (boto3's import, its service model and endpoint rules
parsed) runs in a native thread: a greenlet that ticks on the loop (as a Locust worker's heartbeat
does) goes on ticking while the build is under way. The stand-in build below is CPU work that ends
only once the loop has ticked: built on the loop, as before, it would see no tick at all.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
import gevent.monkey
import locust  # noqa: F401  (gevent patching before boto3)

import boto3
import botocore.session
import pytest

from sm_locust.aws.clients import Purpose, chain_credentials, client
from sm_locust.util.offloop import begin_off_loop, in_native_worker, loop_is_patched, off_loop

native_ident = gevent.monkey.get_original("threading", "get_ident")
native_lock = gevent.monkey.get_original("threading", "Lock")
GUARD_S = 10.0
"""How long a stand-in build spins waiting for the loop's ticks before it gives up (a guard against a
hung test, not a bound: built off the loop the ticks come at once; on it they never do)."""


class Ticker:
    """A greenlet that ticks on the loop, as Locust's heartbeat greenlet does."""

    def __init__(self) -> None:
        self.ticks = 0
        self.loop_thread = native_ident()
        self.greenlet = gevent.spawn(self._run)
        gevent.sleep(0)

    def _run(self) -> None:
        while True:
            self.ticks += 1
            gevent.sleep(0.001)

    def spin_until_it_ticks(self, wanted: int = 3) -> tuple[int, int]:
        """CPU work (a model's parse stands here) that ends once the loop ticked `wanted` times: (ticks
        seen during it, the native thread it ran in)."""
        before, deadline = self.ticks, time.monotonic() + GUARD_S
        while self.ticks < before + wanted and time.monotonic() < deadline:
            pass
        return self.ticks - before, native_ident()

    def stop(self) -> None:
        self.greenlet.kill()


@pytest.fixture
def ticker():
    ticking = Ticker()
    yield ticking
    ticking.stop()


def test_locust_patched_threading_here():
    assert loop_is_patched() and not in_native_worker()


def test_a_client_is_built_in_a_native_thread_while_the_loop_ticks(monkeypatch, ticker):
    seen = {}

    class SlowSession:  # boto3's Session: its client() is the service model's load
        def __init__(self, **_kw):
            pass

        def client(self, service, **kw):
            seen["ticks"], seen["thread"] = ticker.spin_until_it_ticks()
            return SimpleNamespace(service=service, meta=SimpleNamespace(endpoint_url="https://sqs.example"))

        def get_credentials(self):
            return object()

    monkeypatch.setattr(boto3.session, "Session", SlowSession)
    built = client("sqs", Purpose.CONTROL, region="us-east-1")
    assert built.service == "sqs"
    assert seen["thread"] != ticker.loop_thread
    assert seen["ticks"] >= 3  # the loop went on while the client was built


def test_the_credential_chain_is_read_in_a_native_thread_while_the_loop_ticks(monkeypatch, ticker):
    seen = {}

    class SlowSession:
        def __init__(self, profile=None):
            pass

        def get_credentials(self):
            seen["ticks"], seen["thread"] = ticker.spin_until_it_ticks()
            return "credentials"

    monkeypatch.setattr(botocore.session, "Session", SlowSession)
    assert chain_credentials() == "credentials"
    assert seen["thread"] != ticker.loop_thread and seen["ticks"] >= 3


def test_off_loop_raises_the_works_exception_and_runs_nested_work_in_place():
    def nested():
        outer = native_ident()
        assert in_native_worker()
        return outer, off_loop(native_ident)

    outer, inner = off_loop(nested)
    assert outer == inner != native_ident()  # one native thread, not a second one from inside the first
    with pytest.raises(ValueError, match="bad profile"):
        off_loop(lambda: (_ for _ in ()).throw(ValueError("bad profile")))


def test_begin_off_loop_returns_before_the_work_ends():
    gate = native_lock()
    gate.acquire()
    result = begin_off_loop(lambda: gate.acquire(timeout=GUARD_S))  # waits for the release below
    gate.release()  # had the work run in place, it would have waited GUARD_S for this and got False
    assert result() is True
    failed = begin_off_loop(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed()
