"""What a SageMaker SDK Predictor tells a run, read by duck typing: stand-ins with the SDK's attributes
(and the real SDK's serializers when the `sagemaker` extra is installed)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import boto3
import pytest

from sm_locust.api.predictor import credential_env, read_predictor, request_body
from sm_locust.errors import UsageError

SECRET = "predictor-secret-key-never-shown"


class CSVish:
    """The shape of sagemaker.serializers.CSVSerializer: CONTENT_TYPE and serialize() -> str."""

    CONTENT_TYPE = "text/csv"

    def serialize(self, data):
        return ",".join(str(v) for v in data)


class JSONDeserializerish:
    ACCEPT = ("application/json",)


def predictor(**overrides):
    session = boto3.Session(aws_access_key_id="AKIDPREDICTOR", aws_secret_access_key=SECRET,
                            aws_session_token="predictor-token", region_name="eu-west-1")
    fields = {"endpoint_name": "ranker", "serializer": CSVish(), "deserializer": JSONDeserializerish(),
              "sagemaker_session": SimpleNamespace(boto_session=session, boto_region_name="eu-west-1"),
              "component_name": None}
    fields.update(overrides)
    return SimpleNamespace(**fields)


def test_a_predictor_gives_endpoint_region_types_and_credentials():
    target = read_predictor(predictor())
    assert target.options() == {"endpoint_name": "ranker", "region": "eu-west-1", "inference_component": None,
                                "content_type": "text/csv", "accept": "application/json"}
    assert target.env == {"AWS_ACCESS_KEY_ID": "AKIDPREDICTOR", "AWS_SECRET_ACCESS_KEY": SECRET,
                          "AWS_SESSION_TOKEN": "predictor-token", "AWS_SECURITY_TOKEN": "predictor-token"}
    assert SECRET not in repr(target) and "predictor-token" not in repr(target)


def test_region_from_the_boto_session_and_an_inference_component():
    p = predictor(component_name="ic-a", deserializer=SimpleNamespace(ACCEPT=("application/json", "text/csv")))
    p.sagemaker_session = SimpleNamespace(boto_session=p.sagemaker_session.boto_session)
    target = read_predictor(p)
    assert (target.region, target.inference_component, target.accept) == ("eu-west-1", "ic-a",
                                                                          "application/json, text/csv")


def test_not_a_predictor():
    with pytest.raises(UsageError, match="predictor= needs an object with an endpoint_name"):
        read_predictor(SimpleNamespace(name="x"))


class _Creds:
    def __init__(self, method, token=None):
        self.method, self.access_key, self.secret_key, self.token = method, "AK", "SK", token

    def get_frozen_credentials(self):
        return self


@pytest.mark.parametrize("method", ["env", "container-role", "iam-role"])
def test_credentials_the_child_finds_and_refreshes_itself_are_not_copied(method):
    assert credential_env(SimpleNamespace(get_credentials=lambda: _Creds(method, "t"), profile_name="default")) == {}
    # ... unless the session used another profile than the child's chain would: then they are copied
    other = credential_env(SimpleNamespace(get_credentials=lambda: _Creds(method, "t"), profile_name="prod"))
    assert other["AWS_ACCESS_KEY_ID"] == "AK" and other["AWS_SESSION_TOKEN"] == "t"


def test_credentials_without_a_token_blank_any_inherited_token():
    env = credential_env(SimpleNamespace(get_credentials=lambda: _Creds("assume-role")))
    assert env == {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "",
                   "AWS_SECURITY_TOKEN": ""}
    assert credential_env(SimpleNamespace(get_credentials=lambda: None)) == {}
    assert credential_env(None) == {}


def test_data_through_the_predictors_serializer():
    assert request_body([1, 2.5, 3], predictor()) == (b"1,2.5,3", "text/csv")


def test_data_without_a_predictor():
    assert request_body(b"\x00\x01") == (b"\x00\x01", None)
    assert request_body("1,2,3") == (b"1,2,3", None)
    assert request_body({"instances": [[1, 2]]}) == (json.dumps({"instances": [[1, 2]]}).encode(), "application/json")
    with pytest.raises(UsageError, match="data= is a set: pass bytes, text, a dict or a list, or a predictor="):
        request_body({1, 2})
    with pytest.raises(UsageError, match="data= gave an empty request body; SageMaker rejects empty bodies"):
        request_body(b"")


def test_a_serializer_that_refuses_the_data_is_one_line():
    class Strict:
        CONTENT_TYPE = "application/x-npy"

        def serialize(self, data):
            raise ValueError("Unable to handle input format: <class 'set'>")

    with pytest.raises(UsageError, match="data=: the predictor's Strict could not serialize it: ValueError: Unable"):
        request_body({1}, predictor(serializer=Strict()))


@pytest.mark.parametrize("module", ["sagemaker.serializers", "sagemaker.core.serializers"])  # SDK v2, v3
def test_the_real_sdk_serializers(module):
    serializers = pytest.importorskip(module)
    np = pytest.importorskip("numpy")
    cases = [(serializers.CSVSerializer(), [1, 2, 3], "text/csv", b"1,2,3"),
             (serializers.JSONSerializer(), {"inputs": [1, 2]}, "application/json", b'{"inputs": [1, 2]}')]
    for serializer, data, content_type, body in cases:
        assert request_body(data, predictor(serializer=serializer)) == (body, content_type)
    body, content_type = request_body(np.arange(4.0), predictor(serializer=serializers.NumpySerializer()))
    assert content_type == "application/x-npy" and np.load(io.BytesIO(body)).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_sdk_v3_endpoint_resource():
    resources = pytest.importorskip("sagemaker.core.resources")
    serializers = pytest.importorskip("sagemaker.core.serializers")
    deserializers = pytest.importorskip("sagemaker.core.deserializers")
    endpoint = resources.Endpoint(endpoint_name="ranker", serializer=serializers.CSVSerializer(),
                                  deserializer=deserializers.JSONDeserializer())
    target = read_predictor(endpoint)  # no session on it: region and credentials from the default chain
    assert (target.endpoint_name, target.content_type, target.accept, target.env) == ("ranker", "text/csv",
                                                                                      "application/json", {})
