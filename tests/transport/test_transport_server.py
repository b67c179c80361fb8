"""The fake SageMaker Runtime (`tests/fakes.py`) checks signatures as AWS does."""

from __future__ import annotations

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)

import pytest

from tests.fakes import ACCESS_KEY, REGION, FakeRuntime, botocore_client


@pytest.fixture
def runtime():
    with FakeRuntime() as server:
        yield server


@pytest.mark.e2e
def test_fake_accepts_botocore_signatures(runtime):
    client = botocore_client(runtime.url)
    answer = client.invoke_endpoint(
        EndpointName="my endpoint/1", Body=b"\x00\xffbinary", ContentType="application/x-npy",
        CustomAttributes="a=1,  b=2", TargetVariant="v1",
    )
    assert answer["Body"].read() == b"\x00\xffbinary"
    assert runtime.hits["/endpoints/my%20endpoint%2F1/invocations"] == 1


@pytest.mark.e2e
def test_fake_rejects_a_wrong_secret(runtime):
    import botocore.session
    from botocore.config import Config
    from botocore.exceptions import ClientError

    client = botocore.session.Session().create_client(
        "sagemaker-runtime", region_name=REGION, endpoint_url=runtime.url,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key="wrong",
        config=Config(retries={"total_max_attempts": 1}),
    )
    with pytest.raises(ClientError) as caught:
        client.invoke_endpoint(EndpointName="e", Body=b"{}")
    assert caught.value.response["Error"]["Code"] == "InvalidSignatureException"
    gevent.sleep(0)
