"""`sm-locust run`: a headless load test against a SageMaker endpoint, into a run folder."""

from __future__ import annotations

import argparse
import os

from sm_locust.options import _OPTIONS, SageMakerSettings


def add_sagemaker_arguments(parser: argparse.ArgumentParser) -> None:
    """The locustfile's options, for argparse (defaults from the same SM_LOCUST_* env vars)."""
    group = parser.add_argument_group("endpoint and payload")
    for flag, env_var, default, help_text, extra in _OPTIONS:
        if flag in ("--sm-out", "--sm-progress"):
            continue
        kwargs = {k: v for k, v in extra.items() if k not in ("include_in_web_ui",)}
        env_value = os.environ.get(env_var)
        if env_value is not None:
            default = kwargs.get("type", str)(env_value)
        group.add_argument(flag, default=default, help=f"{help_text} [env {env_var}]", **kwargs)


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("load")
    group.add_argument("-u", "--users", type=int, default=None, help="peak number of users (no shape: default 1)")
    group.add_argument("-r", "--spawn-rate", type=float, default=None, help="users started per second (default 1; shapes: 100)")
    group.add_argument("-t", "--run-time", default=None, help="stop after this long, e.g. 90s, 5m (no shape: default 1m)")
    group.add_argument("--shape", default=None, help="load shape: step (see docs); default: constant users")
    group.add_argument("--start-users", type=int, default=None, help="step shape: users in the first step (default 1)")
    group.add_argument("--step-users", type=int, default=None, help="step shape: users added per step (default 1)")
    group.add_argument("--step-seconds", type=float, default=None, help="step shape: seconds per step (default 30)")
    group.add_argument("--max-users", type=int, default=None, help="step shape: users in the last step (default 10)")
    group.add_argument("--processes", type=int, default=None, help="Locust worker processes on this machine (-1 = one per core)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", default=None, help="run folder (default reports/<run-id>/)")
    out.add_argument("-q", "--quiet", action="store_true", help="no periodic Locust tables; progress lines only")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run a headless load test and write a run folder",
        description="Run Locust headless against a SageMaker endpoint (real, or local with --endpoint-url) and write "
        "reports/<run-id>/ with Locust's CSVs, options.json and summary.json. Arguments after -- go to Locust as they are.",
    )
    add_sagemaker_arguments(p)
    add_load_arguments(p)
    p.set_defaults(accepts_passthrough=True)


def settings_from_args(args: argparse.Namespace) -> SageMakerSettings:
    return SageMakerSettings(**{k: getattr(args, k) for k in vars(SageMakerSettings()) if hasattr(args, k)})


def load_from_args(args: argparse.Namespace):
    from sm_locust.runner import LoadSettings
    from sm_locust.shapes import SHAPES

    shape = SHAPES.canonical(args.shape) if args.shape else None
    shape_options = {}
    if shape == "step":
        from sm_locust.shapes.step import StepSchedule

        schedule = StepSchedule(
            start_users=args.start_users or 1, step_users=args.step_users or 1,
            step_seconds=args.step_seconds or 30.0, max_users=args.max_users or 10,
            spawn_rate=args.spawn_rate or 100.0,
        ).validate()
        shape_options = {"start_users": schedule.start_users, "step_users": schedule.step_users,
                         "step_seconds": schedule.step_seconds, "max_users": schedule.max_users}
    users = args.users if args.users is not None else (None if shape else 1)
    spawn_rate = args.spawn_rate if args.spawn_rate is not None else (100.0 if shape else 1.0)
    run_time = args.run_time if args.run_time is not None else (None if shape else "1m")
    if users is not None and users < 1:
        from sm_locust.errors import UsageError

        raise UsageError(f"--users must be at least 1, got {users}")
    return LoadSettings(users=users, spawn_rate=spawn_rate, run_time=run_time, shape=shape, shape_options=shape_options,
                        processes=args.processes, quiet=args.quiet, progress_every_s=5.0 if args.quiet else 0.0,
                        locust_args=list(getattr(args, "passthrough", []) or []))


def run(args: argparse.Namespace) -> int:
    from sm_locust.payloads import load_payloads
    from sm_locust.preflight import preflight
    from sm_locust.runner import choose_out_dir, execute, verdict_line

    settings = settings_from_args(args)
    load = load_from_args(args)
    settings.validate()
    load_payloads(settings.payload, content_type=settings.content_type or None, **settings.headers())
    extra_env = preflight(settings)
    out = choose_out_dir(args.out, settings.endpoint_name)
    summary = execute(settings, load, out, extra_env)
    print(f"sm-locust: {verdict_line(summary)}")
    print(f"sm-locust: results in {out}/ (summary.json, locust_stats.csv, locust_stats_history.csv)")
    return 0
