"""A sweep run on a starved machine, shared by the sweep tests (no test module imports another).

When the machine is so busy that the load generator cannot drive the endpoint, the right answer of a
sweep is INCONCLUSIVE for the configurations it could not measure, naming the load generator (each is
measured again by itself first), and exit 1. `skip_if_the_load_generator_was_the_bottleneck` accepts
exactly that outcome and skips the claims only a full answer can meet; any other outcome returns, and
the test goes on to assert the full answer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

import pytest

LOAD_GENERATOR = "the load generator, not the endpoint, was the bottleneck in both measurements"
CLIENTS = "its figures are the client's: not ranked, not recommended"


def skip_if_the_load_generator_was_the_bottleneck(doc: Mapping[str, Any],
                                                   result: subprocess.CompletedProcess) -> None:
    """sweep.json's `doc` and the sweep's finished process: skip the test when some configuration is
    INCONCLUSIVE because the load generator was the bottleneck twice, and every other one was measured;
    said on the terminal, the sweep exited 1 and recommends none of them. Otherwise return."""
    rows = doc["configurations"]
    inconclusive = [c for c in rows if c["status"] == "inconclusive"]
    if not inconclusive:
        return
    output = result.stdout + result.stderr
    assert {c["status"] for c in rows} <= {"ok", "inconclusive"}, output
    assert result.returncode == 1, output
    for c in inconclusive:
        assert c["reason"].startswith(LOAD_GENERATOR) and CLIENTS in c["reason"], c["reason"]
        assert f"{c['label']}: INCONCLUSIVE: {LOAD_GENERATOR}" in result.stdout, output
        assert c["label"] in doc["recommendation"].get("inconclusive", []), doc["recommendation"]
        assert doc["recommendation"].get("label") != c["label"], doc["recommendation"]
    pytest.skip(f"{len(inconclusive)} of {len(rows)} configurations INCONCLUSIVE: the load generator was the "
                "bottleneck on this busy machine, as the sweep should say")
