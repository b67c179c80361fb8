"""What `sm-locust run` prints: progress while a step runs, no Locust INFO line or table unless asked
for (`-- --loglevel INFO`, `--locust-stats`), the verdict once, and the checks block whenever SLOs or
stop conditions were given."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from sm_locust.core.arguments import RunArguments, add_run_arguments
from sm_locust.core.child import ECHO_ALL, ECHO_DEFAULT, ECHO_QUIET, LoadSettings, echo_mode, locust_command, shows
from sm_locust.core.plan import plan_run
from sm_locust.errors import UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.starved import load_generator_verdict

TABLE_HEADER = "Type     Name"  # the first line of each of Locust's stats tables


def test_locust_tables_are_off_unless_asked_for():
    out = Path("/tmp/run")
    assert "--only-summary" in locust_command([], LoadSettings(), out)
    assert "--only-summary" not in locust_command([], LoadSettings(locust_stats=True), out)
    assert "--only-summary" in locust_command([], LoadSettings(quiet=True), out)
    closing = locust_command([], LoadSettings(closing_verdict=True), out)
    assert closing[closing.index("--sm-closing") + 1] == "true"
    assert "--sm-closing" not in locust_command([], LoadSettings(), out)


def test_processes_put_their_master_on_loopback_at_a_free_port_unless_told_where(monkeypatch):
    """Locust's default master binds every interface on 5557: two `--processes` runs on one machine clashed."""
    ports = iter((23001, 23002, 23003))
    monkeypatch.setattr("sm_locust.core.child.free_port", lambda: next(ports))  # the pick itself binds a socket
    out = Path("/tmp/run")
    first, second = (locust_command([], LoadSettings(processes=2), out) for _ in range(2))
    for cmd in (first, second):
        assert cmd[cmd.index("--master-bind-host") + 1] == cmd[cmd.index("--master-host") + 1] == "127.0.0.1"
        assert cmd[cmd.index("--master-bind-port") + 1] == cmd[cmd.index("--master-port") + 1] != "5557"
    assert first[first.index("--master-port") + 1] != second[second.index("--master-port") + 1]
    assert "--master-bind-host" not in locust_command([], LoadSettings(), out)  # one process: no master
    after = locust_command([], LoadSettings(locust_args=("--processes", "1")), out)  # `sm-locust run -- --processes 1`
    assert after[after.index("--master-bind-host") + 1] == "127.0.0.1"
    told = locust_command([], LoadSettings(processes=2, locust_args=("--master-bind-port", "6000")), out)
    assert "--master-bind-host" not in told and told.count("--master-bind-port") == 1


def _args(*argv: str) -> RunArguments:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return RunArguments.parse(vars(parser.parse_args(["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD),
                                                     *argv])))


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
    assert not any(line.startswith(TABLE_HEADER) for line in lines)  # Locust's tables: --locust-stats brings them
    head = lines.index(next(line for line in lines if line.startswith("sm-locust: checks: ")))
    verdict = lines[head - 1]  # totals, verdict, checks: whatever the verdict (a busy machine: inconclusive)
    assert lines[head - 2].startswith("sm-locust: ") and " requests, " in lines[head - 2], result.stdout
    assert lines.count(verdict) == 1, result.stdout  # once: the shape did not print it too
    closing = lines[head:]
    assert closing[1].split()[2:4] == ["p95", "latency"] and closing[2].split()[2:4] == ["error", "rate"]
    assert closing[-1].startswith("sm-locust: results in")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    if not load_generator_verdict(summary):  # both limits judged and held; max users ended the run (ok, or
        # INCONCLUSIVE on the endpoint's own figures: a capacity not known to +-5 % in 1.5-s steps)
        assert closing[0] == "sm-locust: checks: 2 of 2 passed", result.stdout
        assert [line.split()[1] for line in closing[1:4]] == ["PASS", "PASS", "STOP"], result.stdout
        return
    # INCONCLUSIVE, verified: the figures decide no limit, said once on each check, counted apart
    assert verdict.startswith("sm-locust: INCONCLUSIVE: the load generator was the bottleneck"), result.stdout
    why = "(run inconclusive: the load generator was the bottleneck)"
    assert closing[0].startswith("sm-locust: checks: ") and closing[0].endswith(f", 2 n/a {why}"), result.stdout
    assert [line.split()[1] for line in closing[1:3]] == ["n/a", "n/a"], result.stdout
    assert all(line.endswith(why) for line in closing[1:3]), result.stdout
    assert closing[3].split()[1:4] == ["PASS", "users", "<="] and closing[3].endswith("(stop condition)")


INFO = "[2026-01-01 00:00:00,000] host/INFO/locust.main: Starting Locust 2.47.0"
WARNING = "[2026-01-01 00:00:00,000] host/WARNING/locust.runners: CPU usage above 90%!"
ERROR = "[2026-01-01 00:00:00,000] host/ERROR/locust.runners: something broke"


def test_what_of_locusts_output_reaches_the_terminal():
    assert echo_mode(LoadSettings()) == ECHO_DEFAULT and echo_mode(LoadSettings(quiet=True)) == ECHO_QUIET
    assert echo_mode(LoadSettings(locust_stats=True)) == ECHO_ALL
    for args in (("--loglevel", "INFO"), ("--loglevel=DEBUG",), ("-L", "INFO"), ("-LINFO",)):
        assert echo_mode(LoadSettings(locust_args=args)) == ECHO_ALL, args
    shown = {mode: [line for line in (INFO, WARNING, ERROR, "sm-locust [    5s] users=2", TABLE_HEADER)
                    if shows(line, mode)] for mode in (ECHO_ALL, ECHO_DEFAULT, ECHO_QUIET)}
    assert shown[ECHO_ALL] == [INFO, WARNING, ERROR, "sm-locust [    5s] users=2", TABLE_HEADER]
    assert shown[ECHO_DEFAULT] == [WARNING, ERROR, "sm-locust [    5s] users=2"]
    assert shown[ECHO_QUIET] == [ERROR, "sm-locust [    5s] users=2"]
    assert plan_run(_args()).load.progress_every_s == plan_run(_args("-q")).load.progress_every_s == 5.0


@pytest.mark.e2e
def test_run_shows_progress_by_default_and_locusts_log_only_when_asked(endpoint_factory, tmp_path):
    ep = endpoint_factory()
    base = ("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD), "-u", "2")
    result = run_cli(*base, "-t", "7s", "--out", str(tmp_path / "plain"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.startswith("sm-locust [") and "users=2" in line for line in lines) >= 1, result.stdout
    assert not any("/INFO/" in line or line.startswith(TABLE_HEADER) for line in lines), result.stdout
    assert "/INFO/" in (tmp_path / "plain" / "locust.log").read_text()  # all of it kept
    asked = run_cli(*base, "-t", "2s", "--out", str(tmp_path / "asked"), "--", "--loglevel", "INFO")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert any("/INFO/" in line for line in asked.stdout.splitlines()), asked.stdout
