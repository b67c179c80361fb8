"""What `sm-locust run` prints: no periodic Locust tables unless `--locust-stats`, the verdict once,
and the checks block whenever SLOs or stop conditions were given."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sm_locust.core.arguments import RunArguments, add_run_arguments
from sm_locust.core.launch import LoadSettings, locust_command
from sm_locust.core.plan import plan_run
from sm_locust.errors import UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli

TABLE_HEADER = "Type     Name"  # the first line of each of Locust's stats tables


def test_locust_tables_are_off_unless_asked_for():
    out = Path("/tmp/run")
    assert "--only-summary" in locust_command([], LoadSettings(), out)
    assert "--only-summary" not in locust_command([], LoadSettings(locust_stats=True), out)
    assert "--only-summary" in locust_command([], LoadSettings(quiet=True), out)
    closing = locust_command([], LoadSettings(closing_verdict=True), out)
    assert closing[closing.index("--sm-closing") + 1] == "true"
    assert "--sm-closing" not in locust_command([], LoadSettings(), out)


def _args(*argv: str) -> RunArguments:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return RunArguments.parse(parser.parse_args(["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), *argv]))


def test_locust_stats_and_quiet_contradict():
    assert plan_run(_args("--locust-stats")).load.locust_stats is True
    assert plan_run(_args(), closing_verdict=True).load.closing_verdict is True
    with pytest.raises(UsageError, match="--locust-stats"):
        plan_run(_args("--locust-stats", "-q"))


@pytest.mark.e2e
def test_run_prints_no_periodic_table_the_verdict_once_and_its_checks(endpoint_factory, tmp_path):
    ep = endpoint_factory()
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                     "--shape", "step", "--step-seconds", "1.5", "--max-users", "2", "--latency-slo-ms", "1000",
                     "--max-error-rate", "0.5", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.startswith(TABLE_HEADER) for line in lines) == 2  # Locust's final two tables, nothing periodic
    head = lines.index(next(line for line in lines if line.startswith("sm-locust: checks: ")))
    verdict = lines[head - 1]  # totals, verdict, checks: whatever the verdict (a busy machine: inconclusive)
    assert lines[head - 2].startswith("sm-locust: ") and " requests, " in lines[head - 2], result.stdout
    assert lines.count(verdict) == 1, result.stdout  # once: the shape did not print it too
    closing = lines[head:]
    assert closing[0] == "sm-locust: checks: 2 of 2 passed" or "n/a" in closing[1], result.stdout
    assert closing[1].split()[2:4] == ["p95", "latency"] and closing[2].split()[2:4] == ["error", "rate"]
    assert closing[-1].startswith("sm-locust: results in")
