"""The local endpoint's control-plane answers: DescribeEndpoint, and the fleet emulation's own log.

Why: an autoscaling test watches the instance count move. On SageMaker that is DescribeEndpoint
(ProductionVariants' DesiredInstanceCount and CurrentInstanceCount, polled every 10 s by
`sm_locust.scaling.aws`); answering the same call here lets that poller run unchanged against the
local fleet emulation (`endpoint/fleet.py`): point the `sagemaker` client's endpoint_url at the local
endpoint. Only DescribeEndpoint is answered (JSON 1.1, `X-Amz-Target: SageMaker.DescribeEndpoint`,
as botocore sends it); any other control-plane call is an `UnknownOperationException`, and an
endpoint name other than `--endpoint-name` (when set) the ValidationException SageMaker gives.
Without the fleet emulation the endpoint is one instance, always InService; with the async instances
(`serve --async --async-max-instances`) their counts and their record.

`GET /_sm_locust/scaling` (local only; 404 on an endpoint that is not a fleet) is the emulator's own
record: its clock (`time_scale`, the epoch of emulated second 0), the policy, the desired /
in-service changes and the metric's datapoints, all in emulated seconds: what tests and the
autoscaling sweep compare the client's view with.
"""

from __future__ import annotations

import orjson

SCALING_PATH = "/_sm_locust/scaling"
TARGET_PREFIX = "SageMaker."
ACCOUNT = "000000000000"


def _json(start_response, status: str, document: dict, error: str | None = None) -> list[bytes]:
    body = orjson.dumps(document)
    headers = [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(body)))]
    if error:
        headers.append(("x-amzn-ErrorType", error))
    start_response(status, headers)
    return [body]


def _error(start_response, code: str, message: str) -> list[bytes]:
    return _json(start_response, "400 Bad Request", {"__type": code, "message": message}, code)


def describe_endpoint(app, name: str) -> dict:
    """DescribeEndpoint's answer for endpoint `name` (counts in emulated time)."""
    config = app.config
    router = getattr(app, "fleet", None)
    capacity = _async_capacity(app)
    if router is not None:
        fleet = router.fleet
        desired, serving = fleet.counts(fleet.now_s())
        created = fleet.started_epoch
    elif capacity is not None:  # serve --async --async-max-instances (endpoint/asyncscaling.py)
        desired, serving, created = capacity.desired, capacity.in_service, capacity.started_epoch
    else:
        desired = serving = 1
        created = app.started_at
    return {
        "EndpointName": name,
        "EndpointArn": f"arn:aws:sagemaker:local:{ACCOUNT}:endpoint/{name.lower()}",
        "EndpointConfigName": name,
        "ProductionVariants": [{
            "VariantName": config.variant_name, "DeployedImages": [], "CurrentWeight": 1.0, "DesiredWeight": 1.0,
            "CurrentInstanceCount": serving, "DesiredInstanceCount": desired,
        }],
        "EndpointStatus": "InService" if serving == desired else "Updating",
        "CreationTime": created,
        "LastModifiedTime": created,
    }


def answer(app, environ, start_response) -> list[bytes]:
    """A control-plane request (`POST /` with an X-Amz-Target header)."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else target
    if operation != "DescribeEndpoint":
        return _error(start_response, "UnknownOperationException",
                      f"the local endpoint answers DescribeEndpoint only, not {operation or 'this request'}")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request = orjson.loads(environ["wsgi.input"].read(length) if length else b"{}")
        name = request["EndpointName"]
    except (ValueError, KeyError, TypeError):
        return _error(start_response, "ValidationException", "DescribeEndpoint needs EndpointName")
    expected = app.config.endpoint_name
    if expected and name != expected:
        return _error(start_response, "ValidationException",
                      f'Could not find endpoint "arn:aws:sagemaker:local:{ACCOUNT}:endpoint/{name.lower()}".')
    return _json(start_response, "200 OK", describe_endpoint(app, name))


def _async_capacity(app):
    """The async variant's instances (`serve --async --async-max-instances`), or None."""
    queue = getattr(app, "async_queue", None)
    return getattr(queue, "capacity", None)


def scaling_log(app) -> dict | None:
    """The fleet emulation's own record (GET /_sm_locust/scaling), or the async instances'; None without either."""
    router = getattr(app, "fleet", None)
    if router is None:
        capacity = _async_capacity(app)
        return capacity.log(app.async_queue.config.max_concurrent) if capacity is not None else None
    fleet = router.fleet
    config = fleet.config
    now = fleet.now_s()
    desired, serving = fleet.counts(now)
    return {
        "fleet": {"instances": config.instances, "slots": fleet.slots, "routing": config.routing},
        "time_scale": config.time_scale,
        "started_at": fleet.started_epoch,
        "now_s": now,
        "instance_start_s": config.instance_start_s,
        "policy": config.policy.as_dict() if config.policy is not None else None,
        "desired": desired,
        "in_service": serving,
        "instances": [s.as_dict() for s in fleet.events()],
        "periods": [p.as_dict() for p in fleet.periods()],
    }


def scaling(app, start_response) -> list[bytes]:
    """GET /_sm_locust/scaling: the log, or 404 when this endpoint is not a fleet (what a client probing for
    one, such as `run --watch-scaling`, tells apart)."""
    log = scaling_log(app)
    status = "200 OK" if log is not None else "404 Not Found"
    body = orjson.dumps(log if log is not None else {
        "message": "this endpoint is not a fleet emulation; start it with sm-locust serve --instances N"})
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
