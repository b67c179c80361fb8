"""`sm-locust run`: a headless load test against a SageMaker endpoint, into a run folder.

It declares the same options as the locustfile (sm_locust.config.options), checks them before anything
starts (one-line errors, nothing half-started), then runs Locust with the options that were given.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import SageMakerSettings, add_cli_options
from sm_locust.config.preflight import is_loopback, preflight
from sm_locust.core.launch import (
    LoadSettings,
    check_out_dir,
    choose_out_dir,
    every_request_failed,
    execute,
    nothing_completed,
    verdict_line,
)
from sm_locust.errors import Interrupted, RunError, SmLocustError, UsageError
from sm_locust.payloads.options import prepare_payloads
from sm_locust.report.s3 import S3Location, check_writable, s3_client, upload_folder
from sm_locust.scaling.watch import local_fleet, start_watch
from sm_locust.shapes import SHAPES
from sm_locust.shapes.settings import ShapeSettings, load_traffic, parse_seconds
from sm_locust.util.numbers import PROCESSES_PER_CORE, argument_type, max_processes


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("load")
    group.add_argument("-u", "--users", type=int, default=None, help="number of users (no shape: default 1)")
    group.add_argument("-r", "--spawn-rate", type=float, default=None,
                       help="users started per second (default 1; with a shape 100)")
    group.add_argument("-t", "--run-time", default=None,
                       help="stop after this long, e.g. 90s, 5m, 7d (no shape: default 1m)")
    group.add_argument("--shape", default=None,
                       help="load shape: step, plateau (adaptive search), phases (IR TrafficPattern), open (constant "
                       "arrival rate; implied by --target-rps) (default: constant users)")
    group.add_argument("--processes", type=argument_type(int, maximum=max_processes()), default=None,
                       help=f"Locust worker processes on this machine (-1 = one per core; at most "
                       f"{PROCESSES_PER_CORE} per core: {max_processes()} here)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", default=None, help="run folder (default reports/<run-id>/)")
    out.add_argument("--overwrite", action="store_true",
                     help="--out may name a folder that holds an earlier run: its files are removed first")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no periodic Locust tables; one progress line every 5 s")


def add_parser(subparsers) -> None:
    p = add_command_parser(
        subparsers, "run",
        description="Run Locust headless against a SageMaker endpoint (real, or local with --endpoint-url) and write "
        "reports/<run-id>/ with Locust's CSVs, options.json and summary.json. Arguments "
        "after -- go to Locust as they are.",
    )
    add_cli_options(p)
    add_load_arguments(p)
    p.add_argument("--upload", metavar="S3_URL", default=os.environ.get("SM_LOCUST_UPLOAD") or None,
                   help="upload the run folder to S3_URL/<run-id>/ when the run ends, also after a failure (write "
                   "access is checked before the test starts); read it back with `sm-locust report S3_URL/<run-id>` "
                   "[SM_LOCUST_UPLOAD]")
    p.add_argument("--watch-scaling", action="store_true",
                   help="record what the endpoint's own scaling policy does under this run's traffic (DescribeEndpoint "
                   "every 10 s; scale events, instance-hours, seconds over --latency-slo-ms) into summary.json "
                   "`autoscaling`; changes nothing (docs/autoscaling.md)")
    p.set_defaults(accepts_passthrough=True)


def settings_from_args(args: argparse.Namespace) -> SageMakerSettings:
    return SageMakerSettings.from_options(args)


def validate_shape(args: argparse.Namespace) -> str | None:
    """The canonical shape name (or None); checks every shape option against the shape, before anything starts."""
    shape = SHAPES.canonical(args.shape) if args.shape else None
    if shape is None and getattr(args, "target_rps", None) is not None:
        shape = "open"  # --target-rps alone means a constant open-loop rate
    if shape is None and getattr(args, "traffic", None):
        shape = "traffic"  # --traffic alone means its rate phases
    ShapeSettings.from_options(args).check(shape)
    return shape


def load_from_args(args: argparse.Namespace, progress_every_s: float | None = None):
    """Locust's load options (LoadSettings) from the run options; `progress_every_s` overrides the
    progress-line interval (default: every 5 s with --quiet, else none)."""
    shape = validate_shape(args)
    if args.users is not None and shape in ("plateau", "phases", "open", "traffic"):
        raise UsageError(f"--users conflicts with --shape {shape}: the shape decides the load")
    users = args.users if args.users is not None else (None if shape else 1)
    if users is not None and users < 1:
        raise UsageError(f"--users must be at least 1, got {users}")
    if args.spawn_rate is not None and not (math.isfinite(args.spawn_rate) and args.spawn_rate > 0):
        raise UsageError(f"--spawn-rate must be a number of users per second above 0, got {args.spawn_rate:g}")
    if args.processes is not None and (args.processes == 0 or args.processes < -1):
        raise UsageError(f"--processes must be a number of worker processes (N >= 1, or -1 for one per core), "
                         f"got {args.processes}")
    run_time = args.run_time if args.run_time is not None else (None if shape not in (None, "open") else "1m")
    if shape == "open" and args.run_time is None and getattr(args, "max_duration", None):
        run_time = None  # the shape stops at --max-duration
    if run_time is not None:
        seconds = parse_seconds(run_time, "--run-time")
        # Locust's -t has no days: a soak run's "7d" goes to it as seconds
        if seconds is not None and "d" in str(run_time):
            run_time = f"{round(seconds)}s"
    return LoadSettings(
        users=users,
        spawn_rate=args.spawn_rate if args.spawn_rate is not None else (100.0 if shape else 1.0),
        run_time=run_time,
        shape=shape, processes=args.processes, quiet=args.quiet,
        progress_every_s=progress_every_s if progress_every_s is not None else (5.0 if args.quiet else 0.0),
        locust_args=list(getattr(args, "passthrough", []) or []),
    )


def traffic_defaults(args: argparse.Namespace, endpoint_url: str) -> None:
    """--traffic: each open-loop token carries what divides every phase's rate (no ramp between
    phases) unless --rate-per-user says; against a local fleet emulation the durations are its
    emulated seconds, so --time-scale (when not given) is the fleet's own (GET /_sm_locust/scaling)."""
    if not getattr(args, "traffic", None):
        return
    if getattr(args, "rate_per_user", None) is None:
        args.rate_per_user = load_traffic(args.traffic).token_rate()
    if getattr(args, "time_scale", None) is not None or not endpoint_url:
        return

    info = local_fleet(endpoint_url) if is_loopback(endpoint_url) else None
    scale = float((info or {}).get("time_scale") or 1.0)
    if scale != 1.0:
        args.time_scale = scale
        print(f"sm-locust: --traffic durations are the local fleet's emulated seconds: time runs x{scale:g} "
              "(--time-scale)", flush=True)


def start_run(args: argparse.Namespace, *, echo=None, env: dict[str, str] | None = None,
              progress_every_s: float | None = None):
    """Check every option, then run Locust into the run folder; returns (out_dir, summary).

    Shared by `run`, `smoke` and the Python API (`sm_locust.run`): nothing starts (no folder, no
    traffic) until all input is valid. `echo` receives Locust's output lines (launch.execute), `env`
    is extra environment for the Locust process (never recorded in options.json), `progress_every_s`
    the progress-line interval (load_from_args).
    """
    upload = getattr(args, "upload", None)
    if upload is not None:
        upload = S3Location.parse(upload)  # a malformed URL is the first thing to fail
    settings = settings_from_args(args).validate()
    load = load_from_args(args, progress_every_s)
    traffic_defaults(args, settings.endpoint_url)
    if args.out:
        check_out_dir(Path(args.out), overwrite=args.overwrite)
    prepare_payloads(settings, args)  # every payload option checked and every body encoded, before anything starts
    extra_env = {**preflight(settings, env=env), **(env or {})}
    watch = None
    if getattr(args, "watch_scaling", False):  # reads the variant's scaling now: a wrong endpoint fails before the test
        watch = start_watch(settings)
    try:
        out = choose_out_dir(args.out, settings.endpoint_name)
        if upload is None:
            return out, _execute(settings, load, out, extra_env, args, watch, echo)

        s3 = s3_client(settings.aws_profile, settings.region)
        destination = upload.child(out.resolve().name)
        check_writable(destination, s3)  # a missing bucket or a role without s3:PutObject fails here, before the test
        print(f"sm-locust: the run folder goes to {destination}/ when the run ends (write access checked)", flush=True)
        try:
            summary = _execute(settings, load, out, extra_env, args, watch, echo)
        except BaseException:
            _upload_after_failure(out, destination, s3)
            raise
        _upload(out, destination, s3)
        return out, summary
    finally:
        if watch is not None:
            watch.stop()


def _execute(settings, load, out, extra_env, args, watch, echo=None):
    """Locust into `out`; with --watch-scaling, the autoscaling figures into summary.json after it,
    also when the run was interrupted (what was measured is kept)."""
    overwrite = bool(args.overwrite)  # the earlier run's files go, under the folder's lock, before any is written
    if watch is None:
        return execute(settings, load, out, extra_env, options=args, overwrite=overwrite, echo=echo)

    shape = ShapeSettings.from_options(args)
    slo = {"slo_ms": shape.latency_slo_ms, "percentile": shape.slo_percentile}
    try:
        summary = execute(settings, load, out, extra_env, options=args, overwrite=overwrite, echo=echo)
    except Interrupted:
        watch.finish(out, **slo)
        raise
    figures = watch.finish(out, **slo)
    if figures is not None:
        summary["autoscaling"] = figures
    return summary


def _upload(out, destination, s3) -> None:
    transfer = upload_folder(out, destination, s3)
    print(f"sm-locust: uploaded {transfer.describe()} to {destination}/; read it back with "
          f"`sm-locust report {destination}`", flush=True)


def _upload_after_failure(out, destination, s3) -> None:
    """The run failed (or was interrupted): upload what it wrote, without hiding the run's own error."""
    if not out.is_dir():
        return
    try:
        _upload(out, destination, s3)
    except SmLocustError as exc:
        print(f"sm-locust: the failed run's folder was not uploaded: {exc.message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the run completed (partial failures are measurements), 1 when every request failed
    or none completed."""
    out, summary = start_run(args)
    print(f"sm-locust: {verdict_line(summary)}")
    print(f"sm-locust: results in {out}/ (summary.json, locust_stats.csv, locust_stats_history.csv)")
    failed = nothing_completed(summary) or every_request_failed(summary, out)
    if failed:
        raise RunError(failed)
    return 0
