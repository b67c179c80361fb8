"""A Locust process killed with SIGKILL mid-run (an OOM kill, a lost master) leaves a run folder that
reads: summary.json is its last checkpoint (valid, `complete: false`), timeline.jsonl holds every
second up to it, and `sm-locust report`, `compare` and `smoke --run-dir` work on it and say in one
line that the run did not end normally. The checkpoint interval is shortened to ~1 s for the test
(`SM_LOCUST_CHECKPOINT_SECONDS`; 60 s by default)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sm_locust.core.child import LoadSettings, locust_command
from sm_locust.record.recorder import CHECKPOINT_ENV
from sm_locust.record.runfolder import read_run
from sm_locust.record.schema import check_summary
from sm_locust.record.summary import iso
from sm_locust.record.timeline import read_seconds
from sm_locust.report.merge import parse_time
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.starved import gates_held_by_the_load_generator

INTERRUPTED = "the run did not end normally"


def _summary(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """A 60-s run against the local endpoint, killed with SIGKILL after its third checkpoint."""
    from sm_locust.endpoint.server import LocalEndpoint

    base = tmp_path_factory.mktemp("soak")
    out = base / "run"
    out.mkdir()
    with LocalEndpoint(log_path=base / "endpoint.log") as endpoint:
        cmd = locust_command(["--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                              str(SAMPLE_PAYLOAD)],
                             LoadSettings(users=2, spawn_rate=10, run_time="60s", quiet=True), out)
        env = {**os.environ, CHECKPOINT_ENV: "1", "PYTHONUNBUFFERED": "1", "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true"}
        with open(base / "locust.log", "wb") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                checkpoints: set[str] = set()
                deadline = time.time() + 90
                while time.time() < deadline and proc.poll() is None:
                    summary = _summary(out / "summary.json")
                    if summary and summary["totals"]["requests"] > 0:
                        checkpoints.add(summary["ended_at"])
                    if len(checkpoints) >= 3:
                        break
                    time.sleep(0.2)
                assert proc.poll() is None, (base / "locust.log").read_text()[-3000:]
                assert len(checkpoints) >= 3, "no checkpoint with requests within 90 s"
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return out


@pytest.mark.e2e
def test_the_killed_run_leaves_its_last_checkpoint_and_timeline(killed_run):
    summary = json.loads((killed_run / "summary.json").read_text())
    check_summary(summary, killed_run / "summary.json")  # the documented shape
    assert summary["complete"] is False
    assert summary["totals"]["requests"] > 0 and summary["totals"]["failures"] == 0
    assert summary["steps"] and summary["steps"][0]["users"] == 2
    assert summary["hours"] and summary["hours"][0]["requests"] > 0
    assert not list(killed_run.glob("summary.json*.tmp"))  # atomic rewrites leave no temp file behind
    seconds = read_seconds(killed_run / "timeline.jsonl")  # every whole line parses
    checkpoint = parse_time(summary["ended_at"])
    covered = [s for s in seconds if s.t <= checkpoint + 1e-3]
    # every second up to the checkpoint is in the file (flushed at each checkpoint), in order
    assert covered and covered[-1].t >= checkpoint - 1.5, (iso(covered[-1].t), summary["ended_at"])
    assert [s.t for s in seconds] == sorted(s.t for s in seconds)
    assert sum(s.requests for s in covered) <= summary["totals"]["requests"] + 2 * 2  # in flight: <= one per user
    assert read_run(killed_run).interrupted.startswith(INTERRUPTED)


@pytest.mark.e2e
def test_report_works_on_the_killed_run_and_says_so_in_one_line(killed_run):
    result = run_cli("report", str(killed_run), "--no-cloudwatch")
    assert result.returncode == 1, result.stdout + result.stderr  # a gap: the end of the run is missing
    lines = [line for line in result.stderr.splitlines() if INTERRUPTED in line]
    assert len(lines) == 1 and lines[0].startswith("sm-locust report: missing: "), result.stderr
    for name in ("report.html", "merged_timeseries.csv", "steps.csv"):
        assert (killed_run / name).stat().st_size > 0, name
    assert INTERRUPTED in (killed_run / "report.html").read_text()


@pytest.mark.e2e
def test_compare_and_smoke_work_on_the_killed_run_and_say_so(killed_run, tmp_path):
    compared = run_cli("compare", str(killed_run), "--out", str(tmp_path / "cmp"))
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert sum(INTERRUPTED in line for line in compared.stderr.splitlines()) == 1
    assert (tmp_path / "cmp" / "compare.csv").is_file()
    smoke = run_cli("smoke", "--run-dir", str(killed_run), "--max-error-rate", "0")
    summary = json.loads((killed_run / "summary.json").read_text())
    if not gates_held_by_the_load_generator(summary, smoke.stdout):  # else starved, verified: said so
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr  # the gates judge what the checkpoint holds
    assert sum(INTERRUPTED in line for line in smoke.stdout.splitlines()) == 1, smoke.stdout


@pytest.mark.parametrize(("given", "shape", "to_locust"), [("7d", None, "604800s"), ("1d12h", "open", "129600s"),
                                                          ("90m", None, "90m")])
def test_a_soak_run_time_in_days_reaches_locust_in_seconds(given, shape, to_locust):
    from sm_locust.cli import build_parser
    from sm_locust.core.arguments import RunArguments
    from sm_locust.core.plan import plan_run

    argv = ["run", "--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), "-t", given] + (
        ["--shape", shape, "--target-rps", "5"] if shape else [])
    args, _ = build_parser("run").parse_known_args(argv)
    load = plan_run(RunArguments.parse(vars(args))).load
    assert load.run_time == to_locust
    cmd = locust_command([], load, Path("out"))
    assert cmd[cmd.index("--run-time") + 1] == to_locust  # Locust's -t has no days
