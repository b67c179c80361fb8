"""`sm-locust compare RUN_DIR... [--out DIR]`: several runs side by side, one HTML + one CSV.

Thin adapter over `sm_locust.report.compare` (`compare_table`, `write_compare`). No CloudWatch
calls: endpoint-side columns come from each run's steps.csv when `sm-locust report` already wrote
one. Its closing lines are a table: one row per run, throughput, p95 and $ per 1M (per 1M output
tokens for LLM runs), each with its change against the first run, then one line per run whose verdict
is INCONCLUSIVE, with the reason (a warning, not a gap). Exit codes:
0 every run complete, 1 written but some run has gaps (printed), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import add_spec_arguments
from sm_locust.report.compare import compare_table, terminal_table, write_compare
from sm_locust.report.options import COMPARE_OUT, CompareSettings, compare_options
from sm_locust.sanitize import clean
from sm_locust.util.outputs import check_output_dir, refuse_in_progress, refuse_links_in


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = add_command_parser(
        subparsers, "compare",
        description="Compare run folders: max sustainable throughput, latency there, $ per 1M inferences, "
        "transactions per hour. Writes compare.csv and compare.html (self-contained).",
    )
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run folders written by `sm-locust run`")
    add_spec_arguments(p, compare_options())
    return p


def run(args: argparse.Namespace) -> int:
    settings = CompareSettings.parse(vars(args))
    out = settings.out or COMPARE_OUT
    check_output_dir(Path(out))
    refuse_links_in(out, ("compare.csv", "compare.html"))
    for run_dir in args.run_dirs:
        refuse_in_progress(Path(run_dir))
    runs, table = compare_table(args.run_dirs, prices_file=settings.prices_file, safety_factor=settings.safety_factor,
                                target_rps=settings.target_rps,
                                progress=lambda m: print(f"sm-locust compare: {m}", flush=True))
    outputs = write_compare(runs, table, out)
    gaps = [f"{r.name}: {g}" for r in runs for g in r.gaps]
    columns: tuple[str, ...] = ("max_sustainable_rps", "p95_ms", "usd_per_million")
    if "usd_per_million_output_tokens" in table.columns:
        columns = ("max_sustainable_rps", "output_tokens_per_s", "ttft_p95_ms", "usd_per_million_output_tokens")
    for line in terminal_table(table, columns):
        print(f"sm-locust compare: {line}")
    for r in runs:  # complete, but its answer is not decided: said, not a gap
        for warning in r.warnings:
            print(f"sm-locust compare: {clean(r.name)}: {clean(warning)}")
    for gap in gaps:
        print(f"sm-locust compare: missing: {gap}", file=sys.stderr)
    for key, path in outputs.items():
        print(f"sm-locust compare: {key}: {path}")
    return 1 if gaps else 0
