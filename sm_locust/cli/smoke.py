"""`sm-locust smoke`: a short load test followed by pass/fail gates, for CI.

Two ways in, one set of gates (sm_locust.gates):

- `sm-locust smoke --endpoint-name NAME --payload FILE [run options] [gates]` runs a short headless
  test exactly as `sm-locust run` does (default 2 users for 15 s) into a run folder, then gates it;
- `sm-locust smoke --run-dir DIR [gates]` gates a run folder that already exists (e.g. from a
  longer `sm-locust run`), without sending anything.

Each threshold gate passes, fails, or is INCONCLUSIVE when the figure's 95 % interval straddles its
limit (sm_locust.gates.decide); an inconclusive gate counts as a failure unless `--inconclusive pass`.

Exit codes: 0 every gate passed, 1 a gate failed or was inconclusive (or the run did not complete), 2 bad input
(unmeetable or contradictory limits, a baseline that is not a run, workers that never connected).
Every gate and every bad input is checked before any traffic is sent. Failures always count:
without a whole-run `--max-error-rate` or a `--baseline`, the default gate allows none
(`sm_locust.gates.spec.with_default_error_gate`), printed as a gate line.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import add_cli_options
from sm_locust.core.arguments import RunArguments, add_load_arguments
from sm_locust.core.plan import plan_run
from sm_locust.core.start import start_run
from sm_locust.core.verdict import nothing_completed, verdict_lines
from sm_locust.errors import RunError, UsageError
from sm_locust.gates.cli import GateSettings, add_gate_arguments, gates_from_settings, report
from sm_locust.gates.spec import with_default_error_gate
from sm_locust.record.model import Summary
from sm_locust.record.runfolder import load_run
from sm_locust.util.outputs import check_output_file, refuse_in_progress

# Gate options that are also `run` options, declared once there: `--max-error-rate` (the shapes' stop
# condition) is the whole-run error-rate gate.
SHARED_WITH_RUN = ("--max-error-rate",)
SMOKE_USERS = 2
SMOKE_RUN_TIME = "15s"  # long enough for a 95 % interval that can decide a gate (docs/gates.md)


def add_parser(subparsers) -> None:
    p = add_command_parser(
        subparsers, "smoke",
        description="Run a short headless load test (default 2 users, 15 s) and check it against gates: "
        "--max-p95-ms, --max-p99-ms, --max-error-rate, --min-rps (optionally per request name), --baseline. "
        "With --run-dir, check an existing run folder instead. Exit 0 pass, 1 a gate failed, 2 bad input. "
        "Arguments after -- go to Locust as they are.",
    )
    p.add_argument("--run-dir", default=None, metavar="DIR",
                   help="gate this existing run folder instead of running a test")
    add_cli_options(p)
    add_load_arguments(p)
    add_gate_arguments(p, shared=SHARED_WITH_RUN)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show Locust's output and its periodic tables (--locust-stats: the tables alone)")
    p.set_defaults(accepts_passthrough=True, quiet=True)


def run(args: argparse.Namespace) -> int:
    settings = GateSettings.parse(vars(args))
    gates = with_default_error_gate(gates_from_settings(settings),  # every usage error before anything runs
                                    error_rate_given=settings.whole_run_error_rate, baseline=bool(settings.baseline))
    if settings.junit:  # written at the end: a path that cannot be written fails now, not after the test
        check_output_file(Path(settings.junit), "--junit")
    if args.run_dir:
        if args.endpoint_name or getattr(args, "passthrough", None):
            raise UsageError("--run-dir checks an existing run folder; drop --endpoint-name and Locust arguments, or "
                             "drop --run-dir")
        refuse_in_progress(Path(args.run_dir), "--run-dir")
        run_data = load_run(args.run_dir)
        summary_duration = 0.0
        out = args.run_dir
    else:
        out, summary_duration = _short_run(args)
        run_data = load_run(out)
    _, code = report(gates, run_data, junit=settings.junit, prefix="sm-locust smoke", duration_s=summary_duration,
                     properties={"run_dir": str(out)}, inconclusive=settings.inconclusive,
                     verdict_said=not args.run_dir)
    return code


def _short_run(args: argparse.Namespace):
    arguments = RunArguments.parse(vars(args), args.passthrough)
    run = arguments.run
    changes: dict = {}
    if run.users is None and not run.shape:
        changes["users"] = SMOKE_USERS
    if run.run_time is None and not run.shape:
        changes["run_time"] = SMOKE_RUN_TIME
    if args.verbose or run.locust_stats:  # smoke is quiet unless asked: Locust's output, with its tables
        changes.update(quiet=False, locust_stats=True)
    arguments = dataclasses.replace(arguments, run=run.replace(**changes))
    out, summary = start_run(plan_run(arguments))
    for line in verdict_lines(summary):
        print(f"sm-locust smoke: {line}")
    print(f"sm-locust smoke: results in {out}/")
    failed = nothing_completed(summary)
    if failed:  # no gate can judge a run in which nothing completed
        raise RunError(failed)
    return out, float(Summary.of(summary).duration_s or 0.0)
