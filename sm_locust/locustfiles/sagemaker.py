"""The default sm-locust locustfile: invoke one SageMaker endpoint with a payload, as fast as it can.

    locust -f locustfiles/sagemaker.py --endpoint-name my-endpoint --payload body.json

Options (`--endpoint-name`, `--endpoint-url`, `--region`, `--payload`, `--content-type`, `--accept`,
...) are Locust options: they show and can be edited in the web UI, and can be set as `SM_LOCUST_*`
environment variables or in locust.conf. With `--sm-out DIR` the run's summary.json and
timeline.json are written there (master or local runner).
"""

from __future__ import annotations

import logging

from locust import events, task
from locust.runners import WorkerRunner

from sm_locust.errors import SmLocustError
from sm_locust.options import SageMakerSettings, register_options
from sm_locust.payloads import load_payloads
from sm_locust.recorder import RunRecorder
from sm_locust.users import SageMakerUser

__all__ = ["InvokeEndpointUser"]
log = logging.getLogger("sm_locust")


@events.init_command_line_parser.add_listener
def _register_options(parser, **_kw) -> None:
    register_options(parser)


@events.init.add_listener
def _attach_recorder(environment, **_kw) -> None:
    if isinstance(environment.runner, WorkerRunner) or environment.parsed_options is None:
        return
    settings = SageMakerSettings.from_options(environment.parsed_options)
    environment.sm_locust_recorder = RunRecorder(environment, settings.sm_out or None, endpoint=settings.endpoint_name,
                                                 progress_every_s=settings.sm_progress)


@events.test_start.add_listener
def _load_payloads(environment, **_kw) -> None:
    """Encode the payloads once per process, before any user sends (re-read on each swarm)."""
    settings = SageMakerSettings.from_options(environment.parsed_options)
    try:
        settings.validate()
        environment.sm_locust_payloads = load_payloads(settings.payload, content_type=settings.content_type or None,
                                                       **settings.headers())
    except SmLocustError as exc:
        log.error("sm-locust: %s", exc)
        environment.sm_locust_payloads = None
        if environment.runner is not None:
            environment.process_exit_code = exc.exit_code
            environment.runner.quit()
        return
    recorder = getattr(environment, "sm_locust_recorder", None)
    if recorder is not None:
        recorder.endpoint = settings.endpoint_name
        recorder.extra["payload"] = {"source": settings.payload, **environment.sm_locust_payloads.sizes()}


class InvokeEndpointUser(SageMakerUser):
    """Sends the payload pool's invocations to `--endpoint-name`, one after another."""

    @task
    def invoke_endpoint(self) -> None:
        pool = self.environment.sm_locust_payloads
        if pool is not None:
            self.client.invoke(pool.next())


@events.init.add_listener
def _attach_worker_tracker(environment, **_kw) -> None:
    """Distributed runs: record connected and lost workers in summary.json (sm_locust.workers)."""
    from sm_locust.workers import attach

    attach(environment)
