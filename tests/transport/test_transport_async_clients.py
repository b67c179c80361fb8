"""The AWS clients an async wait uses (transport/options.py): which ones `--async-result` needs, and that
a Locust process builds them at `init`, before any user exists, so that a user's `on_start` only picks
them up: none is built as the test starts (where it held a worker's loop, and its heartbeats, for seconds).
"""

from __future__ import annotations

from types import SimpleNamespace

import locust  # noqa: F401  (gevent patching before boto3)
from locust.env import Environment

from sm_locust.config.options import parse_options
from sm_locust.locustfiles.sagemaker import _prepare_async_clients
from sm_locust.transport.asyncnotify import NotificationWaiter
from sm_locust.transport.asyncwait import AsyncLedger, ResultWaiter
from sm_locust.transport.contract import DEFAULT_POOL_SIZE, ClientSettings
from sm_locust.transport.options import AsyncClientSpec, async_client_specs, async_waiter, prepare_async_clients

QUEUE = "http://127.0.0.1:9/123456789012/{}"


def _options(result: str, fetch: bool = False):
    return parse_options({"async_result": result, "async_input_location": "s3://in/x", "async_fetch": fetch})


def test_the_clients_each_mode_needs():
    sqs = AsyncClientSpec("sqs", "eu-west-1", None, read_timeout=31)
    s3 = AsyncClientSpec("s3", "eu-west-1", None, pool_size=7)
    assert async_client_specs(_options("none"), "eu-west-1", "", 7) == ()
    assert async_client_specs(_options("s3"), "eu-west-1", "", 7) == (s3,)
    assert async_client_specs(_options("s3", fetch=True), "eu-west-1", "", 7) == (s3,)
    assert async_client_specs(_options(f"sqs:{QUEUE.format('a')}"), "eu-west-1", "", 7) == (sqs,)
    assert async_client_specs(_options(f"sqs:{QUEUE.format('a')}", fetch=True), "eu-west-1", "", 7) == (sqs, s3)


class Builds:
    """Stands in for `AsyncClientSpec.build`: each build recorded with the users there were then."""

    def __init__(self, env: Environment | None = None) -> None:
        self.env = env
        self.made: list[tuple[AsyncClientSpec, int | None]] = []

    def __call__(self, spec: AsyncClientSpec):
        runner = self.env.runner if self.env is not None else None
        self.made.append((spec, runner.user_count if runner is not None else None))
        return SimpleNamespace(spec=spec)


def _client(env: Environment, pool_size: int = DEFAULT_POOL_SIZE):
    """What `async_waiter` reads of a SageMakerClient (a user's, by default sized as `SageMakerUser`'s): its
    settings and its environment."""
    return SimpleNamespace(settings=ClientSettings(region="us-east-1", pool_size=pool_size), environment=env)


def test_the_locustfile_builds_them_at_init_and_on_start_only_picks_them_up(monkeypatch):
    queue = QUEUE.format("init")
    env = Environment(parsed_options=SimpleNamespace(
        endpoint_name="ep", endpoint_url="http://127.0.0.1:9", region="us-east-1", async_result=f"sqs:{queue}",
        async_input_location="s3://in/x", async_fetch=True))
    env.create_local_runner()
    builds = Builds(env)
    monkeypatch.setattr(AsyncClientSpec, "build", lambda spec: builds(spec))
    _prepare_async_clients(env)  # Locust's init
    assert builds.made == [(AsyncClientSpec("sqs", "us-east-1", None, read_timeout=31), 0),  # no user yet
                           (AsyncClientSpec("s3", "us-east-1", None, pool_size=DEFAULT_POOL_SIZE), 0)]
    waiter = async_waiter(_client(env), _options(f"sqs:{queue}", fetch=True))  # a user's on_start
    assert isinstance(waiter, NotificationWaiter)
    assert waiter.listener.sqs.spec.service == "sqs" and waiter.fetcher.s3.spec.service == "s3"
    assert len(builds.made) == 2  # once each, at init with no user yet; on_start built none
    assert AsyncLedger.for_environment(env).wanted  # summary.json's `async` is written even if no call is made


def test_the_clients_are_kept_per_environment(monkeypatch):
    builds = Builds()
    monkeypatch.setattr(AsyncClientSpec, "build", lambda spec: builds(spec))
    env = Environment()
    prepare_async_clients(env, _options("s3"), "us-east-1", None)
    first = async_waiter(_client(env), _options("s3"))
    other = async_waiter(_client(env, pool_size=DEFAULT_POOL_SIZE + 40), _options("s3"))  # another pool: its own
    assert isinstance(first, ResultWaiter) and isinstance(other, ResultWaiter)
    assert [spec.pool_size for spec, _ in builds.made] == [DEFAULT_POOL_SIZE, DEFAULT_POOL_SIZE + 40]
    assert first.s3 is async_waiter(_client(env), _options("s3", fetch=True)).s3  # kept per environment
    assert async_waiter(_client(Environment()), _options("s3")).s3 is not first.s3  # another environment's own
