"""The arguments of a run, declared once as OptionSpecs: every sm-locust option (config/options.py's
providers), Locust's load (`-u`, `-r`, `-t`, `--shape`, `--processes`), the output and the run's
extras (`--upload`, `--repeat`, `--watch-scaling`); and `RunArguments`, what a run was asked, parsed
once from whichever source.

`sm-locust run` and `smoke` declare them on their sub-parsers (cli/), and the Python API builds
`RunArguments` from its keywords with the same specs (`OptionSpec.parse`, the one conversion), so a
keyword means exactly its flag: one declaration, below every entry point (nothing imports `cli/`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sm_locust.config.options import (
    ArgumentContainer,
    Options,
    OptionSpec,
    add_cli_options,
    add_spec_arguments,
    all_option_specs,
    environment_values,
    parse_options,
    parse_specs,
)
from sm_locust.util.numbers import MAX_USERS, PROCESSES_PER_CORE, max_processes


def _spec(flag: str, help: str, type: Any = None, default: Any = None, **rest: Any) -> OptionSpec:
    return OptionSpec(flag, rest.pop("env_var", ""), default, help, type=type, web_ui=False, forward=False, **rest)


def _switch(flag: str, help: str, **rest: object) -> OptionSpec:
    return _spec(flag, help, bool, False, const=True, **rest)


LOAD_OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--users", f"number of users (no shape: default 1; at most {MAX_USERS:,})", int, maximum=MAX_USERS,
          short="-u"),
    _spec("--spawn-rate", "users started per second (default 1; with a shape 100)", float, short="-r"),
    _spec("--run-time", "stop after this long, e.g. 90s, 5m, 7d (no shape: default 1m)", short="-t"),
    _spec("--shape", "load shape: step, plateau (adaptive search), phases (IR TrafficPattern), open (constant "
          "arrival rate; implied by --target-rps) (default: constant users)"),
    _spec("--processes", f"Locust worker processes on this machine (-1 = one per core; at most {PROCESSES_PER_CORE} "
          f"per core: {max_processes()} here)", int, maximum=max_processes()),
)
OUTPUT_OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--out", "run folder (default reports/<run-id>/)"),
    _switch("--overwrite", "--out may name a folder that holds an earlier run: its files are removed first"),
    _switch("--quiet", "only sm-locust's own lines (steps, progress every 5 s, verdict, checks) and errors; "
            "without it Locust's warnings show too (its INFO lines with `-- --loglevel INFO`, its tables with "
            "--locust-stats); all of Locust's output is in locust.log", short="-q"),
    _switch("--locust-stats", "show Locust's periodic stats tables (every 2 s; off by default: the step lines and "
            "the closing lines carry the figures, and every table is in locust_stats_history.csv)"),
)
EXTRA_OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--upload", "upload the run folder to S3_URL/<run-id>/ when the run ends, also after a failure (write "
          "access is checked before the test starts); read it back with `sm-locust report S3_URL/<run-id>`",
          metavar="S3_URL", env_var="SM_LOCUST_UPLOAD"),
    _spec("--repeat", "run the same test N times (run-1/ .. run-N/ in the run folder) and report each headline "
          "figure's run-to-run spread beside the within-run interval (repeat.json; docs/summary.md)", int,
          metavar="N"),
    _switch("--watch-scaling", "record what the endpoint's own scaling policy does under this run's traffic "
            "(DescribeEndpoint every 10 s; scale events, instance-hours, seconds over --latency-slo-ms) into "
            "summary.json `autoscaling`; changes nothing (docs/autoscaling.md)"),
)
RUN_OPTIONS = LOAD_OPTIONS + OUTPUT_OPTIONS + EXTRA_OPTIONS


def add_load_arguments(parser: ArgumentContainer) -> None:
    add_spec_arguments(parser.add_argument_group("load"), LOAD_OPTIONS)
    add_spec_arguments(parser.add_argument_group("output"), OUTPUT_OPTIONS)


def add_run_arguments(parser: ArgumentContainer) -> None:
    """Everything `sm-locust run` takes (the Python API's keywords are these, with underscores)."""
    add_cli_options(parser)
    add_load_arguments(parser)
    add_spec_arguments(parser, EXTRA_OPTIONS)


def run_option_names() -> list[str]:
    """The dests of every option a run takes: the Python API's keywords."""
    return [spec.dest for spec in (*all_option_specs(), *RUN_OPTIONS)]


@dataclass(frozen=True)
class RunArguments:
    """What a run was asked, parsed once: every sm-locust option (`options`, typed, in range, defaults
    filled), the run's own (`run`: load, output, extras) and the arguments for Locust itself."""

    options: Options
    run: Options
    passthrough: tuple[str, ...] = ()

    @classmethod
    def parse(cls, source: Mapping[str, Any], passthrough: Any = (), *, environment: bool = False) -> RunArguments:
        """From a mapping: a command line's `vars(args)` or keywords (None = not given). `environment`: the
        options not given take their SM_LOCUST_* variable, as a command line's defaults do (a keyword
        source has none of its own)."""
        if environment:
            source = {**environment_values((*all_option_specs(), *RUN_OPTIONS)),
                      **{k: v for k, v in dict(source).items() if v is not None}}
        return cls(parse_options(source), parse_specs(RUN_OPTIONS, source), tuple(str(a) for a in passthrough))
