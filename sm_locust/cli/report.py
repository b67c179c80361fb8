"""`sm-locust report RUN_DIR`: turn a finished run folder into report.html, CSVs and cost figures.

A thin adapter: argparse -> `ReportOptions.parse` (the OptionSpecs of sm_locust/report/options.py) ->
`sm_locust.report.pipeline.build_report`. Options the
user leaves out come from the run's summary.json / options.json. CloudWatch is on by default when
the run has an endpoint name and AWS configuration (or a CloudWatch URL) is present, and always
off for a run against the local endpoint unless AWS_ENDPOINT_URL_CLOUDWATCH is set (see
`cloudwatch_default`). Exit codes: 0 all data present, 1 report written but something missing
(each gap printed), 2 usage error (not a run folder, bad option). An s3:// RUN_DIR (a run uploaded
with `sm-locust run --upload`) is downloaded first (`sm_locust.aws.s3`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from sm_locust.aws.s3 import fetch_run, s3_client
from sm_locust.cli.commands import add_command_parser
from sm_locust.config.options import add_spec_arguments
from sm_locust.errors import UsageError
from sm_locust.publish.verify import published_line
from sm_locust.record.runfolder import read_summary
from sm_locust.report import options as report_options
from sm_locust.report.cloudwatch import make_client
from sm_locust.report.pipeline import OUTPUT_FILES, ReportOptions, build_report
from sm_locust.util.outputs import check_output_dir, refuse_in_progress, refuse_links_in


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = add_command_parser(
        subparsers, "report",
        description="Build report.html (self-contained, works offline), merged_timeseries.csv and steps.csv from "
        "a run folder; merge the endpoint's CloudWatch metrics and price the sustainable throughput. "
        "Exit 0: all data present; 1: report written, something missing; 2: usage error.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="run folder written by `sm-locust run`, or s3://BUCKET/PREFIX/RUN-ID uploaded by `sm-locust "
                   "run --upload` (downloaded to reports/RUN-ID/, or --out, and reported there)")
    cw = p.add_mutually_exclusive_group()
    cw.add_argument("--cloudwatch", dest="cloudwatch", action="store_true", default=None,
                    help="fetch CloudWatch metrics (default: on when the run has an endpoint and AWS configuration; "
                    "off for the local endpoint unless AWS_ENDPOINT_URL_CLOUDWATCH is set)")
    cw.add_argument("--no-cloudwatch", dest="cloudwatch", action="store_false", help="do not fetch CloudWatch metrics")
    add_spec_arguments(p, report_options.OPTIONS)
    p.add_argument("--no-summary-update", dest="write_summary", action="store_false",
                   help="do not add the cloudwatch/cost keys to summary.json")
    p.set_defaults(write_summary=True)
    return p


def run(args: argparse.Namespace) -> int:
    given = ReportOptions.parse(vars(args), cloudwatch=args.cloudwatch, write_summary=args.write_summary)
    run_dir, out_dir = args.run_dir, given.out_dir
    if out_dir:
        check_output_dir(Path(out_dir))
        refuse_links_in(out_dir, OUTPUT_FILES.values())
    elif not run_dir.startswith("s3://") and Path(run_dir).is_dir():
        refuse_in_progress(Path(run_dir))
        try:  # the report goes next to the run: a read-only or full place fails now, not after the CloudWatch wait
            check_output_dir(Path(run_dir), "RUN_DIR")
            refuse_links_in(run_dir, OUTPUT_FILES.values(), "RUN_DIR")
        except UsageError as exc:
            raise UsageError(f"{exc.message}; pass --out DIR to write the report elsewhere") from None
    if run_dir.startswith("s3://"):
        local, transfer = fetch_run(run_dir, out=out_dir, s3=s3_client(given.profile, given.region))
        print(f"sm-locust report: downloaded {transfer.describe()} from {run_dir.rstrip('/')}/ to {local}/", flush=True)
        run_dir, out_dir = str(local), None  # the report goes next to the downloaded run
    options = dataclasses.replace(given, out_dir=out_dir)
    result = build_report(run_dir, options, progress=lambda msg: print(f"sm-locust report: {msg}", flush=True))
    for note in result.notes:
        print(f"sm-locust report: note: {note}")
    for gap in result.gaps:
        print(f"sm-locust report: missing: {gap}", file=sys.stderr)
    for label, value in result.answers:  # the Summary's lead: what the run and the flags asked
        print(f"sm-locust report: {label}: {value}")
    for key, path in result.outputs.items():
        print(f"sm-locust report: {key}: {path}")
    if result.cloudwatch.get("source") == "cloudwatch":  # the run's --publish cloudwatch: what CloudWatch holds
        published = published_line(read_summary(run_dir), make_client(given.region, given.profile))
        if published:
            print(f"sm-locust report: published: {published}")
    return result.exit_code
