"""SigV4: the lean signer equals botocore's on every header combination; the fast client's
signatures pass an independent verifier (botocore SigV4Auth recomputing from the received request)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest
from botocore.credentials import Credentials, RefreshableCredentials

from sm_locust.errors import UnknownNameError
from sm_locust.invocation import Invocation
from sm_locust.transport.fast import FastSageMakerClient
from sm_locust.transport.signing import SIGNERS, LeanSigner, create_signer
from tests.fakes import ACCESS_KEY, REGION, SECRET_KEY, TOKEN, FakeRuntime, botocore_client

AMZ_DATE = "20250314T235959Z"
NAMES = ["plain-endpoint", "my endpoint", "a/b", "ü-model", "x+y=z", "tilde~dot.under_score"]
BODIES = [b"", b"{}", bytes(range(256)) * 3]
OPTIONAL = {
    "Accept": "application/json",
    "X-Amzn-SageMaker-Custom-Attributes": "c000b4f9-df62-4c85-a0bf-7c525f9104a4,  trace=1",
    "X-Amzn-SageMaker-Target-Model": "model.tar.gz",
    "X-Amzn-SageMaker-Target-Variant": "variant-b",
    "X-Amzn-SageMaker-Target-Container-Hostname": "container-1",
    "X-Amzn-SageMaker-Inference-Component": "ic-1",
    "X-Amzn-SageMaker-Inference-Id": "id-42",
    "X-Amzn-SageMaker-Enable-Explanations": "`true`",
    "X-Amzn-SageMaker-Session-Id": "NEW_SESSION",
}


def header_sets():
    keys = list(OPTIONAL)
    yield {}
    yield {"Content-Type": "application/json"}
    for key in keys:  # each alone
        yield {"Content-Type": "application/json", key: OPTIONAL[key]}
    yield {"Content-Type": "text/csv", **OPTIONAL}  # all together
    yield {"content-type": "application/x-npy", "accept": "*/*", "user-agent": "not signed"}


def credentials(token):
    return Credentials(ACCESS_KEY, SECRET_KEY, token)


@pytest.mark.parametrize("token", [None, TOKEN])
def test_lean_and_crt_equal_botocore_on_every_combination(token):
    signers = {name: create_signer(name, REGION, credentials(token)) for name in SIGNERS.names()}
    checked = 0
    for name, body, headers in itertools.product(NAMES, BODIES, list(header_sets())):
        url = f"https://runtime.sagemaker.{REGION}.amazonaws.com/endpoints/{quote(name, safe='-_.~')}/invocations"
        results = {n: s.sign("POST", url, headers, body, amz_date=AMZ_DATE) for n, s in signers.items()}
        reference = results["botocore"]
        for signer_name, signed in results.items():
            assert signed == reference, (signer_name, name, headers)
        assert ("X-Amz-Security-Token" in reference) == (token is not None)
        checked += 1
    assert checked == len(NAMES) * len(BODIES) * len(list(header_sets()))


def test_lean_signer_with_port_and_query_and_new_day():
    signers = [create_signer(n, REGION, credentials(TOKEN)) for n in ("lean", "botocore")]
    for url in ("http://127.0.0.1:8080/endpoints/e/invocations?b=2&a=1&a-=0", "https://h:443/endpoints/e/invocations"):
        for day in ("20240229T000000Z", "20240301T000001Z"):  # the cached key must follow the day
            lean, boto = (s.sign("POST", url, {"Content-Type": "a"}, b"x", amz_date=day) for s in signers)
            assert lean == boto
    assert signers[0].sign("POST", "https://h:443/e", {}, b"", amz_date=AMZ_DATE)["Host"] == "h"


def test_unknown_signer_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="botocore, crt, lean"):
        create_signer("fastest", REGION)


def test_refreshable_credentials_are_followed():
    issued = []

    def refresh():
        issued.append(1)
        return {
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "token": f"token-{len(issued)}",
            # inside botocore's mandatory refresh window: refreshed on every read
            "expiry_time": (datetime.now(UTC) + timedelta(minutes=5)).isoformat(),
        }

    creds = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    signer = LeanSigner(REGION, creds)
    signer.credentials._check_interval = 0.0
    first = signer.sign("POST", "https://h/e", {}, b"", amz_date=AMZ_DATE)["X-Amz-Security-Token"]
    second = signer.sign("POST", "https://h/e", {}, b"", amz_date=AMZ_DATE)["X-Amz-Security-Token"]
    assert first != second
    assert SECRET_KEY not in repr(signer) + repr(signer.credentials)


@pytest.mark.e2e
@pytest.mark.parametrize("signer", ["lean", "botocore", "crt"])
def test_fast_client_signatures_pass_the_independent_verifier(signer):
    env = Environment()
    failures = []
    env.events.request.add_listener(lambda exception=None, **kw: exception and failures.append(exception))
    with FakeRuntime() as server:
        for token in (TOKEN, None):
            client = FastSageMakerClient(
                env, "my endpoint/ü", region=REGION, endpoint_url=server.url,
                signer=signer, credentials=credentials(token),
            )
            for body, headers in itertools.product(BODIES, [{}, OPTIONAL]):
                fields = {
                    "custom_attributes": headers.get("X-Amzn-SageMaker-Custom-Attributes"),
                    "target_variant": headers.get("X-Amzn-SageMaker-Target-Variant"),
                    "inference_id": headers.get("X-Amzn-SageMaker-Inference-Id"),
                    "session_id": headers.get("X-Amzn-SageMaker-Session-Id"),
                }
                response = client.invoke(Invocation(body=body, **fields))
                assert response is not None, failures
                assert response.body == body
            client.close()
        # the path is quoted exactly as botocore quotes it
        botocore_client(server.url).invoke_endpoint(EndpointName="my endpoint/ü", Body=b"{}")
    assert not failures
    assert list(server.hits) == ["/endpoints/my%20endpoint%2F%C3%BC/invocations"]
    assert "HTTP_X_AMZ_SECURITY_TOKEN" in server.seen[0] and "HTTP_X_AMZ_SECURITY_TOKEN" not in server.seen[-2]


def test_missing_credentials_are_a_reported_failure(monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata call
    for var in ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(var, raising=False)
    env = Environment()
    seen = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = FastSageMakerClient(env, "e", region=REGION, endpoint_url="http://127.0.0.1:9")
    assert client.invoke(Invocation(body=b"{}")) is None
    assert str(seen[0]["exception"]) == "NoCredentialsError: Unable to locate credentials"


def test_lean_memo_gives_the_fresh_signature_and_follows_time_body_and_headers():
    """A repeated request in the same second reuses its signature; anything that changes it misses."""
    lean, reference = create_signer("lean", REGION, credentials(TOKEN)), create_signer("botocore", REGION,
                                                                                       credentials(TOKEN))
    url = f"https://runtime.sagemaker.{REGION}.amazonaws.com/endpoints/e/invocations"
    body, headers = b'{"a": 1}', {"Content-Type": "application/json"}
    first = lean.sign("POST", url, headers, body, amz_date=AMZ_DATE)
    first["mutated"] = "by the caller"  # a copy: the memo is not touched
    again = lean.sign("POST", url, headers, body, amz_date=AMZ_DATE)
    assert again == reference.sign("POST", url, headers, body, amz_date=AMZ_DATE)
    for change in ({"amz_date": "20250315T000000Z"}, {"body": b'{"a": 2}'}, {"headers": {"Content-Type": "text/csv"}}):
        args = {"body": body, "headers": headers, "amz_date": AMZ_DATE, **change}
        signed = lean.sign("POST", url, args["headers"], args["body"], amz_date=args["amz_date"])
        assert signed == reference.sign("POST", url, args["headers"], args["body"], amz_date=args["amz_date"])
        assert signed["Authorization"] != again["Authorization"]
    mutable = bytearray(body)
    before = lean.sign("POST", url, headers, mutable, amz_date=AMZ_DATE)
    mutable[-2:-1] = b"9"  # a mutable body is never memoized
    assert lean.sign("POST", url, headers, mutable, amz_date=AMZ_DATE) != before


def test_a_credential_miss_is_remembered_for_the_check_interval(monkeypatch):
    """Without credentials every call fails NoCredentialsError, but botocore's provider chain (~10 ms of
    CPU) runs once per check interval, not once per call."""
    from sm_locust.transport import signing

    looked = []

    def no_credentials():
        looked.append(1)
        raise signing.NoCredentialsError()

    monkeypatch.setattr(signing, "_default_credentials", no_credentials)
    signer = LeanSigner(REGION)
    for _ in range(5):
        with pytest.raises(signing.NoCredentialsError, match="Unable to locate credentials"):
            signer.sign("POST", "https://h/e", {}, b"")
    assert len(looked) == 1
    signer.credentials._check_interval = 0.0
    with pytest.raises(signing.NoCredentialsError):
        signer.sign("POST", "https://h/e", {}, b"")
    assert len(looked) == 2
