"""Two runs into one folder from two threads: only one of them made the folder, and the refused one's clean-up
leaves the folder the other is running in (core/launch.py `make_out_dir`, `discard_out_dir`)."""

from __future__ import annotations

import threading

from sm_locust.core.launch import discard_out_dir, make_out_dir
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
