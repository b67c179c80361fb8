"""`sm-locust serve`: gunicorn in this process, serving the local endpoint until SIGINT/SIGTERM.

Apart from `server.py` (which starts it as a child process: `LocalEndpoint`, used by tests, the
demo and local sweeps) so that a process that only manages an endpoint never loads the endpoint's
application, gunicorn or numpy (about 0.35 s of imports, measured); this module imports them all at
its top. The master holds what every worker shares (counters, serverless slots, the fleet, the
multi-model state) and the threads that only it runs (the CloudWatch publisher, the scaling loop).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from sm_locust.endpoint.app import EndpointApp
from sm_locust.endpoint.batching import batch_service_s
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.fleet import shared_fleet
from sm_locust.endpoint.fleet_control import controller_for
from sm_locust.endpoint.metrics import publisher_for
from sm_locust.endpoint.server import LISTEN_FD_ENV, check_port_free
from sm_locust.endpoint.serverless import shared_slots
from sm_locust.endpoint.targets import loaded_models_reader, shared_state
from sm_locust.errors import RunError


def quiet_gevent_worker():
    """gunicorn's gevent worker, stopped by SIGINT / SIGQUIT as by SIGTERM (its loop ends, then it
    exits): gunicorn's own handler raises SystemExit in a greenlet, which gevent re-raised into the
    interpreter's shutdown and printed as a traceback on a terminal's Ctrl+C (every try, measured:
    4 of 4 with `serve --serverless-memory-mb 2048`, 1 of 1 without)."""
    from gunicorn.workers.ggevent import GeventWorker  # lazy: gevent, only in the process that serves

    class QuietGeventWorker(GeventWorker):
        def handle_quit(self, sig, frame):
            self.alive = False

    return QuietGeventWorker


class SpawnFirstArbiter(Arbiter):
    """gunicorn's master, which starts its own threads' work (`after_first_spawn`) once the first workers
    are forked, never before. The CloudWatch publisher imports boto3 on its first publication: a worker
    forked while that import runs in the master inherits a half-imported module (it failed to boot:
    "partially initialized module 'boto3'"), and one forked after it inherits urllib3 and ssl imported
    before gevent patched them (RecursionError in ssl): what the master imports, its gevent workers
    must not. gunicorn starts its control server after the first spawn for the same reason."""

    _spawned_once = False

    def manage_workers(self) -> None:
        super().manage_workers()
        if not self._spawned_once:
            self._spawned_once = True
            self.after_first_spawn()

    def after_first_spawn(self) -> None:
        """The master's own work, started once the first workers are forked."""


def serve_forever(config: EndpointConfig) -> int:
    """Run gunicorn in this process until SIGINT/SIGTERM; returns the exit code: 128 + the signal's
    number (130 / 143) when one stopped it, as for every sm-locust command (gunicorn itself exits 0)."""
    config.validate()
    inherited = os.environ.pop(LISTEN_FD_ENV, "")  # LocalEndpoint bound the port and passed the socket
    if not inherited:
        check_port_free(config.host, config.port)
    counters = SharedCounters()
    slots = shared_slots(config)  # serverless emulation: one instance table for every worker (endpoint/serverless.py)
    fleet = shared_fleet(config)  # --instances N: the instances every worker routes to (endpoint/fleet.py)
    controller = controller_for(config, fleet)  # ... and the master's target-tracking loop (endpoint/fleet_control.py)
    shared = shared_state(config)  # --multi-model's cache / --inference-components' copies, for every worker
    publisher = publisher_for(config, counters, loaded_models_reader(config, shared))  # only with --cloudwatch-url
    started_at = time.time()
    capacity = ""
    if config.max_concurrency and config.service_time_ms:
        capacity = f", capacity ~{config.max_concurrency / (config.service_time_ms / 1000):.0f} req/s"
        if config.max_batch_size > 1:
            full = batch_service_s(config.service_time_ms, config.batch_item_cost, config.max_batch_size)
            capacity = (f", capacity ~{config.max_concurrency * config.max_batch_size / full:.0f} req/s in full "
                        f"batches of {config.max_batch_size}")

    def when_ready(server) -> None:
        host, port = server.LISTENERS[0].sock.getsockname()[:2]
        print(f"sm-locust endpoint ready on http://{host}:{port} (workers={config.workers}, threads={config.threads}"
              f"{capacity}); Ctrl+C stops it", flush=True)
        if publisher is not None:  # a thread in the master; workers are forked without it
            print(f"sm-locust endpoint: publishing CloudWatch metrics to {config.cloudwatch_url} every "
                  f"{config.metrics_interval_s:g} s (EndpointName={publisher.endpoint_name}, "
                  f"VariantName={publisher.variant_name})", flush=True)
        if controller is not None:  # emulated second 0 is now
            controller.start()

    def on_exit(server) -> None:  # master only: the last partial window
        if controller is not None:
            controller.stop()
        if publisher is not None:
            publisher.stop()

    settings = {
        "bind": (f"fd://{int(inherited)}" if inherited
                 else f"[{config.host}]:{config.port}" if ":" in config.host else f"{config.host}:{config.port}"),
        "workers": config.workers,
        "worker_class": "gthread" if config.threads > 1 else quiet_gevent_worker(),
        "threads": config.threads,
        "worker_connections": 2000,
        "keepalive": 75,
        "timeout": 120,
        "graceful_timeout": 3,
        "accesslog": None,
        "loglevel": "warning",
        "when_ready": when_ready,
        "on_exit": on_exit,
        "proc_name": "sm-locust-endpoint",
    }

    class _Arbiter(SpawnFirstArbiter):
        """gunicorn's master, remembering which signal stopped it (it exits 0 for any)."""
        stopped_by: int | None = None

        def after_first_spawn(self) -> None:
            if publisher is not None:
                publisher.start()

        def handle_term(self):
            self.stopped_by = signal.SIGTERM
            super().handle_term()

        def handle_int(self):
            self.stopped_by = signal.SIGINT
            super().handle_int()

        def handle_hup(self):
            # stops as on SIGTERM instead of gunicorn's reload: a reload re-reads no configuration (it is the
            # command line) and would reset the emulation's state (counters, caches); a hang-up means the
            # terminal that started it is gone
            self.stopped_by = signal.SIGHUP
            super().handle_term()

    class _Gunicorn(BaseApplication):
        def load_config(self):
            for key, value in settings.items():
                self.cfg.set(key, value)

        def load(self):
            return EndpointApp(config, counters, started_at, slots, shared, fleet_state=fleet)

        def run(self):
            self.arbiter = _Arbiter(self)
            try:
                self.arbiter.run()
            except RuntimeError as exc:  # what BaseApplication.run prints and exits 1 for
                raise RunError(f"the local endpoint could not start: {exc}") from None

    app = _Gunicorn()
    try:
        app.run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    stopped_by = getattr(getattr(app, "arbiter", None), "stopped_by", None)
    if stopped_by is not None and code == 0:  # stopped by a signal: 128 + its number, as every sm-locust command
        print(f"sm-locust: the endpoint stopped on {signal.Signals(stopped_by).name}", file=sys.stderr, flush=True)
        return 128 + stopped_by
    return code
