"""`sm-locust sweep SWEEP.yaml`: deploy each configuration, find its plateau, recommend one.

A thin adapter over `sm_locust.sweep.api`: check the file (one-line errors, exit 2, nothing
deployed), `--plan` prints what would be deployed and what it would cost, a SageMaker sweep asks
for `--yes` (or a confirmation on a terminal) before creating anything, `--cleanup SWEEP_ID`
deletes what a killed sweep left behind. Exit codes: 0 every configuration measured and one
recommended; 1 a configuration failed or none meets the objective; 2 bad input; 130 interrupted
(after cleanup; 143 for SIGTERM). docs/sweep.md documents the file and the outputs.
"""

from __future__ import annotations

import argparse
import signal
import sys

from sm_locust.cli.commands import add_command_parser
from sm_locust.errors import UsageError
from sm_locust.sanitize import clean
from sm_locust.sweep import api
from sm_locust.sweep.schema import load_spec


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = add_command_parser(
        subparsers, "sweep",
        description="Deploy each configuration of SWEEP (YAML or JSON: grid or list of serving settings; deploy: local "
        "or sagemaker), find its plateau with a normal run, and write sweep.json, sweep.csv and sweep.html with the "
        "recommendation. Everything deployed is deleted, also on failure and Ctrl-C. Exit 0: all measured and one "
        "recommended; 1: a configuration failed or none meets the objective; 2: bad input; 130: interrupted.",
    )
    p.add_argument("sweep_file", metavar="SWEEP", nargs="?", help="the sweep file (docs/sweep.md)")
    p.add_argument("--out", default=None,
                   help="sweep folder (default reports/sweeps/<sweep id>/); rerunning resumes in it")
    p.add_argument("--plan", action="store_true", help="list the configurations, what each would deploy, the estimated "
                   "time, instance-hours and $; deploy nothing")
    p.add_argument("--yes", action="store_true", help="create SageMaker endpoints without asking")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the file for this run, e.g. --set load.step_seconds=10 (repeatable)")
    p.add_argument("--cleanup", metavar="SWEEP_ID", default=None,
                   help="delete the endpoints, endpoint configs and models tagged sm-locust:sweep=SWEEP_ID; for an "
                   "autoscaling sweep also put back the scaling it changed (journals in --out, default "
                   "reports/sweeps/SWEEP_ID/)")
    p.add_argument("--region", default=None, help="with --cleanup and no SWEEP: the AWS region (default: AWS_REGION, "
                   "AWS_DEFAULT_REGION, the profile's region)")
    return p


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError(f"this sweep would {question[:-1]}: review it with --plan, then pass --yes")
    answer = input(f"sm-locust sweep: {question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    if args.cleanup:
        deploy: str | None = None  # without the file: the sweep folder says, else sagemaker (api.cleanup)
        region, profile = args.region, None
        kind: str | None = None  # without the file, the sweep folder says (api.folder_kind)
        if args.sweep_file:
            spec = load_spec(args.sweep_file, args.overrides)
            deploy, region, profile, kind = spec.deploy, region or spec.region, spec.aws_profile, spec.kind
        deleted, left = api.cleanup(args.cleanup, deploy=deploy, region=region, profile=profile, kind=kind,
                                    out=args.out)
        print(clean(f"sm-locust sweep: cleanup {args.cleanup}: deleted {len(deleted)}"  # AWS's and the file's words
                    + (f" ({', '.join(deleted)})" if deleted else "")
                    + (f"; NOT cleaned up: {'; '.join(left)}" if left else ""), None))
        return 1 if left else 0
    if not args.sweep_file:
        raise UsageError("give a sweep file (sm-locust sweep SWEEP.yaml), or --cleanup SWEEP_ID")
    sweep = api.load_sweep(args.sweep_file, out=args.out, overrides=args.overrides)
    if args.plan:
        print(clean("\n".join(api.plan_lines(sweep)), None, newlines=True))  # labels quote the file's values
        return 0
    result = api.run_sweep(sweep, yes=args.yes, confirm=_confirm if sys.stdin.isatty() else None)  # no tty: --yes
    if result.interrupted:
        name = signal.Signals(result.signum).name if result.signum else "a signal"
        print(f"sm-locust: interrupted by {name}; everything this sweep created was deleted unless listed above",
              file=sys.stderr)
    return result.exit_code
