"""What a SageMaker SDK `Predictor` tells a load test, read by duck typing.

A notebook that deployed a model holds a `sagemaker.predictor.Predictor`: its endpoint name, its
session (region and credentials), its serializer (the Content-Type and how a Python object becomes
the request body) and its deserializer (the Accept header). `sm_locust.run(predictor=p, data=x)`
tests that endpoint with the body `p.predict(x)` would send. Nothing here imports `sagemaker` (an
optional extra): any object with the same attributes works, which is also how the tests drive it.

Attributes read (SageMaker Python SDK v2 `Predictor`; v3's serializers keep `CONTENT_TYPE` and
`serialize`): `endpoint_name`; `sagemaker_session.boto_region_name` or
`sagemaker_session.boto_session.region_name`; `sagemaker_session.boto_session.get_credentials()`;
`serializer.CONTENT_TYPE` and `serializer.serialize(data)`; `accept` or `deserializer.ACCEPT`
(a string or a tuple, joined with ", " as the SDK does); `component_name` (an inference component).

Credentials go to the Locust child through its environment only (`AWS_ACCESS_KEY_ID`, ...): never
into options.json, a log or a repr. When the session's credentials come from a source the child
finds by itself and keeps fresh (environment variables, a container or instance role), nothing is
passed: frozen copies of refreshable credentials would expire during a long run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sm_locust.errors import UsageError

# botocore's `Credentials.method` for sources the Locust child resolves the same way on its own.
SELF_RESOLVED = frozenset({"env", "container-role", "iam-role"})


@dataclass(frozen=True)
class PredictorTarget:
    """The endpoint a Predictor points at, as `sm-locust run` options, and its credentials."""

    endpoint_name: str
    region: str | None = None
    inference_component: str | None = None
    content_type: str | None = None
    accept: str | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)  # credentials: never shown

    def options(self) -> dict[str, Any]:
        """The run options this target sets (None: not set by the predictor)."""
        return {"endpoint_name": self.endpoint_name, "region": self.region,
                "inference_component": self.inference_component, "content_type": self.content_type,
                "accept": self.accept}


def read_predictor(predictor: object) -> PredictorTarget:
    """The target of a Predictor (or any object with its attributes); UsageError when it has no endpoint."""
    name = getattr(predictor, "endpoint_name", None)
    if not isinstance(name, str) or not name:
        raise UsageError(f"predictor= needs an object with an endpoint_name (a sagemaker.predictor.Predictor), "
                         f"got {type(predictor).__name__}")
    session = getattr(predictor, "sagemaker_session", None)
    boto_session = getattr(session, "boto_session", None)
    region = getattr(session, "boto_region_name", None) or getattr(boto_session, "region_name", None)
    serializer = getattr(predictor, "serializer", None)
    component = getattr(predictor, "component_name", None)
    return PredictorTarget(
        endpoint_name=name, region=region if isinstance(region, str) and region else None,
        inference_component=component if isinstance(component, str) and component else None,
        content_type=_text_attribute(serializer, "CONTENT_TYPE") or _text_attribute(predictor, "content_type"),
        accept=accept_header(predictor), env=credential_env(boto_session))


def _text_attribute(obj: object, name: str) -> str | None:
    try:
        value = getattr(obj, name, None)
    except Exception:  # an SDK property that raises (e.g. no serializer set)
        return None
    return value if isinstance(value, str) and value else None


def accept_header(predictor: object) -> str | None:
    """The Accept header the SDK would send: `predictor.accept`, else `deserializer.ACCEPT`; a
    tuple of types joined with ", "."""
    for owner, name in ((predictor, "accept"), (getattr(predictor, "deserializer", None), "ACCEPT")):
        try:
            value = getattr(owner, name, None)
        except Exception:
            continue
        if isinstance(value, str) and value:
            return value
        if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
            return ", ".join(value)
    return None


def credential_env(boto_session: object) -> dict[str, str]:
    """AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN for the Locust child, from a boto3
    session's credentials; {} when it has none, or when the child resolves the same source itself (a
    self-refreshing source found through the same profile as the child's default chain)."""
    get = getattr(boto_session, "get_credentials", None)
    credentials = get() if callable(get) else None
    if credentials is None:
        return {}
    profile = getattr(boto_session, "profile_name", None)
    same_chain = profile in (None, os.environ.get("AWS_PROFILE") or "default")  # the child's own chain
    if same_chain and getattr(credentials, "method", None) in SELF_RESOLVED:
        return {}
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    access, secret = getattr(frozen, "access_key", None), getattr(frozen, "secret_key", None)
    if not access or not secret:
        return {}
    # An empty token overrides a session token this process's environment may hold for other keys.
    token = getattr(frozen, "token", None) or ""
    return {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token,
            "AWS_SECURITY_TOKEN": token}


def request_body(data: object, predictor: object = None) -> tuple[bytes, str | None]:
    """(body, content type) for `data=`: through the predictor's serializer when there is one (the
    body `predictor.predict(data)` sends); without one, bytes and text as they are and a dict or list
    as JSON."""
    serializer = getattr(predictor, "serializer", None) if predictor is not None else None
    if serializer is not None and callable(getattr(serializer, "serialize", None)):
        try:
            body = serializer.serialize(data)
        except Exception as exc:  # the user's data did not fit the serializer: their error, one line
            raise UsageError(f"data=: the predictor's {type(serializer).__name__} could not serialize it: "
                             f"{type(exc).__name__}: {exc}") from None
        return _bytes(body, type(serializer).__name__), _text_attribute(serializer, "CONTENT_TYPE")
    if isinstance(data, (Mapping, list)):
        return json.dumps(data).encode(), "application/json"
    if isinstance(data, (str, bytes, bytearray, memoryview)):
        return _bytes(data, "data="), None
    raise UsageError(f"data= is a {type(data).__name__}: pass bytes, text, a dict or a list, or a predictor= whose "
                     "serializer encodes it (or payload= a file: .npy, .jsonl, ...)")


def _bytes(body: Any, where: str) -> bytes:
    if isinstance(body, str):
        body = body.encode()
    elif callable(getattr(body, "read", None)):
        body = body.read()
        body = body.encode() if isinstance(body, str) else body
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise UsageError(f"{where} gave a {type(body).__name__}, not bytes or text; the request body must be bytes")
    if not len(body):
        raise UsageError(f"{where} gave an empty request body; SageMaker rejects empty bodies")
    return bytes(body)
