"""The local endpoint's InvokeEndpointWithResponseStream and InvokeEndpointAsync handlers.

A stream request is checked, fault-injected and decoded as for InvokeEndpoint, then answered in the
event-stream framing (`transport.eventstream`), one `PayloadPart` per token in the TGI / LMI JSON-line
style (`--stream-tokens`, `--first-token-ms`, `--token-ms`). Mid-stream faults (`--stream-error-ratio`,
`sm-locust-fault=ModelStreamError`) send half the tokens then an exception event, status 200, as
SageMaker does. An async request needs `X-Amzn-SageMaker-InputLocation` and is answered 202;
without `serve --async` its S3 URIs are fake and nothing runs (endpoint/asyncqueue.py otherwise).
"""

from __future__ import annotations

import time
import uuid

import orjson

from sm_locust.endpoint import codecs, llm
from sm_locust.endpoint.asyncqueue import Job
from sm_locust.endpoint.components import COMPONENT_ENVIRON
from sm_locust.endpoint.faults import FORCE_ATTRIBUTE
from sm_locust.transport import eventstream as es

STREAM_FAULTS = (es.MODEL_STREAM_ERROR, es.INTERNAL_STREAM_FAILURE)
STREAM_ERROR_MESSAGE = llm.STREAM_ERROR_MESSAGE
STREAM_CONTENT_TYPE = "application/jsonlines"
ASYNC_BUCKET = "s3://sm-locust-local"


def tokens_for(probabilities, count: int = 0) -> list[bytes]:
    """The streamed tokens: one JSON line per prediction, or `count` of them (predictions repeated)."""
    values = [float(p) for p in probabilities] or [0.0]
    n = count or len(values)
    return [orjson.dumps({"token": {"id": i, "text": f"{values[i % len(values)]:.6f}"}}) + b"\n" for i in range(n)]


def invoke_stream(app, environ, start_response, endpoint_name: str):
    """POST /endpoints/{name}/invocations-response-stream."""
    arrived = time.perf_counter()
    read = app.read_request(environ, start_response, endpoint_name)
    if isinstance(read, list):
        return read
    body, attributes_header, attributes = read
    if app.llm is not None:  # InferenceComponentName: the base component or an adapter (--llm-adapters)
        rejected = app.targets.check(environ, endpoint_name)
        if rejected:
            return app._error(start_response, *rejected)
    forced = attributes.get(FORCE_ATTRIBUTE)
    stream_faults = (*STREAM_FAULTS, llm.IN_BAND) if app.llm is not None else STREAM_FAULTS
    if forced in stream_faults:  # a stream fault is decided here, not by the fault plan
        del attributes[FORCE_ATTRIBUTE]
    else:
        forced = None
    refused, _ = app.apply_faults(environ, start_response, attributes)
    if refused is not None:
        return refused
    if app.llm is not None:  # sm-locust serve --llm: tokens as the batch makes them (endpoint/llm.py)
        variant = environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT") or app.config.variant_name
        fault = llm.stream_fault(app.llm, forced, app.config.stream_error_ratio, app.plan.rng.random)
        component = environ.get(COMPONENT_ENVIRON)
        return app.targets.serve(environ, start_response, lambda respond: llm.invoke_stream(  # an adapter's load
            app, app.llm, respond, body, variant, attributes_header, fault, component), app._error)
    try:
        feat_ids, feat_vals = app.decode(body, environ.get("CONTENT_TYPE"), attributes_header)
    except codecs.CodecError as exc:
        return app.reject(start_response, exc)  # ModelError 424, before the stream starts
    cfg = app.config
    if app.slots is not None:
        app.slots.acquire()
    try:
        model_start = time.perf_counter()
        if cfg.service_time_ms:
            time.sleep(cfg.service_time_ms / 1000.0)
        probabilities = app.model.predict(feat_ids, feat_vals)
        model_us = (time.perf_counter() - model_start) * 1e6
    finally:
        if app.slots is not None:
            app.slots.release()
    tokens = tokens_for(probabilities, cfg.stream_tokens)
    fails = forced or (es.MODEL_STREAM_ERROR if cfg.stream_error_ratio
                       and app.plan.rng.random() < cfg.stream_error_ratio else None)
    fail_at = len(tokens) // 2 if fails else None
    overhead_us = max(0.0, (time.perf_counter() - arrived) * 1e6 - model_us)
    app.counters.add(invocations=1, successes=0 if fails else 1, stream_errors=1 if fails else 0,
                     model_latency_us_sum=model_us, overhead_latency_us_sum=overhead_us)
    variant = environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT") or cfg.variant_name
    headers = [("Content-Type", es.CONTENT_TYPE), ("X-Amzn-SageMaker-Content-Type", STREAM_CONTENT_TYPE),
               ("x-Amzn-Invoked-Production-Variant", variant), ("x-amzn-RequestId", str(uuid.uuid4()))]
    if attributes_header:
        headers.append(("X-Amzn-SageMaker-Custom-Attributes", attributes_header))
    start_response("200 OK", headers)  # no Content-Length: chunked, each frame flushed as written
    return _frames(tokens, cfg.first_token_ms / 1000.0, cfg.token_ms / 1000.0, fail_at, fails)


def _frames(tokens: list[bytes], first_s: float, gap_s: float, fail_at: int | None, fault: str | None):
    fault = fault or es.MODEL_STREAM_ERROR  # set whenever fail_at is
    for i, token in enumerate(tokens):
        if i == fail_at:
            yield es.encode_exception(fault, STREAM_ERROR_MESSAGE, "sm-locust-injected")
            return
        delay = first_s if i == 0 else gap_s
        if delay:
            time.sleep(delay)  # gevent-patched in the gunicorn worker: other requests go on
        yield es.encode_payload_part(token)
    if fail_at is not None:  # a one-token stream fails after its token
        yield es.encode_exception(fault, STREAM_ERROR_MESSAGE, "sm-locust-injected")


def invoke_async(app, environ, start_response, endpoint_name: str):
    """POST /endpoints/{name}/async-invocations: 202 with an InferenceId and fake S3 locations."""
    read = app.read_request(environ, start_response, endpoint_name)
    if isinstance(read, list):
        return read
    _, _, attributes = read
    if not environ.get("HTTP_X_AMZN_SAGEMAKER_INPUTLOCATION"):
        return app._error(start_response, "ValidationError", "InputLocation is required for InvokeEndpointAsync.")
    refused, _ = app.apply_faults(environ, start_response, attributes)
    if refused is not None:
        return refused
    inference_id = environ.get("HTTP_X_AMZN_SAGEMAKER_INFERENCE_ID") or str(uuid.uuid4())
    queued = app.async_queue
    if queued is None:
        output = f"{ASYNC_BUCKET}/async-output/{inference_id}.out"
        failure = f"{ASYNC_BUCKET}/async-failures/{inference_id}-error.out"
    else:
        output = queued.config.output_location(inference_id)
        failure = queued.config.failure_location(inference_id)
        queued.submit(Job(inference_id, environ["HTTP_X_AMZN_SAGEMAKER_INPUTLOCATION"], output, failure,
                          environ.get("HTTP_X_AMZN_SAGEMAKER_CONTENT_TYPE") or environ.get("CONTENT_TYPE"),
                          environ.get("HTTP_X_AMZN_SAGEMAKER_ACCEPT") or environ.get("HTTP_ACCEPT"),
                          environ.get("HTTP_X_AMZN_SAGEMAKER_CUSTOM_ATTRIBUTES"), time.monotonic(),
                          received_at=time.time(), endpoint_name=endpoint_name))
    body = orjson.dumps({"InferenceId": inference_id})  # the locations are headers (botocore's model)
    start_response("202 Accepted", [
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        ("X-Amzn-SageMaker-OutputLocation", output),
        ("X-Amzn-SageMaker-FailureLocation", failure),
        ("x-amzn-RequestId", str(uuid.uuid4())),
    ])
    return [body]


ROUTES = {
    "invocations-response-stream": invoke_stream,
    "async-invocations": invoke_async,
}
