"""Two runs into one folder from two threads: only one of them made the folder, and the refused one's clean-up
leaves the folder the other is running in (core/folder.py `make_out_dir`, `discard_out_dir`)."""

from __future__ import annotations

import threading

from sm_locust.core.folder import discard_out_dir, make_out_dir
from sm_locust.util.outputs import locked_by_another, locked_folder


def test_only_one_of_two_calls_made_the_folder(tmp_path):
    out = tmp_path / "run"
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def make():
        barrier.wait()
        results.append(make_out_dir(out))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]


def test_the_refused_runs_clean_up_leaves_the_winners_folder(tmp_path):
    out = tmp_path / "run"
    make_out_dir(out)
    holding, release = threading.Event(), threading.Event()

    def winner():
        with locked_folder(out):
            (out / "summary.json.partial").write_text("{}")
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=winner)
    thread.start()
    try:
        assert holding.wait(10)
        assert locked_by_another(out)
        discard_out_dir(out, True)  # the refused run believed it made the folder
        discard_out_dir(out, False)
        assert (out / "summary.json.partial").is_file()
    finally:
        release.set()
        thread.join()
    assert not locked_by_another(out)
    discard_out_dir(out, True)  # nobody holds it now: this call's own folder goes
    assert not out.exists()


def test_the_calling_threads_own_lock_does_not_count(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    with locked_folder(out):
        assert not locked_by_another(out)


class FakeLocust:
    """A Locust child: running until it gets a signal."""

    def __init__(self):
        self.signals: list[int] = []
        self.pid = -1

    def poll(self):
        return 0 if self.signals else None

    def send_signal(self, signum):
        self.signals.append(signum)


def test_a_run_in_another_thread_stops_when_the_main_thread_has_ended():
    """Was: a script's Ctrl+C ended its main thread, and Python waited for the run's thread to its end."""
    import signal
    import time

    from sm_locust.core.child import SignalForwarder

    alive = {"main": True}
    proc = FakeLocust()
    result: list[SignalForwarder] = []

    def run_thread():
        with SignalForwarder(proc, main_alive=lambda: alive["main"]) as forwarder:
            result.append(forwarder)
            while proc.poll() is None and not stop.is_set():
                time.sleep(0.01)

    stop = threading.Event()
    thread = threading.Thread(target=run_thread)
    thread.start()
    try:
        time.sleep(3 * SignalForwarder.WATCH_EVERY_S)
        assert proc.signals == []  # the main thread lives: the run goes on
        alive["main"] = False
        thread.join(10)
        assert not thread.is_alive()
        assert proc.signals == [signal.SIGINT] and result[0].received == signal.SIGINT
    finally:
        stop.set()
        thread.join(5)
