"""The transport bench runs (short mode): every client measured against the bench server, figures
printed. No timing asserts: the machine is shared; the full figures are in docs/transport.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "transport.py"


def test_transport_bench_quick():
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("| client |"):]
    for client in ("raw", "fasthttp", "boto3", "fast"):
        row = next(line for line in table.splitlines() if line.startswith(f"| {client} |"))
        assert row.split("|")[-2].strip() == "0", row  # no failures
    assert "signed fast / raw unsigned = " in done.stdout
