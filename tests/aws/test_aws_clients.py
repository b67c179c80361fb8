"""The AWS client factory's rules (sm_locust/aws/clients.py), read back from the clients it builds
with botocore's own introspection (`client.meta`): no network, no request sent."""

from __future__ import annotations

import botocore.exceptions
import pytest

from sm_locust.aws import clients as c
from sm_locust.aws.clients import PLACEHOLDER_KEY, Keys, Purpose, client, is_loopback
from sm_locust.errors import UsageError

LOCAL = "http://127.0.0.1:9"


def keys_of(made) -> tuple[str, str] | None:
    credentials = made._request_signer._credentials
    if credentials is None:
        return None
    frozen = credentials.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key


@pytest.fixture
def no_credentials(monkeypatch):
    """The sandbox's test keys removed: the chain finds none (no files, no instance metadata)."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")


# -- retries and timeouts, by purpose ----------------------------------------------------------------

def test_the_runtime_request_path_gets_one_attempt_and_no_hidden_retry():
    config = client("sagemaker-runtime", Purpose.RUNTIME, pool_size=64, connect_timeout=3, read_timeout=7).meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert (config.max_pool_connections, config.connect_timeout, config.read_timeout) == (64, 3, 7)
    assert config.tcp_keepalive is True


def test_metrics_reads_keep_one_retry_and_short_timeouts():
    config = client("cloudwatch", Purpose.READ).meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}
    assert (config.connect_timeout, config.read_timeout) == (5, 30)


def test_metrics_publishing_gets_one_attempt_the_sender_retries_itself():
    config = client("cloudwatch", Purpose.PUBLISH).meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert (config.connect_timeout, config.read_timeout) == (5, 15)


def test_the_control_plane_keeps_botocores_defaults():
    default = client("sagemaker", Purpose.CONTROL).meta.config
    assert "total_max_attempts" not in (default.retries or {})  # botocore's own attempts apply
    assert (default.connect_timeout, default.read_timeout, default.max_pool_connections) == (60, 60, 10)
    assert not default.tcp_keepalive


def test_a_given_timeout_replaces_the_purposes_and_the_rest_stays():
    config = client("cloudwatch", Purpose.READ, read_timeout=15).meta.config
    assert (config.connect_timeout, config.read_timeout) == (5, 15)
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}


# -- region ------------------------------------------------------------------------------------------

def test_the_region_rule_reaches_the_client(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-3")  # botocore alone reads only AWS_DEFAULT_REGION
    assert client("sagemaker", Purpose.CONTROL).meta.region_name == "eu-west-3"
    assert client("sagemaker", Purpose.CONTROL, region="ap-south-1").meta.region_name == "ap-south-1"


def test_without_a_region_the_default_region_else_botocores_error(monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert client("sagemaker", Purpose.CONTROL, default_region="us-west-2").meta.region_name == "us-west-2"
    with pytest.raises(botocore.exceptions.NoRegionError):
        client("sagemaker", Purpose.CONTROL)
    assert c.runtime_region(None, None, LOCAL) == c.LOCAL_DEFAULT_REGION
    assert c.runtime_region(None, None, None) is None


def test_an_unknown_profile_is_one_line_when_the_region_rule_reads_it_else_botocores_error(monkeypatch):
    with pytest.raises(botocore.exceptions.ProfileNotFound):  # the region came from AWS_DEFAULT_REGION
        client("s3", Purpose.CONTROL, profile="nobody-has-this")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(UsageError, match="AWS profile 'nobody-has-this' not found"):
        client("s3", Purpose.CONTROL, profile="nobody-has-this")


# -- endpoint ----------------------------------------------------------------------------------------

def test_the_endpoint_is_the_given_one_else_the_environments(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:4566")
    assert client("cloudwatch", Purpose.READ).meta.endpoint_url == "http://127.0.0.1:4566"
    assert client("cloudwatch", Purpose.READ, endpoint_url=LOCAL).meta.endpoint_url == LOCAL
    assert client("sagemaker", Purpose.CONTROL).meta.endpoint_url == "https://api.sagemaker.us-east-1.amazonaws.com"


# -- credentials -------------------------------------------------------------------------------------

def test_a_loopback_endpoint_without_credentials_gets_placeholders(no_credentials):
    assert keys_of(client("cloudwatch", Purpose.PUBLISH, endpoint_url=LOCAL)) == (PLACEHOLDER_KEY, PLACEHOLDER_KEY)


def test_a_loopback_endpoint_from_the_environment_counts_too(no_credentials, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", "http://localhost:8080")
    assert keys_of(client("sagemaker", Purpose.CONTROL)) == (PLACEHOLDER_KEY, PLACEHOLDER_KEY)


def test_credentials_found_are_used_against_a_loopback_endpoint():
    assert keys_of(client("sagemaker", Purpose.CONTROL, endpoint_url=LOCAL)) == ("testing", "testing")


def test_aws_without_credentials_gets_none_and_fails_at_the_first_call(no_credentials):
    assert keys_of(client("sagemaker", Purpose.CONTROL)) is None


def test_when_none_says_what_happens_without_credentials(no_credentials):
    assert keys_of(client("sagemaker-runtime", Purpose.RUNTIME, endpoint_url=LOCAL, when_none="fail")) is None
    assert keys_of(client("cloudwatch", Purpose.PUBLISH, when_none="placeholders")) == (PLACEHOLDER_KEY,
                                                                                          PLACEHOLDER_KEY)


def test_given_keys_win_over_the_chain_and_are_never_shown():
    keys = Keys("AKIAGIVEN", "given-secret", "token")
    made = client("sagemaker", Purpose.CONTROL, endpoint_url=LOCAL, keys=keys)
    assert keys_of(made) == ("AKIAGIVEN", "given-secret")
    assert made._request_signer._credentials.get_frozen_credentials().token == "token"
    assert "given" not in repr(keys) and "AKIA" not in repr(keys)


def test_keys_copy_a_botocore_credentials_object():
    from botocore.credentials import Credentials

    assert Keys.of(Credentials("a", "b", "t")) == Keys("a", "b", "t")


def test_clients_share_one_session_and_the_rules():
    autoscaling, sagemaker = c.clients(("application-autoscaling", "sagemaker"), Purpose.CONTROL, region="eu-west-1")
    assert [autoscaling.meta.service_model.service_name, sagemaker.meta.service_model.service_name] == [
        "application-autoscaling", "sagemaker"]
    assert autoscaling.meta.region_name == sagemaker.meta.region_name == "eu-west-1"


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:9", True), ("http://localhost:1", True), ("http://[::1]:80", True),
    ("http://0.0.0.0:8080", True), ("http://127.1.2.3", True),
    ("https://runtime.sagemaker.us-east-1.amazonaws.com", False), ("http://10.0.0.1:8080", False),
    ("127.0.0.1:9", False), (None, False), ("", False),
])
def test_is_loopback(url, local):
    assert is_loopback(url) is local
