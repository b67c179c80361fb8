"""The default sm-locust locustfile: invoke one SageMaker endpoint with a payload, as fast as it can.

    locust -f locustfiles/sagemaker.py --endpoint-name my-endpoint --payload body.json

Options (`--endpoint-name`, `--endpoint-url`, `--region`, `--payload`, `--content-type`, `--accept`,
...) are Locust options: they can be set as `SM_LOCUST_*` environment variables or in locust.conf,
and most show and can be edited in the web UI; those that load code or decide where the signed
requests go (`--payload`, `--endpoint-url`, `--region`, `--aws-profile`) stay on the command line
(`_webui.py`). With `--sm-out DIR` the run's summary.json and timeline.jsonl are written there
(master or local runner).

Before anything starts (the `init` event, on the master or local runner) the settings are checked
as `sm-locust run` checks them: endpoint, payload and every payload option, the URL, the region.
A bad one ends Locust at once with one line, `sm-locust: error: ...`, and exit code 2, instead of
a run that sends nothing until `-t` ends. In the web UI the endpoint name may still be typed in the
form. The web UI and the master listen on 127.0.0.1 unless `--web-host` / `--master-bind-host`
say otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path

import gevent
from locust import argument_parser, events, task
from locust.runners import MasterRunner, WorkerRunner

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.locust_parser import cache_default_args, guard_parser
from sm_locust.config.options import Options, environment_options, locust_values, parse_options, register_options
from sm_locust.config.preflight import (
    aws_environment,
    aws_region,
    check_region,
    is_loopback,
    plain_http_warning,
    runtime_url,
)
from sm_locust.errors import SmLocustError, UsageError
from sm_locust.llm.conversation import conversational
from sm_locust.llm.tokenizer import text_counter
from sm_locust.locustfiles._webui import protect as protect_web_ui  # `_`: Locust skips it in a folder of locustfiles
from sm_locust.payloads.options import prepare_payloads
from sm_locust.payloads.split import PARTS
from sm_locust.publish.live import attach_publisher
from sm_locust.record.folders import choose_out_dir
from sm_locust.record.llm import LlmStats, accounting_for
from sm_locust.record.llm_options import FigureTrim
from sm_locust.record.looplag import LoopLagMonitor
from sm_locust.record.recorder import RunRecorder, attach_recorder, recorder_of
from sm_locust.record.requests_log import attach_request_log
from sm_locust.record.schedwait import WorkerWaits
from sm_locust.record.targets import TargetStats
from sm_locust.record.watermark import ReportWatermarks, report_every_second
from sm_locust.record.workers import attach
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.transport.options import check_async_result, operation, prepare_async_clients
from sm_locust.users import SageMakerUser
from sm_locust.users.fanout import invoke_split
from sm_locust.util.outputs import check_output_dir

__all__ = ["InvokeEndpointUser"]
log = logging.getLogger("sm_locust")
LOCAL_BIND = "127.0.0.1"  # the web UI and the master have no login by default: this machine only


@events.init_command_line_parser.add_listener
def _register_options(parser, **_kw) -> None:
    register_options(parser)
    parser.set_defaults(web_host=LOCAL_BIND, master_bind_host=LOCAL_BIND)
    guard_parser(parser)  # locust.conf read as UTF-8 text; --processes / --users within this machine's bounds
    cache_default_args(argument_parser)  # a worker's spawn messages: Locust's option names computed once


def check_startup(options: Options, *, web_ui: bool) -> SageMakerSettings:
    """The checks `sm-locust run` makes before a run, for plain Locust (UsageError when wrong).
    With the web UI the endpoint name may still come from the form."""
    settings = SageMakerSettings.from_options(options)
    placeholder = settings.endpoint_name or "from-the-form"  # a name SageMaker could have: the form gives the real one
    checked = dataclasses.replace(settings, endpoint_name=placeholder) if web_ui else settings
    checked.validate()
    check_async_result(options)
    if settings.sm_out:  # summary.json goes there: a path that cannot be written fails now, not at the end
        check_output_dir(Path(settings.sm_out), "--sm-out")
    elif options.log_requests:
        raise UsageError("--log-requests writes requests.jsonl.gz into the run folder; give --sm-out DIR "
                         "(sm-locust run gives it its --out)")
    prepare_payloads(checked, options)
    check_region(aws_region(settings) if not runtime_url(settings) else settings.region, aws=not runtime_url(settings))
    return settings


@events.init.add_listener
def _check_settings(environment, web_ui=None, **_kw) -> None:
    """Quit at once, exit 2, one line, when the settings cannot work (see the module docstring)."""
    if isinstance(environment.runner, WorkerRunner) or environment.parsed_options is None:
        return
    try:
        settings = check_startup(parse_options(locust_values(environment.parsed_options)), web_ui=web_ui is not None)
    except SmLocustError as exc:
        print(f"sm-locust: error: {exc.message}", file=sys.stderr, flush=True)
        environment.process_exit_code = exc.exit_code
        raise SystemExit(exc.exit_code) from None  # before any runner, web UI or user starts: nothing to stop
    warning = plain_http_warning(runtime_url(settings))
    if warning:
        print(f"sm-locust: warning: {warning}", file=sys.stderr, flush=True)
    if web_ui is not None:  # the form's values: the same start-up check, the endpoint name now required
        protect_web_ui(environment, web_ui,
                       check=lambda values: check_startup(parse_options(values), web_ui=False))


@events.init.add_listener
def _local_credentials(environment, **_kw) -> None:
    """A loopback endpoint without credentials gets placeholder keys and a region, as `sm-locust run`
    gives its Locust process (`aws_environment`, the one rule): plain Locust against `sm-locust serve`
    would otherwise fail every request with NoCredentialsError. Every process (workers too)."""
    if environment.parsed_options is None or (os.environ.get("AWS_ACCESS_KEY_ID") and (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))):
        return  # given already (`sm-locust run` gives its Locust both): no botocore session to build (~190 ms)
    try:
        settings = SageMakerSettings.from_options(parse_options(locust_values(environment.parsed_options)))
        if is_loopback(runtime_url(settings)):
            os.environ.update(aws_environment(settings))
    except SmLocustError:
        return  # _check_settings has said so and quits (a worker: the master did)


@events.init.add_listener
def _prepare_async_clients(environment, **_kw) -> None:
    """`--async-result s3|sqs:...`: every process that sends builds its S3 / SQS clients now, before the test
    (transport/options.py), not when its first user starts: built as the test started, they held a
    worker's loop for seconds on a loaded machine, its heartbeats stopped and the master counted it
    missing. After `_local_credentials`: the clients read the placeholder keys. The process that writes
    summary.json writes its `async` even if no call was made (`AsyncLedger.wanted`)."""
    if environment.parsed_options is None:
        return
    try:
        options = parse_options(locust_values(environment.parsed_options))
        settings = SageMakerSettings.from_options(options)
        if options.async_result != "none":
            AsyncLedger.for_environment(environment).wanted = True
        if not isinstance(environment.runner, MasterRunner):
            prepare_async_clients(environment, options, settings.region, settings.aws_profile)
    except SmLocustError:
        return  # _check_settings has said so and quits (a worker: the master did)


@events.init.add_listener
def _attach_request_log(environment, **_kw) -> None:
    """--log-requests: each process that sends writes its rows (sm_locust.record.requests_log); registered
    before the recorder, so the rows are on disk and counted when it writes summary.json at the stop."""
    if environment.parsed_options is None or isinstance(environment.runner, MasterRunner):
        return
    try:
        options = parse_options(locust_values(environment.parsed_options))
    except SmLocustError:
        return  # _check_settings has said so and quits
    folder = SageMakerSettings.from_options(options).sm_out
    if not (options.log_requests and folder):
        return
    worker = process_index(environment.runner) if isinstance(environment.runner, WorkerRunner) else None
    request_log = attach_request_log(environment, folder, worker)
    request_log.on_counts = lambda counts: _record_counts(environment, counts)


def _record_counts(environment, counts: dict) -> None:
    recorder = recorder_of(environment)
    if recorder is not None:
        recorder.extra["request_log"] = counts


@events.init.add_listener
def _attach_recorder(environment, **_kw) -> None:
    if isinstance(environment.runner, WorkerRunner) or environment.parsed_options is None:
        return
    try:
        settings = SageMakerSettings.from_options(parse_options(locust_values(environment.parsed_options)))
    except SmLocustError:
        return  # _check_settings has said so and quits
    attach_recorder(environment, RunRecorder(environment, settings.sm_out or None, endpoint=settings.endpoint_name,
                                             progress_every_s=settings.sm_progress))


@events.init.add_listener
def _attach_publisher(environment, **_kw) -> None:
    """--publish / --dashboard (sm_locust.publish): checked now, before any user starts (one line, exit 2)."""
    attach_publisher(environment, recorder_of(environment))


def swarm_folder(sm_out: str, endpoint_name: str, swarm: int) -> Path:
    """The run folder of the `swarm`-th swarm (1, 2, ...) of this Locust process: `--sm-out DIR` is the
    first one's, DIR-2, DIR-3, ... the later ones' (the web UI starts many); without it each swarm
    gets a new `reports/<run-id>/`, as `sm-locust run` names them."""
    if not sm_out:
        return choose_out_dir(None, endpoint_name or "run")
    return Path(sm_out) if swarm <= 1 else Path(f"{sm_out.rstrip('/')}-{swarm}")


@events.test_start.add_listener
def _run_folder(environment, **_kw) -> None:
    """Every swarm writes a run folder (summary.json, timeline.jsonl): set before the recorder starts."""
    recorder = recorder_of(environment)
    if recorder is None or isinstance(environment.runner, WorkerRunner) or environment.parsed_options is None:
        return
    environment.sm_locust_swarms = getattr(environment, "sm_locust_swarms", 0) + 1
    try:
        settings = SageMakerSettings.from_options(parse_options(locust_values(environment.parsed_options)))
        folder = swarm_folder(settings.sm_out, settings.endpoint_name, environment.sm_locust_swarms)
        folder.mkdir(parents=True, exist_ok=True)
    except (SmLocustError, OSError) as exc:
        log.error("sm-locust: no run folder for this swarm: %s", exc)
        recorder.out_dir = None
        return
    recorder.out_dir = folder
    if not settings.sm_out or environment.sm_locust_swarms > 1:
        log.info("sm-locust: this swarm's run folder is %s", folder)


@events.test_start.add_listener
def _load_payloads(environment, **_kw) -> None:
    """Encode the payloads once per process, before any user sends (re-read on each swarm).

    The payload options (`--serializer`, `--selection`, `--batch-size`, `--split`,
    `--validate-response`, ...) are applied here; with `--split K` each body's K parts are
    pre-encoded too, so the request path only picks and sends. A traffic mix (`--target-models`,
    `--inference-components`) is drawn from this process's own seeded stream (`process_index`).
    """
    environment.sm_locust_options = None
    try:
        # parsed once per swarm (the web UI may have changed them), read by the users and shapes
        options = environment.sm_locust_options = parse_options(locust_values(environment.parsed_options))
        settings = SageMakerSettings.from_options(options).validate()
        prepared = prepare_payloads(settings, options, process=process_index(environment.runner))
    except SmLocustError as exc:
        log.error("sm-locust: %s", exc)
        environment.sm_locust_payloads = None
        environment.sm_locust_validator = None
        if environment.runner is not None:
            environment.process_exit_code = exc.exit_code
            environment.runner.quit()
        return
    environment.sm_locust_payloads = prepared.pool
    environment.sm_locust_validator = prepared.validator
    LlmStats.for_environment(environment).trim = FigureTrim.from_options(options)  # --warmup-s, --cooldown-s
    recorder = recorder_of(environment)
    if recorder is not None:
        recorder.endpoint = settings.endpoint_name
        recorder.extra["payload"] = {**prepared.describe(), "source": settings.payload}
        mix = prepared.mix.describe()
        if mix is not None:
            recorder.extra["mix"] = mix
        else:
            recorder.extra.pop("mix", None)  # a later swarm (web UI) without the mix


def process_index(runner) -> int:
    """This Locust process's index in the run: Locust's worker index on a worker, else 0."""
    index = getattr(runner, "worker_index", 0) if isinstance(runner, WorkerRunner) else 0
    return index if isinstance(index, int) and index >= 0 else 0


class InvokeEndpointUser(SageMakerUser):
    """Sends the payload pool's invocations to `--endpoint-name`, one after another.

    A split invocation (`--split K`) goes out as its K parts at once (`sm_locust.users.fanout`); with
    `--validate-response` the shared client checks every response body.
    """

    def on_start(self) -> None:
        self.client.validator = getattr(self.environment, "sm_locust_validator", None)
        options = environment_options(self.environment)
        # invoke, --stream or async; tokens counted
        self.call = accounting_for(operation(self.client, options), self.environment, options)
        if options.turns > 1:  # --turns: this user's requests become conversations (sm_locust.llm.conversation)
            self.call = conversational(self.call, options.turns, text_counter(options.tokenizer))

    @task
    def invoke_endpoint(self) -> None:
        pool = self.environment.sm_locust_payloads
        if pool is None:
            return
        invocation = pool.next()
        if PARTS in invocation.extra:
            invoke_split(self.client, invocation)
        else:
            self.call(invocation)


@events.init.add_listener
def _attach_target_stats(environment, **_kw) -> None:
    """Every process counts the requests of a traffic mix per target (workers ship theirs to the master)."""
    TargetStats.for_environment(environment)


@events.init.add_listener
def _attach_loop_lag(environment, **_kw) -> None:
    """Every process samples its event loop's lag while a test runs (workers ship theirs to the master)."""
    LoopLagMonitor.for_environment(environment)


@events.init.add_listener
def _attach_worker_waits(environment, **_kw) -> None:
    """Workers ship their share of time waiting for a CPU to the master, which judges the one waiting most."""
    WorkerWaits.for_environment(environment)


@events.init.add_listener
def _attach_report_watermarks(environment, **_kw) -> None:
    """Workers say how far their reports are complete (and report every second): the master appends each
    second of its timeline as soon as all of them have (sm_locust.record.watermark)."""
    ReportWatermarks.for_environment(environment)
    report_every_second(environment)


@events.init.add_listener
def _attach_worker_tracker(environment, **_kw) -> None:
    """Distributed runs: record connected and lost workers in summary.json (sm_locust.record.workers)."""
    attach(environment)


@events.init.add_listener
def _fresh_loop_clock(environment, **_kw) -> None:
    """Bring gevent's loop clock up to date before Locust arms its `--run-time` timer.

    Why: Locust arms `-t` with `gevent.spawn_later`, which counts from the loop's cached time, and the
    loop has not run since before the locustfile's imports and the checks above (about 0.8 s on a
    2-core machine, more under load). The timer then fired that much early: `-t 1s` measured 0.28 s
    of load, `-t 10s` about 9.2 s. Registered last, so the time our other `init` listeners take is
    included."""
    gevent.get_hub().loop.update_now()
