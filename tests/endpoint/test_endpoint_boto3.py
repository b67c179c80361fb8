"""Real boto3 against the local endpoint: the wire protocol and error shapes a user's code sees."""

from __future__ import annotations

import json
import urllib.request

import locust  # noqa: F401
from locust.env import Environment

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError

from sm_locust.endpoint.model import RankingModel, sample_rows
from sm_locust.invocation import Invocation
from sm_locust.transport.boto3 import make_boto3_client, name_error
from tests.fakes import recorded, signed_client


@pytest.fixture
def endpoint(module_endpoint):
    """The module's endpoint: faults are asked per request, counters are read as differences."""
    return module_endpoint


def runtime(url: str):
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                        config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


def ranking_body(rows: int = 3) -> tuple[bytes, list[float]]:
    ids, vals = sample_rows(rows)
    body = json.dumps({"instances": [{"feat_ids": i.tolist(), "feat_vals": v.tolist()}
                                     for i, v in zip(ids, vals, strict=True)]})
    return body.encode(), RankingModel().predict(ids, vals).tolist()


@pytest.mark.e2e
def test_invoke_endpoint_answers_model_predictions_and_variant(endpoint):
    body, expected = ranking_body(5)
    response = runtime(endpoint.url).invoke_endpoint(EndpointName="my-endpoint", Body=body,
                                                     ContentType="application/json")
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert response["ContentType"] == "application/json"
    predictions = json.loads(response["Body"].read())["predictions"]
    assert predictions == pytest.approx(expected, rel=1e-6)
    assert all(0.0 < p < 1.0 for p in predictions)


@pytest.mark.e2e
def test_compute_grows_with_rows_and_endpoint_names_are_url_quoted(endpoint):
    body, expected = ranking_body(200)
    response = runtime(endpoint.url).invoke_endpoint(EndpointName="name with spaces", Body=body)
    assert len(json.loads(response["Body"].read())["predictions"]) == 200


@pytest.mark.e2e
@pytest.mark.parametrize(
    "code,status",
    [("ValidationError", 400), ("ModelError", 424), ("ModelNotReadyException", 429), ("ThrottlingException", 429),
     ("InternalFailure", 500), ("ServiceUnavailable", 503)],
)
def test_each_error_surfaces_as_its_botocore_code(endpoint, code, status):
    body, _ = ranking_body()
    with pytest.raises(ClientError) as info:
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", Body=body, CustomAttributes=f"sm-locust-fault={code}")
    error = info.value.response
    assert error["Error"]["Code"] == code
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    if code == "ModelError":
        assert error["OriginalStatusCode"] == 500
        assert error["LogStreamArn"].startswith("arn:aws:logs:")


@pytest.mark.e2e
@pytest.mark.parametrize("kwargs, original_status, needle", [
    ({"Body": b'{"instances": [{"feat_ids": [1, 2]}]}'}, 400, "feat_vals"),
    ({"Body": b"a,b", "ContentType": "image/png"}, 415, "unsupported Content-Type 'image/png'"),
    ({"Body": ranking_body()[0], "Accept": "image/png"}, 406, "unsupported Accept 'image/png'"),
])
def test_a_request_the_model_rejects_is_a_model_error_as_on_sagemaker(endpoint, kwargs, original_status, needle):
    """A container's 4xx reaches the caller as ModelError 424 with the container's status and message,
    parsed by botocore into the modeled fields (ValidationError is the API's own checks, below)."""
    before = endpoint.stats()
    with pytest.raises(ClientError) as info:
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", **kwargs)
    error = info.value.response
    assert error["Error"]["Code"] == "ModelError"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["OriginalStatusCode"] == original_status
    assert needle in error["OriginalMessage"]
    assert error["Error"]["Message"].startswith(f"Received client error ({original_status}) from primary with message")
    assert error["LogStreamArn"].startswith("arn:aws:logs:")
    stats = {key: value - before[key] for key, value in endpoint.stats().items() if isinstance(value, int)}
    assert stats["ModelError"] == 1 and stats["invocations"] == 1 and stats["ValidationError"] == 0


@pytest.mark.e2e
def test_the_fast_transport_names_a_model_rejection_as_boto3_does(endpoint):
    environment = Environment()
    events = recorded(environment)
    client = signed_client("fast", environment, endpoint.url)
    assert client.invoke(Invocation(body=b'{"instances": [{"feat_ids": [1, 2]}]}')) is None
    with pytest.raises(ClientError) as info:
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", Body=b'{"instances": [{"feat_ids": [1, 2]}]}')
    assert str(events[-1]["exception"]) == str(name_error(info.value))
    assert str(events[-1]["exception"]).startswith("ModelError: (original status 400) Received client error (400)")


@pytest.mark.e2e
def test_api_level_checks_stay_validation_errors(endpoint):
    with pytest.raises(ClientError) as info:
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", Body=b"x" * (6_291_456 + 1))
    assert info.value.response["Error"]["Code"] == "ValidationError"
    assert "maximum is 6291456" in info.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as info:
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", Body=ranking_body()[0],
                                              CustomAttributes="sm-locust-fault=Nope")
    assert info.value.response["Error"]["Code"] == "ValidationError"


@pytest.mark.e2e
def test_wrong_endpoint_name_is_rejected_when_the_server_has_one(endpoint_factory):
    ep = endpoint_factory(endpoint_name="only-this-one")
    body, _ = ranking_body()
    with pytest.raises(ClientError) as info:
        runtime(ep.url).invoke_endpoint(EndpointName="another", Body=body)
    assert info.value.response["Error"]["Code"] == "ValidationError"
    assert "another" in info.value.response["Error"]["Message"]


@pytest.mark.e2e
def test_dropped_connection_is_a_connection_error(endpoint):
    body, _ = ranking_body()
    with pytest.raises(ConnectionClosedError):
        runtime(endpoint.url).invoke_endpoint(EndpointName="ep", Body=body,
                                              CustomAttributes="sm-locust-fault=DropConnection")


@pytest.mark.e2e
def test_container_contract_ping_and_invocations(endpoint):
    with urllib.request.urlopen(endpoint.url + "/ping") as resp:
        assert resp.status == 200
    body, expected = ranking_body(2)
    request = urllib.request.Request(endpoint.url + "/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as resp:
        assert json.loads(resp.read())["predictions"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.e2e
def test_retries_are_off_even_for_throttles(endpoint_factory):
    """One call, one server-side request: botocore's default would retry this throttle twice more."""
    ep = endpoint_factory(throttle_ratio=1.0)
    client = make_boto3_client(endpoint_url=ep.url, region="us-east-1")
    body, _ = ranking_body()
    for _ in range(5):
        with pytest.raises(ClientError):
            client.invoke_endpoint(EndpointName="ep", Body=body)
    assert ep.stats()["requests"] == 5
