"""A distributed sweep on 127.0.0.1 (`load: {processes: 2}`) that loses a Locust worker mid-run: one of the
first run's forked workers is killed without a goodbye once the test is under way; that measurement is not
trusted (its summary.json records the lost worker), the configuration is measured again by itself, and its
figures are never those of the run that lost the worker. Relations, never wall-clock bounds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from sm_locust.record.summary import LOST_WORKER_FIX
from sm_locust.sweep.runner import FIRST_SUFFIX
from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import wait_exit

pytestmark = pytest.mark.e2e  # the embedded endpoint, Locust with forked workers

SWEEP = f"""\
name: lost-worker
endpoint: {{service_time_ms: 20}}
grid: {{max_concurrency: [4]}}
load: {{payload: {SAMPLE_PAYLOAD}, users: 4, run_time: 20s, processes: 2}}
price_per_hour: 0.2
confirm: false
report: false
"""


def forked_workers(root: psutil.Process) -> list[psutil.Process]:
    """Locust's --processes workers under `root`: children forked by a Locust process with their own command line
    (the embedded endpoint's server forks its own too: not Locust)."""
    found = []
    for p in root.children(recursive=True):
        try:
            parent = p.parent()
            if parent is not None and parent.pid != root.pid and parent.cmdline() == p.cmdline() \
                    and "locust" in p.cmdline():
                found.append(p)
        except psutil.Error:
            continue
    return found


def test_a_worker_lost_mid_run_is_not_trusted_and_the_configuration_is_measured_again(tmp_path):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "sm_locust", "sweep", "sweep.yaml", "--out", "out", "--yes"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    try:
        while killed is None:  # (pytest-timeout guards a hang: no wall-clock bound here)
            assert proc.poll() is None, "the sweep ended before its distributed test got under way"
            # the master's recorder writes a second once the workers' reports cover it: its first line says the test
            # is under way,
            # early enough that the master marks the worker missing long before the run's end
            timelines = list(out.glob("*/timeline.jsonl"))
            workers = forked_workers(psutil.Process(proc.pid))
            if len(workers) == 2 and timelines and timelines[0].read_text().strip():
                killed = workers[0].pid
                workers[0].send_signal(signal.SIGKILL)  # no goodbye: the master notices the silence
            time.sleep(0.2)
        wait_exit(proc, 300)
    finally:
        if proc.poll() is None:
            proc.kill()
        output = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode in (0, 1), output
    document = json.loads((out / "sweep.json").read_text())
    (row,) = document["configurations"]
    first = row["remeasured"]  # the run that lost the worker was not trusted: measured again by itself
    assert first is not None, (row, output)
    assert "Locust worker" in first["first_reason"] and f"({LOST_WORKER_FIX})" in first["first_reason"], first
    assert first["first_run_dir"] == row["run_dir"] + FIRST_SUFFIX
    lost_run = json.loads((out / first["first_run_dir"] / "summary.json").read_text())
    assert [w["reason"] for w in lost_run["workers"]["lost"]] == ["missing"]
    assert lost_run["verdict"]["status"] == "inconclusive"
    assert "NOT TRUSTED: a Locust worker was lost" in output
    again = json.loads((out / row["run_dir"] / "summary.json").read_text())
    assert again["workers"]["lost"] == [] and again["workers"]["at_end"] == 2  # the second run kept both
    if row["status"] == "ok":  # trusted on its second measurement, whose figures it quotes
        assert row["client_bound"] is None and document["recommendation"]["label"] == row["label"]
        assert proc.returncode == 0
    else:  # a busy machine held the second back: INCONCLUSIVE, never recommended
        assert row["status"] == "inconclusive" and document["recommendation"]["index"] is None, row
