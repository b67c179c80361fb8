"""`sm-locust run`: a headless load test against a SageMaker endpoint, into a run folder.

It declares the same options as the locustfile (sm_locust.config.options); the run core plans and
checks them (`core.plan.plan_run`: one-line errors, nothing half-started) and runs Locust with the
options that were given (`core.start.start_run`). This module is the command line only.
"""

from __future__ import annotations

import argparse

from sm_locust.cli.commands import add_command_parser
from sm_locust.core.answers import answer_lines
from sm_locust.core.arguments import RunArguments, add_run_arguments
from sm_locust.core.checks import checks_lines, run_checks
from sm_locust.core.plan import plan_run
from sm_locust.core.repeat import start_repeated
from sm_locust.core.start import start_run
from sm_locust.core.verdict import every_request_failed, nothing_completed, verdict_lines
from sm_locust.errors import RunError
from sm_locust.record.repeat import REPEAT_JSON, repeat_lines


def add_parser(subparsers) -> None:
    p = add_command_parser(
        subparsers, "run",
        description="Run Locust headless against a SageMaker endpoint (real, or local with --endpoint-url) and write "
        "reports/<run-id>/ with Locust's CSVs, options.json and summary.json. Arguments "
        "after -- go to Locust as they are.",
    )
    add_run_arguments(p)
    p.set_defaults(accepts_passthrough=True)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the run completed (partial failures are measurements, and a failed check is reported,
    not an exit code: `sm-locust smoke` gates), 1 when every request failed or none completed (in any
    run, with --repeat). The closing lines: the totals, the verdict, a model mix's cache and an LLM
    run's tokens, the checks of the SLOs and stop conditions given."""
    arguments = RunArguments.parse(vars(args), args.passthrough)  # the namespace, read once, here
    planned = plan_run(arguments, closing_verdict=True)  # the verdict once, here, not also from the shape
    if planned.repeat > 1:
        return _repeated(planned)
    out, summary = start_run(planned)
    closing = [*verdict_lines(summary), *answer_lines(summary),
               *checks_lines(run_checks(summary, planned.options))]
    for line in closing:
        print(f"sm-locust: {line}")
    print(f"sm-locust: results in {out}/ (summary.json, locust_stats.csv, locust_stats_history.csv)")
    failed = nothing_completed(summary) or every_request_failed(summary, out)
    if failed:
        raise RunError(failed)
    return 0


def _repeated(planned) -> int:
    """--repeat N: N runs, then each figure's run-to-run spread beside the within-run interval."""
    parent, document, summaries = start_repeated(planned)
    for line in repeat_lines(document):
        print(f"sm-locust: {line}")
    print(f"sm-locust: results in {parent}/ ({REPEAT_JSON}; run-1/ .. run-{planned.repeat}/, each a run folder)")
    for k, summary in enumerate(summaries, 1):
        failed = nothing_completed(summary) or every_request_failed(summary, parent / f"run-{k}")
        if failed:
            raise RunError(f"run-{k}: {failed}")
    return 0
