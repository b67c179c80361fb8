"""`start_run`: a planned run (`core.plan.RunSettings`) from its last checks to its result.

Shared by `sm-locust run`, `smoke` and the Python API (`sm_locust.run`): nothing starts (no folder,
no traffic) until all input is valid: the output folder, every payload encoded, the region and the
endpoint reachable (`config.preflight`), the scaling to watch read, the upload destination
writable. Then Locust runs in a child (`core.child.execute`), and with `--upload` the run folder
goes to S3 when it ends, also after a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from sm_locust.aws.clients import is_loopback
from sm_locust.aws.s3 import check_writable, s3_client, upload_folder
from sm_locust.config.preflight import preflight
from sm_locust.core.child import execute
from sm_locust.core.folder import check_out_dir
from sm_locust.core.plan import RunSettings
from sm_locust.errors import Interrupted, SmLocustError
from sm_locust.payloads.options import prepare_payloads
from sm_locust.record.folders import choose_out_dir
from sm_locust.record.model import Summary
from sm_locust.scaling.watch import FleetLog, ScalingWatch, local_fleet, start_watch
from sm_locust.shapes.settings import load_traffic


def with_traffic_defaults(run: RunSettings) -> RunSettings:
    """--traffic: each open-loop token carries what divides every phase's rate (no ramp between
    phases) unless --rate-per-user says; against a local fleet emulation the durations are its
    emulated seconds, so --time-scale (when not given) is the fleet's own (GET /_sm_locust/scaling)."""
    options = run.options
    if not options.traffic:
        return run
    if options.rate_per_user is None:
        run = run.with_options(rate_per_user=load_traffic(options.traffic).token_rate())
    url = run.endpoint.endpoint_url
    if options.time_scale is not None or not url:
        return run
    info = local_fleet(url) if is_loopback(url) else None
    scale = float((FleetLog.of(info).time_scale if info is not None else None) or 1.0)
    if scale == 1.0:
        return run
    print(f"sm-locust: --traffic durations are the local fleet's emulated seconds: time runs x{scale:g} "
          "(--time-scale)", flush=True)
    return run.with_options(time_scale=scale)


def start_run(run: RunSettings, *, echo: Callable[[str], None] | None = None,
              env: dict[str, str] | None = None) -> tuple[Path, Summary]:
    """Make the last checks, then run Locust into the run folder; returns (out_dir, summary.json typed).

    `echo` receives Locust's output lines (child.execute), `env` is extra environment for the Locust
    process (never recorded in options.json)."""
    run = with_traffic_defaults(run)
    if run.out:
        check_out_dir(Path(run.out), overwrite=run.overwrite)
    prepare_payloads(run.endpoint, run.options)  # every payload option checked and every body encoded, now
    extra_env = {**preflight(run.endpoint, env=env), **(env or {})}
    watch = start_watch(run.endpoint) if run.watch_scaling else None  # a wrong endpoint fails before the test
    try:
        out = choose_out_dir(run.out, run.endpoint.endpoint_name)
        if run.upload is None:
            return out, _execute(run, out, extra_env, watch, echo)
        s3 = s3_client(run.endpoint.aws_profile, run.endpoint.region)
        destination = run.upload.child(out.resolve().name)
        check_writable(destination, s3)  # a missing bucket or a role without s3:PutObject fails here, before the test
        print(f"sm-locust: the run folder goes to {destination}/ when the run ends (write access checked)", flush=True)
        try:
            summary = _execute(run, out, extra_env, watch, echo)
        except BaseException:
            _upload_after_failure(out, destination, s3)
            raise
        _upload(out, destination, s3)
        return out, summary
    finally:
        if watch is not None:
            watch.stop()


def _execute(run: RunSettings, out: Path, extra_env: dict[str, str], watch: ScalingWatch | None,
             echo: Callable[[str], None] | None) -> Summary:
    """Locust into `out`; with --watch-scaling, the autoscaling figures into summary.json after it,
    also when the run was interrupted (what was measured is kept)."""
    def locust() -> Summary:
        # the earlier run's files go, under the folder's lock, before any is written
        return execute(run.endpoint, run.load, out, extra_env, options=run.options, overwrite=run.overwrite,
                       echo=echo)

    if watch is None:
        return locust()
    slo_ms, percentile = run.shape_settings.latency_slo_ms, run.shape_settings.slo_percentile
    try:
        summary = locust()
    except Interrupted:
        watch.finish(out, slo_ms=slo_ms, percentile=percentile)
        raise
    figures = watch.finish(out, slo_ms=slo_ms, percentile=percentile)
    return summary if figures is None else summary.adding(autoscaling=figures)


def _upload(out: Path, destination, s3) -> None:
    transfer = upload_folder(out, destination, s3)
    print(f"sm-locust: uploaded {transfer.describe()} to {destination}/; read it back with "
          f"`sm-locust report {destination}`", flush=True)


def _upload_after_failure(out: Path, destination, s3) -> None:
    """The run failed (or was interrupted): upload what it wrote, without hiding the run's own error."""
    if not out.is_dir():
        return
    try:
        _upload(out, destination, s3)
    except SmLocustError as exc:
        print(f"sm-locust: the failed run's folder was not uploaded: {exc.message}", file=sys.stderr, flush=True)
