"""What a run is, parsed and checked once: `RunSettings`, built from the command line's (or the
Python API's, which parses the same way) namespace by `plan_run`.

options -> typed settings -> checks -> launch -> the result: this module is the first three. Every
sm-locust option is parsed by its `OptionSpec` into `Options` (config/options.py); the settings the
run needs are built from them once (the endpoint, the shape, Locust's load) and handed down frozen;
every rule that needs several options at once is checked here, before anything starts (no folder,
no traffic). `core.start.start_run` then runs it. Nothing below the core reads the command line's
namespace: the Locust child re-parses the forwarded options by the same specs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sm_locust.aws.s3 import S3Location
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.locust_parser import check_config_files
from sm_locust.config.options import Options, option_value, parse_options
from sm_locust.core.launch import LoadSettings
from sm_locust.core.rules import SHAPE_SPAWN_RATE, check_users, chosen_shape, default_run_time
from sm_locust.errors import UsageError
from sm_locust.shapes.settings import ShapeSettings, parse_seconds
from sm_locust.transport.options import check_async_result
from sm_locust.util.numbers import check_number

DEFAULT_USERS = 1  # constant users when no shape decides
DEFAULT_SPAWN_RATE = 1.0  # Locust's own default, for constant users
QUIET_PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class RunSettings:
    """One run, typed and checked: its options (every sm-locust option, parsed), the endpoint, the
    shape (None: constant users) and its settings, Locust's load, and where the results go."""

    options: Options
    endpoint: SageMakerSettings
    shape: str | None
    shape_settings: ShapeSettings
    load: LoadSettings
    out: str | None = None
    overwrite: bool = False
    upload: S3Location | None = None
    watch_scaling: bool = False
    repeat: int = 1  # runs of the same test (core/repeat.py); each its own run folder under `out`

    def with_options(self, **changes: Any) -> RunSettings:
        """The same run with some options changed (parsed by their specs), e.g. a default the run
        learns before it starts (a local fleet's time scale)."""
        options = self.options.replace(**changes)
        return dataclasses.replace(self, options=options, endpoint=SageMakerSettings.from_options(options),
                                   shape_settings=ShapeSettings.from_options(options, self.shape_settings.spawn_rate))


def locust_load(options: Options, *, users: int | None, spawn_rate: float | None, run_time: str | None,
                  shape: str | None, processes: int | None, quiet: bool = False, progress_every_s: float | None = None,
                  locust_args: list[str] | tuple[str, ...] = (), locust_stats: bool = False,
                  closing_verdict: bool = False) -> LoadSettings:
    """Locust's load options from what was given (None = not given), by the run's rules: a shape that
    decides the load takes no user count; constant users default to 1 for a minute; shapes start
    users at up to 100/s. `progress_every_s` overrides the progress-line interval (default: every 5 s
    with `quiet`, else none). `locust_stats`: Locust's periodic tables (not with `quiet`, which hides
    Locust's output); `closing_verdict`: the caller prints the verdict, so the shape does not."""
    check_users(users, shape)
    if quiet and locust_stats:
        raise UsageError("--locust-stats shows Locust's periodic tables and -q/--quiet hides Locust's output: "
                         "pass one of them")
    if users is not None:
        check_number(users, "--users", int, minimum=1)
    if spawn_rate is not None:
        check_number(spawn_rate, "--spawn-rate", float, above=0)
    if processes is not None and (processes == 0 or processes < -1):
        raise UsageError(f"--processes must be a number of worker processes (N >= 1, or -1 for one per core), "
                         f"got {processes}")
    if run_time is None:
        run_time = default_run_time(shape, options.max_duration)
    else:
        seconds = parse_seconds(run_time, "--run-time")
        if seconds is not None and "d" in str(run_time):  # Locust's -t has no days: "7d" goes to it as seconds
            run_time = f"{round(seconds)}s"
    return LoadSettings(
        users=users if users is not None else (None if shape else DEFAULT_USERS),
        spawn_rate=spawn_rate if spawn_rate is not None else (SHAPE_SPAWN_RATE if shape else DEFAULT_SPAWN_RATE),
        run_time=run_time, shape=shape, processes=processes, quiet=quiet,
        progress_every_s=progress_every_s if progress_every_s is not None else (
            QUIET_PROGRESS_EVERY_S if quiet else 0.0),
        locust_args=tuple(locust_args), locust_stats=locust_stats, closing_verdict=closing_verdict,
    )


def plan_run(args: Any, *, progress_every_s: float | None = None, closing_verdict: bool = False) -> RunSettings:
    """Every option of `sm-locust run` (an argparse namespace: the CLI's, or the Python API's parsed
    by the same parser) parsed and checked together; UsageError (one line) when anything is wrong.
    Checks only: nothing is read from the network or written (the payloads and the preflight come
    in `start_run`). `closing_verdict`: the caller states the verdict in its closing lines (`sm-locust
    run`), so the shape does not print it too."""
    upload_url = option_value(args, "upload")
    upload = S3Location.parse(upload_url) if upload_url else None  # a malformed URL is the first thing to fail
    check_config_files()  # the locust.conf Locust will read here: UTF-8 text (a binary one was a traceback)
    options = parse_options(args)
    endpoint = SageMakerSettings.from_options(options).validate()
    check_async_result(options)  # --async-result s3 needs the input object
    spawn_rate = option_value(args, "spawn_rate")
    shape = chosen_shape(option_value(args, "shape"), target_rps=options.target_rps, traffic=options.traffic)
    shape_settings = ShapeSettings.from_options(options, spawn_rate).check(shape)
    load = locust_load(options, users=option_value(args, "users"), spawn_rate=spawn_rate,
                         run_time=option_value(args, "run_time"), shape=shape,
                         processes=option_value(args, "processes"), quiet=bool(option_value(args, "quiet")),
                         progress_every_s=progress_every_s,
                         locust_args=list(option_value(args, "passthrough") or []),
                         locust_stats=bool(option_value(args, "locust_stats")), closing_verdict=closing_verdict)
    repeat = option_value(args, "repeat")
    if repeat is not None:
        check_number(repeat, "--repeat", int, minimum=1)
    return RunSettings(options=options, endpoint=endpoint, shape=shape, shape_settings=shape_settings, load=load,
                       out=option_value(args, "out"), overwrite=bool(option_value(args, "overwrite")),
                       upload=upload, watch_scaling=bool(option_value(args, "watch_scaling")),
                       repeat=int(repeat or 1))
