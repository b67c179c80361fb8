"""The response-validation hook every transport calls after reading a response body.

Why a module of its own: the check must behave the same whichever client sends the request (the
boto3 `SageMakerClient` today, a faster signed-HTTP client later), and it must never raise into a
User: a validator that trips over a body is itself an invalid response. A client keeps an
optional `validator` attribute (None = off: one attribute test on the hot path); when set, it
calls `check_response` once per successful response, after the response time is measured (so
decoding does not inflate latency) and before it fires the request event, and reports the
returned error as the failure (`InvalidResponse: ...` in Locust's failure table).

A validator is anything with `validate(body, content_type, invocation) -> InvocationError | None`,
e.g. `sm_locust.serializers.ResponseValidator`.
"""

from __future__ import annotations

from typing import Any, Protocol

from sm_locust.invocation import Invocation, InvocationError

INVALID_RESPONSE = "InvalidResponse"


class Validator(Protocol):
    def validate(self, body: bytes, content_type: str | None, invocation: Invocation | None) -> InvocationError | None: ...


def check_response(validator: Any, body: bytes, content_type: str | None, invocation: Invocation | None) -> InvocationError | None:
    """The validator's verdict on one response; a validator that raises counts as InvalidResponse."""
    try:
        return validator.validate(body, content_type, invocation)
    except Exception as exc:  # never raised into the User
        return InvocationError(INVALID_RESPONSE, f"validator raised {type(exc).__name__}: {exc}")
