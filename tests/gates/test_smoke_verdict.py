"""`sm-locust smoke` prints the run's whole verdict (every line `run` closes with), sanitised: an
INCONCLUSIVE note under the totals line is the reason the gates below are n/a."""

from __future__ import annotations

import argparse

from sm_locust.cli import smoke
from sm_locust.core.verdict import verdict_line

REASON = "step 1 (2 users) was client-bound: client CPU 97 % >= 90 %"


def test_smoke_prints_every_line_of_the_verdict_sanitised(monkeypatch, capsys, tmp_path):
    summary = {"schema": 1, "duration_s": 15.0,
               "totals": {"requests": 300, "failures": 0, "rps": 20.0, "p95_ms": 12.0, "p99_ms": 15.0},
               "verdict": {"status": "inconclusive", "reason": f"{REASON}\x1b[2J"}}
    monkeypatch.setattr(smoke, "plan_run", lambda arguments: arguments)
    monkeypatch.setattr(smoke, "start_run", lambda planned: (tmp_path, summary))
    parser = argparse.ArgumentParser()
    smoke.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["smoke", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9"])
    args.passthrough = []
    assert smoke._short_run(args) == (tmp_path, 15.0)
    lines = capsys.readouterr().out.splitlines()
    verdict = verdict_line(summary).splitlines()
    assert len(verdict) == 2  # the totals line and the INCONCLUSIVE note under it
    assert lines[0] == f"sm-locust smoke: {verdict[0]}"
    assert lines[1].startswith(f"sm-locust smoke: INCONCLUSIVE: {REASON}\\x1b[2J")  # the escape shown, not obeyed
    assert "\x1b" not in "".join(lines)
    assert lines[2] == f"sm-locust smoke: results in {tmp_path}/" and len(lines) == 3
