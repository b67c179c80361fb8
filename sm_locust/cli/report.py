"""`sm-locust report RUN_DIR`: turn a finished run folder into report.html, CSVs and cost figures.

A thin adapter: argparse -> `ReportOptions` -> `sm_locust.report.pipeline.build_report`. Options the
user leaves out come from the run's summary.json / options.json. CloudWatch is on by default when
the run has an endpoint name and AWS configuration (or a CloudWatch URL) is present, and always
off for a run against the local endpoint unless AWS_ENDPOINT_URL_CLOUDWATCH is set (see
`cloudwatch_default`). Exit codes: 0 all data present, 1 report written but something missing
(each gap printed), 2 usage error (not a run folder, bad option). An s3:// RUN_DIR (a run uploaded
with `sm-locust run --upload`) is downloaded first (`sm_locust.report.s3`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sm_locust.cli.commands import add_command_parser
from sm_locust.errors import UsageError
from sm_locust.publish.verify import published_line
from sm_locust.record.runfolder import read_summary
from sm_locust.report.cloudwatch import make_client
from sm_locust.report.pipeline import (
    OUTPUT_FILES,
    ReportOptions,
    build_report,
    check_report_names,
    check_report_values,
)
from sm_locust.report.s3 import fetch_run, s3_client
from sm_locust.util.numbers import argument_type
from sm_locust.util.outputs import check_output_dir, refuse_in_progress, refuse_links_in


def _positive(kind: type):
    """A number above 0 (sm_locust.util.numbers: finite, one message naming the option)."""
    return argument_type(kind, above=0)


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
    p.add_argument("--endpoint-name", help="endpoint name (default: from summary.json / options.json)")
    p.add_argument("--variant-name", help="production variant (default: the run's target variant, else AllTraffic)")
    p.add_argument("--inference-component", help="InferenceComponentName dimension instead of EndpointName+VariantName")
    p.add_argument("--region", help="AWS region (default: the run's, else the boto3 chain)")
    p.add_argument("--profile", help="AWS profile (default: the run's, else the boto3 chain)")
    p.add_argument("--period", type=int, default=60, help="CloudWatch period in seconds, a multiple of 60 (default 60)")
    p.add_argument("--wait", action="store_true",
                   help="poll CloudWatch until metrics for the whole run have arrived (they lag a few minutes)")
    p.add_argument("--wait-timeout", type=_positive(float), default=900.0,
                   help="seconds to wait with --wait (default 900)")
    p.add_argument("--instance-type", help="e.g. ml.c5.xlarge, for the price and vCPU count")
    p.add_argument("--instance-count", type=_positive(int),
                   help="instances behind the variant during the run (default 1)")
    p.add_argument("--price-per-hour", type=_positive(float), help="USD per instance-hour (overrides the price table)")
    p.add_argument("--prices", dest="prices_file", metavar="FILE",
                   help="JSON price table overriding the bundled one entry by entry (same shape as prices.json)")
    p.add_argument("--target-rps", type=_positive(float), help="traffic to size for: instances needed")
    p.add_argument("--safety-factor", type=_positive(float), default=0.5,
                   help="headroom for sizing and the autoscaling target (default 0.5)")
    p.add_argument("--serverless-memory-mb", type=_positive(int),
                   help="also estimate serverless cost at this memory size (1024-6144)")
    p.add_argument("--out", dest="out_dir", metavar="DIR", help="write outputs here instead of RUN_DIR")
    p.add_argument("--no-summary-update", dest="write_summary", action="store_false",
                   help="do not add the cloudwatch/cost keys to summary.json")
    p.set_defaults(write_summary=True)
    return p


def run(args: argparse.Namespace) -> int:
    check_report_values(period=args.period, safety_factor=args.safety_factor)
    check_report_names(args.endpoint_name, args.variant_name, args.inference_component)
    run_dir, out_dir = args.run_dir, args.out_dir
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
        local, transfer = fetch_run(run_dir, out=out_dir, s3=s3_client(args.profile, args.region))
        print(f"sm-locust report: downloaded {transfer.describe()} from {run_dir.rstrip('/')}/ to {local}/", flush=True)
        run_dir, out_dir = str(local), None  # the report goes next to the downloaded run
    options = ReportOptions(
        cloudwatch=args.cloudwatch, endpoint_name=args.endpoint_name, variant_name=args.variant_name,
        inference_component=args.inference_component, region=args.region, profile=args.profile,
        instance_type=args.instance_type, instance_count=args.instance_count, price_per_hour=args.price_per_hour,
        prices_file=args.prices_file, target_rps=args.target_rps, safety_factor=args.safety_factor,
        serverless_memory_mb=args.serverless_memory_mb, wait=args.wait, wait_timeout=args.wait_timeout,
        period=args.period, out_dir=out_dir, write_summary=args.write_summary,
    )
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
        published = published_line(read_summary(run_dir), make_client(args.region, args.profile))
        if published:
            print(f"sm-locust report: published: {published}")
    return result.exit_code
