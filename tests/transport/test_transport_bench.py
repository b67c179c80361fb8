"""The transport bench runs (short mode): every client measured against the bench server in both body
modes (fresh, repeated), figures and per-round ratios printed. No timing asserts: the machine is
shared; the full figures are in docs/transport.md. Half-second measurements: the test proves the
bench runs every client and prints its tables, which any duration shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

BENCH = Path(__file__).resolve().parents[2] / "bench" / "transport.py"


def test_transport_bench_quick():
    command = [sys.executable, str(BENCH), "--quick", "--seconds", "0.5", "--warmup", "0.2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("| client |"):]
    for client in ("raw", "fasthttp", "boto3", "fast"):
        for mode in ("fresh", "repeated"):
            row = next(line for line in table.splitlines() if line.startswith(f"| {client} | {mode} |"))
            assert row.split("|")[-2].strip() == "0", row  # no failures
    assert "round 1 fresh: fast / raw = " in done.stdout
    assert "round 1 repeated: fast / raw = " in done.stdout
    assert "signed fast / raw unsigned = " in done.stdout
