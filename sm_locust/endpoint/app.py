"""The local endpoint's WSGI application: SageMaker Runtime API and container contract in one.

Routes (all on one server):
- `POST /endpoints/{EndpointName}/invocations`: InvokeEndpoint exactly as boto3 calls it; the
  answer carries `x-Amzn-Invoked-Production-Variant`.
- `POST /endpoints/{EndpointName}/invocations-response-stream` and `/async-invocations`:
  InvokeEndpointWithResponseStream and InvokeEndpointAsync (sm_locust/endpoint/streaming.py).
- `GET /ping`, `POST /invocations`: the SageMaker inference container contract.
- `GET /_sm_locust/stats`: the server-side counters (what the server saw), for tests and demos.

Errors use the exact form botocore parses (docs/facts.md): status code, `x-amzn-ErrorType` header
with the code before `:`, and a JSON body with `message` (ModelError adds OriginalStatusCode,
OriginalMessage and LogStreamArn), so real boto3 clients see real error codes. As on SageMaker,
ValidationError (400) is what the API itself refuses (a body over 6 MB, a bad header value, an
unknown endpoint name); a request the model rejects (a body that does not fit its schema, an
unsupported Content-Type or Accept, an empty body) is a `ModelError` (424) carrying the
container's own status and message (`reject`).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from urllib.parse import unquote

import orjson

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.endpoint import (
    asyncqueue,
    batching,
    codecs,
    control,
    fleet,
    llm,
    serverless,
    streaming,
    targets,
    triton,
)
from sm_locust.endpoint.components import COMPONENT_ENVIRON
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.faults import (
    DROP,
    ERRORS,
    INJECTED_MODEL_FAILURE,
    EndpointConfig,
    FaultPlan,
    model_error_message,
    parse_custom_attributes,
)
from sm_locust.endpoint.model import RankingModel

ACCOUNT = "000000000000"
STATS_PATH = "/_sm_locust/stats"


def _status_line(code: int) -> str:
    reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 424: "Failed Dependency",
               429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
    return f"{code} {reasons.get(code, 'Error')}"


class EndpointApp:
    """One instance per worker process (built after gunicorn forks and gevent patches)."""

    def __init__(self, config: EndpointConfig, counters: SharedCounters | None = None, started_at: float | None = None,
                 serverless_slots: serverless.SlotTable | None = None, shared_targets=None,
                 fleet_state: fleet.SharedFleet | None = None):
        self.config = config
        self.counters = counters or SharedCounters()
        self.started_at = started_at or time.time()
        self.model = RankingModel()
        self.plan = FaultPlan(config)
        slots = config.per_worker_concurrency if config.fleet is None else 0  # a fleet: slots per instance (fleet.py)
        self.slots = threading.BoundedSemaphore(slots) if slots else None
        self.triton = triton.model_for(config)  # sm-locust serve --protocol triton (endpoint/triton.py)
        self.batcher = None  # dynamic batching (--max-batch-size > 1): the batcher holds the slot per batch
        if config.max_batch_size > 1:
            runner = (batching.sleeping_runner(self.model, config.service_time_ms, config.batch_item_cost)
                      if self.triton is None else  # Triton's batcher: batches of rows, one model call each
                      batching.sleeping_runner(self.triton, config.service_time_ms, config.batch_item_cost,
                                               predict=triton.predict_batch, size=triton.rows_of))
            self.batcher = batching.Batcher(
                config.max_batch_size, config.max_batch_delay_ms / 1000.0, runner,
                self.slots, on_batch=lambda n: self.counters.add(batches=1))
        # sm-locust serve --llm: a continuous-batching LLM (endpoint/llm.py), counting its prefill
        self.llm = llm.engine_for(config, self.counters)
        # sm-locust serve --serverless-*: throttles above MaxConcurrency, cold instances after idle
        # (endpoint/serverless.py)
        self.serverless = serverless.emulator_for(config, self.counters, serverless_slots)
        self.service_s = serverless.service_s(config)  # scaled by the memory size when serverless
        self._cold = config.cold_start_ms > 0 and self.serverless is None  # serverless: per instance instead
        self._cold_lock = threading.Lock()
        # one model, --multi-model (TargetModel) or --inference-components (endpoint/targets.py)
        self.targets = targets.router_for(config, self.counters, shared_targets)
        self.fleet = fleet.router_for(config, fleet_state)  # sm-locust serve --instances N (endpoint/fleet.py)
        self.async_queue = (asyncqueue.AsyncQueue(config.async_inference, self)  # serve --async (asyncqueue.py)
                            if config.async_inference is not None else None)

    # -- WSGI entry point -------------------------------------------------------------------
    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        if path == "/ping":
            if method != "GET":
                return self._not_allowed(start_response)
            return self._respond(start_response, 200, b"", "text/plain")
        if path == control.SCALING_PATH:  # the fleet emulation's own log (endpoint/control.py)
            return control.scaling(self, start_response)
        if path == "/" and environ.get("HTTP_X_AMZ_TARGET"):  # a control-plane call: DescribeEndpoint
            if method != "POST":
                return self._not_allowed(start_response)
            return control.answer(self, environ, start_response)
        if path == STATS_PATH:
            stats = {**self.counters.snapshot(), **self.targets.stats()}
            return self._respond(start_response, 200, orjson.dumps(stats), "application/json")
        if path == "/invocations":
            if method != "POST":
                return self._not_allowed(start_response)
            return self._invoke(environ, start_response, None)
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "endpoints" and parts[3] == "invocations":
            if method != "POST":
                return self._not_allowed(start_response)
            return self._invoke(environ, start_response, unquote(parts[2]))
        if len(parts) == 4 and parts[1] == "endpoints" and parts[3] in streaming.ROUTES:  # stream, async
            if method != "POST":
                return self._not_allowed(start_response)
            return streaming.ROUTES[parts[3]](self, environ, start_response, unquote(parts[2]))
        return self._error(start_response, "UnknownOperationException", f"no route for {method} {path}", status=404)

    # -- invocation ---------------------------------------------------------------------------
    def read_request(self, environ, start_response, endpoint_name: str | None):
        """Checks every invocation route shares: (body, attributes header, attributes), or the
        error response (a list) to return. Counts the request."""
        self.counters.add(requests=1)
        cfg = self.config
        if endpoint_name is not None and cfg.endpoint_name and endpoint_name != cfg.endpoint_name:
            return self._error(start_response, "ValidationError",
                               f"Endpoint {endpoint_name} of account {ACCOUNT} not found.")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY_BYTES:
            return self._error(start_response, "ValidationError",
                               f"Request body is {length} bytes; the maximum is {MAX_BODY_BYTES}.")
        body = environ["wsgi.input"].read(length) if length else b""
        header = environ.get("HTTP_X_AMZN_SAGEMAKER_CUSTOM_ATTRIBUTES")
        return body, header, parse_custom_attributes(header)

    def apply_faults(self, environ, start_response, attributes: dict):
        """The fault plan's decision applied (its added latency slept): (None, added latency in ms)
        to go on, else (the error response to return, added latency)."""
        cfg = self.config
        not_ready = cfg.not_ready_s > 0 and time.time() - self.started_at < cfg.not_ready_s
        decision = self.plan.decide(attributes, not_ready)
        if decision.added_latency_ms:
            time.sleep(decision.added_latency_ms / 1000.0)
        if decision.error == DROP:
            self.counters.add(dropped=1, DropConnection=1)
            return self._drop(environ, start_response), decision.added_latency_ms
        if decision.error:
            if decision.error != "ValidationError":
                self.counters.add(invocations=1)
            return self._error(start_response, decision.error, decision.message), decision.added_latency_ms
        return None, decision.added_latency_ms

    def _invoke(self, environ, start_response, endpoint_name: str | None):
        arrived = time.perf_counter()
        read = self.read_request(environ, start_response, endpoint_name)
        if isinstance(read, list):
            return read
        body, attributes_header, attributes = read
        rejected = self.targets.check(environ, endpoint_name)  # TargetModel, InferenceComponentName (targets.py)
        if rejected:
            return self._error(start_response, *rejected)
        content_type = environ.get("CONTENT_TYPE")
        accept = environ.get("HTTP_ACCEPT")
        variant = environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT") or self.config.variant_name
        refused, added_latency_ms = self.apply_faults(environ, start_response, attributes)
        if refused is not None:
            return refused
        if self.llm is not None:  # sm-locust serve --llm (endpoint/llm.py); its adapters' loads (--llm-adapters)
            headers = [("x-Amzn-Invoked-Production-Variant", variant)]
            return self.targets.serve(environ, start_response, lambda respond: llm.invoke(
                self, self.llm, respond, body, headers, environ.get(COMPONENT_ENVIRON)), self._error)
        answer = (start_response, body, content_type, accept, attributes_header, variant, arrived, added_latency_ms)
        if self.targets.serves:  # the model's load (--multi-model) or a component's copy (--inference-components)
            return self.targets.serve(environ, start_response, lambda respond, service_s=None: self._answer(
                respond, *answer[1:], service_s=service_s), self._error)
        if self.serverless is not None:  # endpoint/serverless.py: throttle, or an instance (cold after idle)
            return self.serverless.serve(self, start_response, lambda: self._answer(*answer))
        if self.fleet is not None:  # endpoint/fleet.py: an instance in service, its queue, its slots
            return self.fleet.serve(lambda: self._answer(*answer))
        return self._answer(*answer)

    def _answer(self, start_response, body: bytes, content_type: str | None, accept: str | None,
                attributes_header: str | None, variant: str, arrived: float, added_latency_ms: float,
                service_s: float | None = None):
        """The model's part of an invocation: decode, predict, encode, count."""
        # ModelLatency covers what happens in the container, as on SageMaker: decoding, waiting
        # for a concurrency slot, inference and encoding. OverheadLatency is the rest.
        model_start = time.perf_counter()
        if self.triton is not None:  # sm-locust serve --protocol triton: Triton's reading, model and answer
            try:
                request = triton.parse_request(self.triton, body, content_type)
                if self.batcher is not None:
                    self._cold_start()
                    outputs = self.batcher.submit(request, size=request.rows)
                else:
                    outputs = self._hold_slot(lambda: triton.predict_batch(self.triton, [request])[0],
                                              self._service_s(service_s, request.rows))
                out, out_type = triton.encode(self.triton, request, outputs)
            except codecs.CodecError as exc:
                return self.reject(start_response, exc)
            return self._succeed(start_response, out, out_type, attributes_header, variant, arrived, model_start,
                                 added_latency_ms, request.rows)
        try:
            feat_ids, feat_vals = self.decode(body, content_type, attributes_header)
        except codecs.CodecError as exc:
            return self.reject(start_response, exc)

        if self.batcher is not None:
            self._cold_start()
            probabilities = self.batcher.submit((feat_ids, feat_vals))
        else:
            probabilities = self._predict(feat_ids, feat_vals, service_s)
        try:
            out, out_type = codecs.encode_response(probabilities, accept)
        except codecs.CodecError as exc:
            return self.reject(start_response, exc)
        return self._succeed(start_response, out, out_type, attributes_header, variant, arrived, model_start,
                             added_latency_ms, len(feat_ids))

    def _succeed(self, start_response, out: bytes, out_type: str, attributes_header: str | None, variant: str,
                 arrived: float, model_start: float, added_latency_ms: float, rows: int):
        """Count a successful invocation (its latencies, the rows the model decoded) and answer it."""
        model_us = (time.perf_counter() - model_start) * 1e6
        total_us = (time.perf_counter() - arrived) * 1e6
        overhead_us = max(0.0, total_us - model_us - added_latency_ms * 1000.0)
        self.counters.add(invocations=1, successes=1, rows=rows,
                          model_latency_us_sum=model_us + added_latency_ms * 1000.0,
                          overhead_latency_us_sum=overhead_us)
        self.counters.record_max("model_latency_us_max", model_us + added_latency_ms * 1000.0)
        headers = [("x-Amzn-Invoked-Production-Variant", variant)]
        if attributes_header:
            headers.append(("X-Amzn-SageMaker-Custom-Attributes", attributes_header))
        return self._respond(start_response, 200, out, out_type, headers)

    @staticmethod
    def decode(body: bytes, content_type: str | None, attributes_header: str | None):
        """The model's input from a request body; CodecError (with the container's status) when it does not fit."""
        if not body:
            raise codecs.CodecError("Request body is empty.")
        return codecs.decode_request(body, content_type, attributes_header)

    def reject(self, start_response, exc: codecs.CodecError):
        """The model refused the request: the caller gets ModelError 424 carrying the container's answer
        (OriginalStatusCode, OriginalMessage), as on SageMaker. It reached the model: an invocation."""
        self.counters.add(invocations=1)
        return self._error(start_response, "ModelError", model_error_message(exc.status, str(exc)),
                           original=(exc.status, str(exc)))

    def _cold_start(self) -> None:
        if self._cold:
            with self._cold_lock:
                if self._cold:
                    time.sleep(self.config.cold_start_ms / 1000.0)
                    self._cold = False

    def _predict(self, feat_ids, feat_vals, service_s: float | None = None):
        """One request, unbatched: hold a slot for the service time (an inference component's own, when
        given) and the model's compute."""
        return self._hold_slot(lambda: self.model.predict(feat_ids, feat_vals),
                               self.service_s if service_s is None else service_s)

    def _service_s(self, service_s: float | None, rows: int) -> float:
        """A Triton request's service time: a request of several rows is one batch of them (batching.py)."""
        base = self.service_s if service_s is None else service_s
        return batching.batch_service_s(base * 1000.0, self.config.batch_item_cost, rows)

    def _hold_slot(self, compute, service_s: float):
        """Run `compute` holding a concurrency slot for `service_s` (cold start first, when due)."""
        if self.slots is not None:
            self.slots.acquire()
        try:
            self._cold_start()
            if service_s:
                time.sleep(service_s)
            return compute()
        finally:
            if self.slots is not None:
                self.slots.release()

    # -- responses ----------------------------------------------------------------------------
    @staticmethod
    def _respond(start_response, status: int, body: bytes, content_type: str, headers=None):
        start_response(_status_line(status), [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                              ("x-amzn-RequestId", str(uuid.uuid4())), *(headers or [])])
        return [body]

    def _not_allowed(self, start_response):
        return self._error(start_response, "MethodNotAllowed", "method not allowed", status=405)

    def _error(self, start_response, code: str, message: str | None = None, status: int | None = None,
               original: tuple[int, str] | None = None):
        """An error answer in botocore's form; a ModelError carries `original` (the container's status
        and message; default: an injected 500)."""
        default_status, default_message = ERRORS.get(code, (status or 400, code))
        status = status or default_status
        message = message or default_message
        doc: dict = {"message": message}
        if code == "ModelError":
            original_status, original_message = original or INJECTED_MODEL_FAILURE
            doc.update({
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL" if original_status < 500 else "SERVER_ERROR_FROM_MODEL",
                "OriginalStatusCode": original_status,
                "OriginalMessage": original_message,
                "LogStreamArn": f"arn:aws:logs:local:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/local",
            })
        if code in ERRORS:
            self.counters.add(**{code: 1})
            self.counters.add(**({"errors_5xx": 1} if status >= 500 else {"errors_4xx": 1}))
        body = orjson.dumps(doc)
        start_response(_status_line(status), [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/com.amazon.sagemaker/"),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ])
        return [body]

    @staticmethod
    def _drop(environ, start_response):
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        start_response("500 Internal Server Error", [("Content-Length", "0"), ("Connection", "close")])
        return [b""]
