"""The arguments of a run as a command line declares them: every sm-locust option (from their
`OptionSpec`s), Locust's load (`-u`, `-r`, `-t`, `--shape`, `--processes`), the output and the
run's extras (`--upload`, `--watch-scaling`).

`sm-locust run` and `smoke` declare them on their sub-parsers (cli/), and the Python API
(`api/options.py`) parses its keywords with the same declaration, so a keyword means exactly its
flag: one declaration, below every entry point (nothing imports `cli/`).
"""

from __future__ import annotations

import argparse
import os

from sm_locust.config.options import add_cli_options
from sm_locust.util.numbers import MAX_USERS, PROCESSES_PER_CORE, argument_type, max_processes


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("load")
    group.add_argument("-u", "--users", type=argument_type(int, maximum=MAX_USERS), default=None,
                       help=f"number of users (no shape: default 1; at most {MAX_USERS:,})")
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
                     help="only sm-locust's own lines (steps, progress every 5 s, verdict, checks) and errors; without "
                     "it Locust's warnings show too (its INFO lines with `-- --loglevel INFO`, its tables with "
                     "--locust-stats); all of Locust's output is in locust.log")
    out.add_argument("--locust-stats", action="store_true",
                     help="show Locust's periodic stats tables (every 2 s; off by default: the step lines and the "
                     "closing lines carry the figures, and every table is in locust_stats_history.csv)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything `sm-locust run` takes (the Python API's keywords are these, with underscores)."""
    add_cli_options(parser)
    add_load_arguments(parser)
    parser.add_argument("--upload", metavar="S3_URL", default=os.environ.get("SM_LOCUST_UPLOAD") or None,
                        help="upload the run folder to S3_URL/<run-id>/ when the run ends, also after a failure "
                        "(write access is checked before the test starts); read it back with `sm-locust report "
                        "S3_URL/<run-id>` [SM_LOCUST_UPLOAD]")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="run the same test N times (run-1/ .. run-N/ in the run folder) and report each headline "
                        "figure's run-to-run spread beside the within-run interval (repeat.json; docs/summary.md)")
    parser.add_argument("--watch-scaling", action="store_true",
                        help="record what the endpoint's own scaling policy does under this run's traffic "
                        "(DescribeEndpoint every 10 s; scale events, instance-hours, seconds over --latency-slo-ms) "
                        "into summary.json `autoscaling`; changes nothing (docs/autoscaling.md)")
