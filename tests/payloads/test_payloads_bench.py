"""bench/serializers.py runs end to end in --quick mode (figures printed, none asserted)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust


def test_serializer_bench_quick_mode_prints_every_scenario():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "serializers.py"), "--quick"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for label in ("JSON request", "protobuf request", "npy request", "JSON response", "npy response", "raw response",
                  "1 x 500 rows", "10 x 50 rows"):
        assert f"| {label} |" in result.stdout, label
    assert "failed" not in result.stdout
