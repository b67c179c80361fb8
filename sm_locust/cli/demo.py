"""`sm-locust demo`: the whole workflow on this machine, no AWS account needed.

Starts a CloudWatch stand-in (moto's server on 127.0.0.1) and the local endpoint with a known
capacity publishing an endpoint's metrics to it, runs a step load of about a minute (publishing its
own live metrics too), then `sm-locust report` with the stand-in's metrics (cw_* columns). Everything
started is stopped, also on Ctrl+C or failure. Without moto (the `demo`/`test` extras) or with
--no-cloudwatch, one line says so and the report uses Locust's data alone. Its options are
OptionSpecs, parsed once into `DemoSettings`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

import pandas as pd

from sm_locust.aws.clients import Keys, Purpose
from sm_locust.aws.clients import client as aws_client
from sm_locust.cli.commands import add_command_parser
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import OptionSpec, add_spec_arguments, parse_options, parse_specs
from sm_locust.config.preflight import preflight
from sm_locust.core.child import LoadSettings, execute
from sm_locust.core.folder import check_out_dir, make_out_dir, remove_run_files
from sm_locust.core.verdict import verdict_lines
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UsageError
from sm_locust.publish.verify import compare, read_published
from sm_locust.record.folders import choose_out_dir
from sm_locust.record.model import Summary
from sm_locust.report.pipeline import ReportOptions, build_report
from sm_locust.shapes.settings import StepSchedule
from sm_locust.util.formatting import MISSING
from sm_locust.util.numbers import MAX_USERS
from sm_locust.util.outputs import locked_folder

DEMO_ENDPOINT = "sm-locust-demo"
DEMO_PRICED_AS = "ml.c5.xlarge"
STAND_IN_REGION = "us-east-1"
STAND_IN_KEY = "sm-locust-demo"  # placeholder credentials: moto checks none


def _spec(flag: str, help: str, type: Any = None, default: Any = None, **rest: Any) -> OptionSpec:
    return OptionSpec(flag, "", default, help, type=type, web_ui=False, forward=False, **rest)


def _switch(flag: str, help: str, **rest: object) -> OptionSpec:
    return _spec(flag, help, bool, False, const=True, **rest)


OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--out", "run folder (default reports/<run-id>/)"),
    _switch("--overwrite", "--out may name a folder that holds an earlier run: its files are removed first"),
    _spec("--port", "local endpoint port (0: a free port)", int, 0, minimum=0, maximum=65535),
    _spec("--step-seconds", "seconds per load step (6 steps)", float, 10.0, above=0),
    _spec("--step-users", "users added per step", int, 2, minimum=1, maximum=MAX_USERS),
    _spec("--max-users", "users in the last step", int, 11, minimum=1, maximum=MAX_USERS),
    _spec("--max-concurrency", "local endpoint concurrency", int, 4, minimum=1),
    _spec("--service-time-ms", "local endpoint service time in ms", float, 20.0, above=0),
    _switch("--no-cloudwatch", "no CloudWatch stand-in: the report shows Locust's data only"),
    _switch("--verbose", "show Locust's own periodic tables", short="-v"),
)


@dataclass(frozen=True)
class DemoSettings:
    """What `sm-locust demo` was asked, parsed once by its specs."""

    out: str | None = None
    overwrite: bool = False
    port: int = 0
    step_seconds: float = 10.0
    step_users: int = 2
    max_users: int = 11
    max_concurrency: int = 4
    service_time_ms: float = 20.0
    no_cloudwatch: bool = False
    verbose: bool = False

    @classmethod
    def parse(cls, values: Mapping[str, object]) -> DemoSettings:
        """From a mapping (the command line's `vars(args)`), each option by its spec (UsageError otherwise)."""
        options = parse_specs(OPTIONS, values)
        return cls(**{f.name: options[f.name] for f in fields(cls)})


def add_parser(subparsers) -> None:
    p = add_command_parser(
        subparsers, "demo",
        description="A complete sm-locust run offline: local endpoint (capacity = max-concurrency / service time) "
        "publishing its CloudWatch metrics to a local moto server, step load 1 -> 11 users, run folder with "
        "summary.json, report.html, merged_timeseries.csv and steps.csv.",
    )
    add_spec_arguments(p, OPTIONS)


class CloudWatchStandIn:
    """moto's CloudWatch API on 127.0.0.1 (a free port), in a thread of this process."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # lazy: moto is the optional `demo` extra

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access-log line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""

    def __enter__(self) -> CloudWatchStandIn:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()

    def client(self):
        return aws_client("cloudwatch", Purpose.READ, region=STAND_IN_REGION, endpoint_url=self.url,
                          keys=Keys(STAND_IN_KEY, STAND_IN_KEY))


def cloudwatch_stand_in(wanted: bool) -> CloudWatchStandIn | None:
    """The stand-in, or None (with one line saying why) when not wanted or moto is missing."""
    if not wanted:
        print("sm-locust demo: CloudWatch metrics skipped (--no-cloudwatch)", flush=True)
        return None
    try:
        return CloudWatchStandIn()
    except ImportError:
        print("sm-locust demo: CloudWatch metrics skipped: moto is not installed "
              "(pip install 'sm-locust[demo]' or 'sm-locust[test]')", flush=True)
        return None


def run(namespace: argparse.Namespace) -> int:
    args = DemoSettings.parse(vars(namespace))
    schedule = StepSchedule(start_users=1, step_users=args.step_users, step_seconds=args.step_seconds,
                            max_users=args.max_users).validate()
    config = EndpointConfig(port=args.port, max_concurrency=args.max_concurrency, service_time_ms=args.service_time_ms,
                            endpoint_name=DEMO_ENDPOINT)
    _valid(config)
    payload = str(resources.files("sm_locust") / "data" / "ranking_10rows.json")
    out = choose_out_dir(args.out, DEMO_ENDPOINT)
    check_out_dir(out, overwrite=args.overwrite)
    make_out_dir(out)  # the endpoint's log goes there from the start
    capacity = args.max_concurrency / (args.service_time_ms / 1000.0)
    with contextlib.ExitStack() as stack:
        stack.enter_context(locked_folder(out))  # before --overwrite removes anything: no other run is writing it
        if args.overwrite:
            remove_run_files(out)
        stand_in = cloudwatch_stand_in(not args.no_cloudwatch)
        if stand_in is not None:
            stack.enter_context(stand_in)
            config = config.with_changes(cloudwatch_url=stand_in.url)
            print(f"sm-locust demo: CloudWatch stand-in (moto) on {stand_in.url}", flush=True)
        print(f"sm-locust demo: starting the local endpoint (max concurrency {args.max_concurrency}, service time "
              f"{args.service_time_ms:g} ms: capacity ~{capacity:.0f} req/s)", flush=True)
        endpoint = stack.enter_context(LocalEndpoint(config, log_path=out / "endpoint.log"))
        settings = SageMakerSettings(endpoint_name=DEMO_ENDPOINT, endpoint_url=endpoint.url, payload=payload)
        extra_env = preflight(settings)
        publish = {}
        if stand_in is not None:  # the client's live metrics go to the stand-in too (docs/live-metrics.md)
            publish = {"publish": "cloudwatch", "publish_period": 10}
            extra_env["AWS_ENDPOINT_URL_CLOUDWATCH"] = stand_in.url
        options = parse_options({**vars(settings), "start_users": 1, "step_users": schedule.step_users,
                                 "step_seconds": schedule.step_seconds, "max_users": schedule.max_users, **publish})
        load = LoadSettings(shape="step", spawn_rate=100.0, quiet=not args.verbose, progress_every_s=5.0,
                            closing_verdict=True)  # the plateau said once, in the closing lines below
        print(f"sm-locust demo: step load {schedule.start_users} -> {schedule.max_users} users, "
              f"+{schedule.step_users} every {schedule.step_seconds:g} s (~{schedule.duration:.0f} s)", flush=True)
        summary = execute(settings, load, out, extra_env, options=options)
        server = endpoint.stats()
        endpoint.stop()  # the endpoint publishes its last metrics window as it stops
        for line in verdict_lines(summary):
            print(f"sm-locust demo: {line}")
        print(f"sm-locust demo: the endpoint counted {server['requests']:.0f} requests")
        published = read_published(stand_in.client(), summary) if stand_in is not None else None
        if published is not None:
            print(f"sm-locust demo: published: {compare(published, summary)[1]}")
        for step in Summary.of(summary).steps:
            print(f"  {step.users:>3} users: {step.rps:8.1f} req/s  p50 {step.p50_ms} ms  p95 {step.p95_ms} ms")
        report = _report(out, stand_in)
    print(f"sm-locust demo: results in {out}/ (summary.json, locust_stats_history.csv, locust_report.html)")
    outputs = report.outputs
    print(f"sm-locust demo: report in {outputs['html']} (with {outputs['timeseries'].name}, {outputs['steps'].name})")
    return 0


def _report(out, stand_in: CloudWatchStandIn | None):
    """`sm-locust report` on the run folder, with the stand-in's metrics; prints the endpoint's view
    per step and every gap. Returns the ReportResult."""
    # The local endpoint is no instance; the demo prices it as if it ran on one (say so) so the
    # cost lines of the report show what they show on a real run.
    options = ReportOptions(cloudwatch=stand_in is not None, region=STAND_IN_REGION, instance_type=DEMO_PRICED_AS)
    print(f"sm-locust demo: costs in the report are priced as if the endpoint ran on one {DEMO_PRICED_AS}")
    result = build_report(out, options, cloudwatch=stand_in.client() if stand_in else None, env={})
    if stand_in is not None:
        print("sm-locust demo: the endpoint's CloudWatch metrics, per minute as on AWS (CPU summed over cores):")
        for line in minute_lines(result.outputs["timeseries"]):
            print(line)
    for gap in result.gaps:
        print(f"sm-locust demo: report: missing: {gap}")
    return result


MINUTE_COLUMNS = (("cw_Invocations_sum_count", "Invocations", "{:6.0f}"),
                  ("cw_ModelLatency_avg_ms", "ModelLatency", "{:5.1f} ms"),
                  ("cw_OverheadLatency_avg_ms", "OverheadLatency", "{:5.1f} ms"),
                  ("cw_CPUUtilization_avg_pct", "CPU", "{:5.1f} %"),
                  ("cw_MemoryUtilization_avg_pct", "memory", "{:4.1f} %"))


def minute_lines(timeseries_csv) -> list[str]:
    """One line per CloudWatch minute of the run, from merged_timeseries.csv (each minute's value
    sits on every second of that minute)."""
    seconds = pd.read_csv(timeseries_csv)
    present = [c for c in MINUTE_COLUMNS if c[0] in seconds.columns]
    if not present:
        return ["  (no CloudWatch columns)"]
    minutes = seconds.groupby(seconds["epoch_s"] // 60 * 60)[[c for c, _, _ in present]].first()
    lines = []
    for _, row in minutes.reset_index(names="minute_start").iterrows():
        label = pd.Timestamp(int(row["minute_start"]), unit="s").strftime("%H:%M")
        cells = [f"{name} {MISSING if pd.isna(row[col]) else fmt.format(row[col])}" for col, name, fmt in present]
        lines.append(f"  {label} UTC: " + "  ".join(cells))
    return lines


def _valid(config) -> bool:
    try:
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return True
