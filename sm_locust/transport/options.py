"""The transport options: which client sends (`--transport`) and which API is called (`--stream`,
`--async-input-location`), and whether an async call waits for its result (`--async-result`,
`--async-poll-ms`, `--async-timeout`; transport/asyncwait.py, transport/asyncnotify.py, docs/async.md).

The AWS clients an async wait uses (S3, SQS) are built when a Locust process starts (its `init`,
`prepare_async_clients`), before any user is spawned, and kept per environment: the users' `on_start`
only picks them up. Built there, as the test started, boto3's import and its service model's parse
held a worker's gevent loop for seconds on a loaded machine (no heartbeat: the master counted it
missing).

Both transports fire the same entries with the same names and failure texts, so a run reads the
same whichever is chosen; what differs is the client CPU per call (docs/transport.md, the bench).
The names are those of the `sm_locust.transport.TRANSPORTS` registry (`fast`, the default;
`boto3`); `SageMakerUser` builds its client from `transport` (class attribute, overridden by
`--transport` / `SM_LOCUST_TRANSPORT`) unless a subclass sets `client_cls` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sm_locust.aws.clients import AwsClient, Purpose
from sm_locust.aws.clients import client as aws_client
from sm_locust.config.options import Options, OptionSpec
from sm_locust.errors import UsageError
from sm_locust.plateau.asyncresults import DEFAULT_FIRST_POLL_MS, DEFAULT_MAX_POLL_MS, DEFAULT_POLL_FACTOR, PollSchedule
from sm_locust.transport import DEFAULT_TRANSPORT, TRANSPORTS
from sm_locust.transport.asyncnotify import RECEIVE_WAIT_S, NotificationWaiter, listener_for
from sm_locust.transport.asyncwait import AsyncLedger, OutputFetcher, ResultWaiter
from sm_locust.transport.contract import DEFAULT_POOL_SIZE

ASYNC_RESULTS = ("none", "s3")
SQS_PREFIX = "sqs:"
DEFAULT_ASYNC_TIMEOUT_S = 900.0
"""SageMaker's default InvocationTimeoutSeconds (docs/facts.md): past it the endpoint gives up too."""


def async_result_mode(text: str) -> str:
    """`--async-result`'s text -> `none`, `s3` or `sqs:QUEUE_URL` (an http(s) queue URL)."""
    value = text.strip()
    if value.lower() in ASYNC_RESULTS:
        return value.lower()
    if value.lower().startswith(SQS_PREFIX):
        url = value[len(SQS_PREFIX):].strip()
        if not url.startswith(("https://", "http://")) or len(url) > 2048 or any(c.isspace() for c in url):
            raise UsageError(f"sqs: needs the queue's URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME), got {url!r}")
        return SQS_PREFIX + url
    raise UsageError(f"{value!r} is unknown; choose one of: none, s3, sqs:QUEUE_URL")


def sqs_queue_url(mode: str) -> str | None:
    """The queue URL of an `sqs:QUEUE_URL` mode; None for the others."""
    return mode[len(SQS_PREFIX):] if mode.startswith(SQS_PREFIX) else None


OPTIONS: list[OptionSpec] = [
    OptionSpec("--transport", "SM_LOCUST_TRANSPORT", DEFAULT_TRANSPORT,
               "client that sends the requests: fast (signed geventhttpclient, ~10x less client CPU per call) "
               "or boto3 (the reference: botocore end to end); both report the same entries and error names",
               choices=tuple(TRANSPORTS)),
    OptionSpec("--stream", "SM_LOCUST_STREAM", False,
               "call InvokeEndpointWithResponseStream instead of InvokeEndpoint: entries TTFT, InterChunk and "
               "InvokeEndpointWithResponseStream", bool),
    OptionSpec("--async-input-location", "SM_LOCUST_ASYNC_INPUT_LOCATION", "",
               "call InvokeEndpointAsync for this S3 input URI instead of InvokeEndpoint (times the 202 acceptance, "
               "not the result); the payload's headers are used, its body is not sent"),
    OptionSpec("--async-result", "SM_LOCUST_ASYNC_RESULT", "none",
               "with --async-input-location: none (time the 202 acceptance), s3 (each call waits for its "
               "OutputLocation or FailureLocation object, polled with HeadObject; the entry is the time to result) "
               "or sqs:QUEUE_URL (each call waits for the endpoint's SNS success / error notification, read from "
               "that queue subscribed to both topics; nothing is polled in S3)",
               convert=async_result_mode),
    OptionSpec("--async-poll-ms", "SM_LOCUST_ASYNC_POLL_MS", DEFAULT_FIRST_POLL_MS,
               f"with --async-result s3: the first HeadObject poll this many ms after the acceptance, then each "
               f"wait x{DEFAULT_POLL_FACTOR:g} up to {DEFAULT_MAX_POLL_MS:g} ms (the time to result is late by at "
               "most the poll resolution: the wait before the poll that found it plus the HeadObjects' own "
               "time, measured per call)", float, minimum=1, maximum=DEFAULT_MAX_POLL_MS),
    OptionSpec("--async-timeout", "SM_LOCUST_ASYNC_TIMEOUT", DEFAULT_ASYNC_TIMEOUT_S,
               "with --async-result s3 or sqs: seconds from the acceptance before a call with no result fails as "
               "AsyncTimeout (default 900 = SageMaker's default InvocationTimeoutSeconds)", float,
               above=0, maximum=86400),
    OptionSpec("--async-fetch", "SM_LOCUST_ASYNC_FETCH", False,
               "with --async-result s3 or sqs: read each result's OutputLocation object (GetObject) and validate it "
               "as a synchronous answer is (--validate-response); a missing or invalid one is the call's failure "
               "(its time to result is unchanged)", bool),
]


def check_async_result(options: Options) -> None:
    """`--async-result s3|sqs:...` needs the input object: a one-line UsageError before the test otherwise."""
    if options.async_result != "none" and not options.async_input_location:
        mode = "sqs" if sqs_queue_url(options.async_result) else options.async_result
        raise UsageError(f"--async-result {mode} needs --async-input-location s3://bucket/key (the input object)")
    if options.async_fetch and options.async_result == "none":
        raise UsageError("--async-fetch reads each result's output: add --async-result s3 or sqs:QUEUE_URL")


@dataclass(frozen=True)
class AsyncClientSpec:
    """One AWS client an async wait uses: its service and what it is built with (the cache's key)."""

    service: str
    region: str | None
    profile: str | None
    pool_size: int | None = None
    read_timeout: float | None = None

    def build(self) -> AwsClient:
        return aws_client(self.service, Purpose.CONTROL, region=self.region, profile=self.profile, keys=None,
                          pool_size=self.pool_size, read_timeout=self.read_timeout)


def async_client_specs(options: Options, region: str | None, profile: str | None,
                       pool_size: int = DEFAULT_POOL_SIZE) -> tuple[AsyncClientSpec, ...]:
    """The AWS clients `--async-result` needs: SQS for `sqs:QUEUE_URL` (its long poll's read timeout), S3
    for `s3` (HeadObject polls) and for `--async-fetch`; none for `none`."""
    if options.async_result == "none":
        return ()
    region, profile = region or None, profile or None
    sqs = AsyncClientSpec("sqs", region, profile, read_timeout=RECEIVE_WAIT_S + 30)
    s3 = AsyncClientSpec("s3", region, profile, pool_size=pool_size)
    if sqs_queue_url(options.async_result) is None:
        return (s3,)
    return (sqs, s3) if options.async_fetch else (sqs,)


PREPARED_ATTRIBUTE = "sm_locust_async_clients"
"""The environment's async AWS clients: {AsyncClientSpec: the client}."""


def _prepared(environment: object) -> dict[AsyncClientSpec, AwsClient]:
    prepared = getattr(environment, PREPARED_ATTRIBUTE, None)
    if prepared is None:
        prepared = {}
        setattr(environment, PREPARED_ATTRIBUTE, prepared)
    return prepared


def prepare_async_clients(environment: object, options: Options, region: str | None, profile: str | None,
                          pool_size: int = DEFAULT_POOL_SIZE) -> tuple[AsyncClientSpec, ...]:
    """Build the AWS clients `options` will wait with (at a Locust process's `init`, before users spawn:
    module doc); the specs built."""
    check_async_result(options)
    specs = async_client_specs(options, region, profile, pool_size)
    for spec in specs:
        async_aws_client(environment, spec)
    return specs


def async_aws_client(environment: object, spec: AsyncClientSpec) -> AwsClient:
    """The environment's client for `spec`: the one prepared, else built now and kept."""
    prepared = _prepared(environment)
    built = prepared.get(spec)
    if built is None:
        built = prepared[spec] = spec.build()
    return built


def async_waiter(client: AwsClient, options: Options) -> ResultWaiter | NotificationWaiter | None:
    """The waiter `--async-result s3` (HeadObject polls) or `sqs:QUEUE_URL` (notifications) gives
    `client`'s async calls (one per client, its AWS clients those of its environment: module doc), or
    None (`none`: the acceptance is timed)."""
    check_async_result(options)
    if options.async_result == "none":
        return None
    key = (options.async_result, options.async_poll_ms, options.async_timeout, options.async_fetch)
    cached = getattr(client, "_sm_locust_async_waiter", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    settings, environment = client.settings, client.environment
    ledger = AsyncLedger.for_environment(environment)
    queue_url = sqs_queue_url(options.async_result)
    specs = {spec.service: spec for spec in async_client_specs(options, settings.region, settings.profile,
                                                                settings.pool_size)}
    waiter: ResultWaiter | NotificationWaiter
    if queue_url is not None:
        listener = listener_for(queue_url, lambda: async_aws_client(environment, specs["sqs"]))
        waiter = NotificationWaiter(listener, options.async_timeout, ledger)
    else:
        waiter = ResultWaiter(async_aws_client(environment, specs["s3"]), PollSchedule(first_ms=options.async_poll_ms),
                              options.async_timeout, ledger)
    if options.async_fetch:
        waiter.fetcher = OutputFetcher(async_aws_client(environment, specs["s3"]))
    client._sm_locust_async_waiter = (key, waiter)
    return waiter


def operation(client: AwsClient, options: Options) -> Callable:
    """The client method the default locustfile calls per invocation, from the parsed options:
    `invoke_stream` with `--stream` (it wins over `--async-input-location`), `invoke_async` with
    `--async-input-location`, else `invoke`."""
    location = options.async_input_location
    if options.stream:
        return client.invoke_stream
    if location:
        waiter = async_waiter(client, options)
        if waiter is None:
            return lambda invocation, name=None, **kw: client.invoke_async(invocation, location, name, **kw)
        return lambda invocation, name=None, **kw: client.invoke_async(invocation, location, name, waiter=waiter,
                                                                      **kw)
    return client.invoke
