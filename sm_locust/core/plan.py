"""What a run is, parsed and checked once: `RunSettings`, built by `plan_run` from `RunArguments`
(core/arguments.py: the command line's values or the Python API's keywords, parsed by one set of
OptionSpecs).

options -> typed settings -> checks -> launch -> the result: this module is the first three. Every
sm-locust option is parsed by its `OptionSpec` into `Options` (config/options.py); the settings the
run needs are built from them once (the endpoint, the shape, Locust's load) and handed down frozen;
every rule that needs several options at once is checked here, before anything starts (no folder,
no traffic). `core.start.start_run` then runs it. Nothing here reads a command line's namespace: the
Locust child re-parses the forwarded options by the same specs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sm_locust.aws.s3 import S3Location
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.locust_parser import check_config_files
from sm_locust.config.options import Options
from sm_locust.core.arguments import RunArguments
from sm_locust.core.child import LoadSettings
from sm_locust.core.rules import SHAPE_SPAWN_RATE, check_async_shape, check_users, chosen_shape, default_run_time
from sm_locust.errors import UsageError
from sm_locust.payloads.llm import LlmSettings
from sm_locust.shapes.settings import ShapeSettings, parse_seconds
from sm_locust.transport.options import check_async_result
from sm_locust.util.numbers import check_number

DEFAULT_USERS = 1  # constant users when no shape decides
DEFAULT_SPAWN_RATE = 1.0  # Locust's own default, for constant users
PROGRESS_EVERY_S = 5.0  # a progress line while a step runs (always: a step may last minutes)
QUIET_PROGRESS_EVERY_S = PROGRESS_EVERY_S


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

    def with_options(self, **changes: object) -> RunSettings:
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
    users at up to 100/s. `progress_every_s` overrides the progress-line interval (default: every
    5 s). `locust_stats`: Locust's periodic tables (not with `quiet`, which hides Locust's output);
    `closing_verdict`: the caller prints the verdict, so the shape does not."""
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
    if processes is not None and shape == "trace":
        raise UsageError("--trace replays from one Locust process (its sends keep the trace's times); drop "
                         "--processes")
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
        progress_every_s=progress_every_s if progress_every_s is not None else PROGRESS_EVERY_S,
        locust_args=tuple(locust_args), locust_stats=locust_stats, closing_verdict=closing_verdict,
    )


def plan_run(arguments: RunArguments, *, progress_every_s: float | None = None,
             closing_verdict: bool = False) -> RunSettings:
    """What a run was asked (`RunArguments`: the command line's, or the Python API's keywords, parsed by
    the same specs) checked together into `RunSettings`; UsageError (one line) when anything is wrong.
    Checks only: nothing is read from the network or written (the payloads and the preflight come
    in `start_run`). `closing_verdict`: the caller states the verdict in its closing lines (`sm-locust
    run`), so the shape does not print it too."""
    run = arguments.run
    upload = S3Location.parse(run.upload) if run.upload else None  # a malformed URL is the first thing to fail
    check_config_files()  # the locust.conf Locust will read here: UTF-8 text (a binary one was a traceback)
    options = arguments.options
    endpoint = SageMakerSettings.from_options(options).validate()
    check_async_result(options)  # --async-result s3 needs the input object
    shape = chosen_shape(run.shape, target_rps=options.target_rps, traffic=options.traffic, trace=options.trace)
    check_async_shape(shape, options.async_result)
    shape_settings = ShapeSettings.from_options(options, run.spawn_rate).check(shape)
    LlmSettings.from_options(options).check_load(shape)  # --turns
    load = locust_load(options, users=run.users, spawn_rate=run.spawn_rate, run_time=run.run_time, shape=shape,
                       processes=run.processes, quiet=run.quiet, progress_every_s=progress_every_s,
                       locust_args=list(arguments.passthrough), locust_stats=run.locust_stats,
                       closing_verdict=closing_verdict)
    if run.repeat is not None:
        check_number(run.repeat, "--repeat", int, minimum=1)
    return RunSettings(options=options, endpoint=endpoint, shape=shape, shape_settings=shape_settings, load=load,
                       out=run.out, overwrite=run.overwrite, upload=upload, watch_scaling=run.watch_scaling,
                       repeat=int(run.repeat or 1))
