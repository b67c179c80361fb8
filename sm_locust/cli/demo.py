"""`sm-locust demo`: the whole workflow on this machine, no AWS account needed.

Starts the local endpoint with a known capacity (max concurrency / service time), runs a step load
of about a minute against it, writes the run folder, prints where the results are, and stops the
endpoint, also on Ctrl+C or failure.
"""

from __future__ import annotations

import argparse
from importlib import resources

DEMO_ENDPOINT = "sm-locust-demo"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="start the local endpoint, run a ~1 minute step load against it, write the run folder",
        description="A complete sm-locust run offline: local endpoint (capacity = max-concurrency / service time), "
        "step load 1 -> 13 users, run folder with summary.json.",
    )
    p.add_argument("--out", default=None, help="run folder (default reports/<run-id>/)")
    p.add_argument("--port", type=int, default=0, help="local endpoint port (default: a free port)")
    p.add_argument("--step-seconds", type=float, default=12.0, help="seconds per load step (default 12; 5 steps)")
    p.add_argument("--step-users", type=int, default=3, help="users added per step (default 3)")
    p.add_argument("--max-users", type=int, default=13, help="users in the last step (default 13)")
    p.add_argument("--max-concurrency", type=int, default=4, help="local endpoint concurrency (default 4)")
    p.add_argument("--service-time-ms", type=float, default=20.0, help="local endpoint service time (default 20 ms)")
    p.add_argument("-v", "--verbose", action="store_true", help="show Locust's own periodic tables")


def run(args: argparse.Namespace) -> int:
    from sm_locust.endpoint.faults import EndpointConfig
    from sm_locust.endpoint.server import LocalEndpoint
    from sm_locust.options import SageMakerSettings
    from sm_locust.preflight import preflight
    from sm_locust.runner import LoadSettings, choose_out_dir, execute, verdict_line
    from sm_locust.shapes.step import StepSchedule

    schedule = StepSchedule(start_users=1, step_users=args.step_users, step_seconds=args.step_seconds,
                            max_users=args.max_users).validate()
    config = EndpointConfig(port=args.port, max_concurrency=args.max_concurrency, service_time_ms=args.service_time_ms,
                            endpoint_name=DEMO_ENDPOINT)
    _valid(config)
    payload = str(resources.files("sm_locust") / "data" / "ranking_10rows.json")
    out = choose_out_dir(args.out, DEMO_ENDPOINT)
    out.mkdir(parents=True, exist_ok=True)
    capacity = args.max_concurrency / (args.service_time_ms / 1000.0)
    print(f"sm-locust demo: starting the local endpoint (max concurrency {args.max_concurrency}, service time "
          f"{args.service_time_ms:g} ms: capacity ~{capacity:.0f} req/s)", flush=True)
    with LocalEndpoint(config, log_path=out / "endpoint.log") as endpoint:
        settings = SageMakerSettings(endpoint_name=DEMO_ENDPOINT, endpoint_url=endpoint.url, payload=payload)
        extra_env = preflight(settings)
        options = argparse.Namespace(**vars(settings), start_users=1, step_users=schedule.step_users,
                                     step_seconds=schedule.step_seconds, max_users=schedule.max_users)
        load = LoadSettings(shape="step", spawn_rate=100.0, quiet=not args.verbose, progress_every_s=5.0)
        print(f"sm-locust demo: step load {schedule.start_users} -> {schedule.max_users} users, "
              f"+{schedule.step_users} every {schedule.step_seconds:g} s (~{schedule.duration:.0f} s)", flush=True)
        summary = execute(settings, load, out, extra_env, options=options)
        server = endpoint.stats()
    print(f"sm-locust demo: {verdict_line(summary)}")
    print(f"sm-locust demo: the endpoint counted {server['requests']:.0f} requests")
    for step in summary["steps"]:
        print(f"  {step['users']:>3} users: {step['rps']:8.1f} req/s  p50 {step['p50_ms']} ms  p95 {step['p95_ms']} ms")
    print(f"sm-locust demo: results in {out}/ (summary.json, locust_stats_history.csv, locust_report.html)")
    return 0


def _valid(config) -> bool:
    try:
        config.validate()
    except ValueError as exc:
        from sm_locust.errors import UsageError

        raise UsageError(str(exc)) from None
    return True
