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
from dataclasses import dataclass
from typing import Any

from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import OptionSpec, add_spec_arguments, parse_specs
from sm_locust.errors import UsageError
from sm_locust.sanitize import clean
from sm_locust.sweep import api
from sm_locust.sweep.schema import load_spec


def _spec(flag: str, help: str, type: Any = None, **rest: Any) -> OptionSpec:
    """A sweep option: no variable (a shell set up once must not create or delete endpoints by itself)."""
    return OptionSpec(flag, "", False if type is bool else None, help, type=type, web_ui=False, forward=False,
                      const=True if type is bool else None, **rest)


OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--out", "sweep folder (default reports/sweeps/<sweep id>/); rerunning resumes in it"),
    _spec("--plan", "list the configurations, what each would deploy, the estimated time, instance-hours and $; "
          "deploy nothing", bool),
    _spec("--yes", "create SageMaker endpoints without asking", bool),
    _spec("--set", "override a key of the file for this run, e.g. --set load.step_seconds=10 (repeatable)",
          name="overrides", multiple=True, metavar="KEY=VALUE"),
    _spec("--cleanup", "delete the endpoints, endpoint configs and models tagged sm-locust:sweep=SWEEP_ID; for an "
          "autoscaling sweep also put back the scaling it changed (journals in --out, default "
          "reports/sweeps/SWEEP_ID/)", metavar="SWEEP_ID"),
    _spec("--region", "with --cleanup and no SWEEP: the AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the "
          "profile's region)"),
)


@dataclass(frozen=True)
class SweepSettings:
    """What `sm-locust sweep` was asked, parsed once by its specs."""

    sweep_file: str | None
    out: str | None
    plan: bool
    yes: bool
    overrides: tuple[str, ...]
    cleanup: str | None
    region: str | None

    @classmethod
    def parse(cls, args: argparse.Namespace) -> SweepSettings:
        options = parse_specs(OPTIONS, vars(args))
        return cls(sweep_file=args.sweep_file, out=options.out, plan=options.plan, yes=options.yes,
                   overrides=tuple(options.overrides or ()), cleanup=options.cleanup, region=options.region)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = add_command_parser(
        subparsers, "sweep",
        description="Deploy each configuration of SWEEP (YAML or JSON: grid or list of serving settings; deploy: local "
        "or sagemaker), find its plateau with a normal run, and write sweep.json, sweep.csv and sweep.html with the "
        "recommendation. Everything deployed is deleted, also on failure and Ctrl-C. Exit 0: all measured and one "
        "recommended; 1: a configuration failed or none meets the objective; 2: bad input; 130: interrupted.",
    )
    p.add_argument("sweep_file", metavar="SWEEP", nargs="?", help="the sweep file (docs/sweep.md)")
    add_spec_arguments(p, OPTIONS)
    return p


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError(f"this sweep would {question[:-1]}: review it with --plan, then pass --yes")
    answer = input(f"sm-locust sweep: {question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def run(namespace: argparse.Namespace) -> int:
    args = SweepSettings.parse(namespace)
    if args.cleanup:
        deploy: str | None = None  # without the file: the sweep folder says, else sagemaker (api.cleanup)
        region, profile = args.region, None
        kind: str | None = None  # without the file, the sweep folder says (api.folder_kind)
        if args.sweep_file:
            spec = load_spec(args.sweep_file, list(args.overrides))
            deploy, region, profile, kind = spec.deploy, region or spec.region, spec.aws_profile, spec.kind
        deleted, left = api.cleanup(args.cleanup, deploy=deploy, region=region, profile=profile, kind=kind,
                                    out=args.out)
        print(clean(f"sm-locust sweep: cleanup {args.cleanup}: deleted {len(deleted)}"  # AWS's and the file's words
                    + (f" ({', '.join(deleted)})" if deleted else "")
                    + (f"; NOT cleaned up: {'; '.join(left)}" if left else ""), None))
        return 1 if left else 0
    if not args.sweep_file:
        raise UsageError("give a sweep file (sm-locust sweep SWEEP.yaml), or --cleanup SWEEP_ID")
    sweep = api.load_sweep(args.sweep_file, out=args.out, overrides=list(args.overrides))
    if args.plan:
        print(clean("\n".join(api.plan_lines(sweep)), None, newlines=True))  # labels quote the file's values
        return 0
    result = api.run_sweep(sweep, yes=args.yes, confirm=_confirm if sys.stdin.isatty() else None)  # no tty: --yes
    if result.interrupted:
        name = signal.Signals(result.signum).name if result.signum else "a signal"
        print(f"sm-locust: interrupted by {name}; everything this sweep created was deleted unless listed above",
              file=sys.stderr)
    return result.exit_code
