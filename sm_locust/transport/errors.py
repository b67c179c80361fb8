"""Failures of the fast transport, named exactly as botocore names them.

An HTTP error response (status >= 300): `parse_error_response` reproduces botocore's rest-json
error parsing (the rules: docs/transport.md and docs/facts.md), and `error_from_parsed` /
`error_from_client_error` make the `InvocationError`; a ModelError keeps the model's status first
(`ModelError: (original status 400) ...`), the text the boto3 transport gives, so both transports
report the same failure for the same response. A network failure: `network_error` maps it to
botocore's names (`EndpointConnectionError`, `ReadTimeoutError`, ...), the text cut before the
endpoint URL so failures group by kind.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from sm_locust.invocation import InvocationError
from sm_locust.transport.signing import NoCredentialsError

MODEL_ERROR = "ModelError"
MODEL_ERROR_FIELDS = {"OriginalStatusCode": int, "OriginalMessage": str, "LogStreamArn": str}

ENDPOINT_CONNECTION_ERROR = "EndpointConnectionError"
CONNECT_TIMEOUT_ERROR = "ConnectTimeoutError"
READ_TIMEOUT_ERROR = "ReadTimeoutError"
CONNECTION_CLOSED_ERROR = "ConnectionClosedError"
SSL_ERROR = "SSLError"
NO_CREDENTIALS_ERROR = "NoCredentialsError"

# botocore.exceptions message templates, same names and words
_MESSAGES = {
    ENDPOINT_CONNECTION_ERROR: 'Could not connect to the endpoint URL: "{url}"',
    CONNECT_TIMEOUT_ERROR: 'Connect timeout on endpoint URL: "{url}"',
    READ_TIMEOUT_ERROR: 'Read timeout on endpoint URL: "{url}"',
    CONNECTION_CLOSED_ERROR: (
        'Connection was closed before we received a valid response from endpoint URL: "{url}".'
    ),
    SSL_ERROR: "SSL validation failed for {url} {error}",
    NO_CREDENTIALS_ERROR: "Unable to locate credentials",
}

_REASONS = {s.value: s.phrase for s in HTTPStatus}  # == http.client.responses, without ssl

# functions of geventhttpclient / gevent that only run while a connection is being opened
_CONNECT_FRAMES = frozenset(
    ("get_socket", "_create_socket", "_connect_socket", "create_connection", "_connect_tcp_socket")
)


def _header(headers: Any, name: str) -> str | None:
    """Case-insensitive header lookup on a dict, geventhttpclient Headers or list of pairs."""
    items = headers.items() if hasattr(headers, "items") else headers
    for key, value in items:
        if key.lower() == name:
            return value[0] if isinstance(value, list) else value
    return None


def _json_body(body: bytes) -> dict:
    """botocore `BaseJSONParser._parse_body_as_json`: {} if empty, text as message if not JSON."""
    if not body:
        return {}
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"message": text}
    # botocore would fail on a JSON value that is not an object; keep the text as the message
    return parsed if isinstance(parsed, dict) else {"message": text}


def _strip_code(code: object) -> Any:
    if isinstance(code, str):
        return code.split(":", 1)[0].rsplit("#", 1)[-1]
    return code


def parse_error_response(status: int, headers: object, body: bytes | None) -> dict:
    """botocore's parsed error response for an InvokeEndpoint* call.

    Returns `{"Error": {"Code": ..., "Message": ...}, **modeled fields}` as found in
    `ClientError.response` (without `ResponseMetadata`).
    """
    if status < 301:
        # botocore parses a 300 as a success; the client then raises with no Error
        return {}
    if status >= 500 and (body is None or not body.strip() or body.strip().startswith(b"<html>")):
        return {"Error": {"Code": str(status), "Message": _REASONS.get(status, "")}}
    parsed = _json_body(body or b"")
    message = parsed.get("message", parsed.get("Message", ""))
    error: dict[str, object] = {"Message": message, "Code": ""}
    code = parsed.get("__type", str(status))
    if code is not None:
        code = _strip_code(str(code))
        query_error = _header(headers, "x-amzn-query-error")
        if query_error is not None:
            parts = query_error.split(";")
            if len(parts) == 2 and parts[0]:
                error["QueryErrorCode"] = code
                error["Type"] = parts[1]
                code = parts[0]
        error["Code"] = code
    error_type = _header(headers, "x-amzn-errortype")
    if error_type is not None:
        error["Code"] = _strip_code(error_type)
    elif "code" in parsed or "Code" in parsed:
        error["Code"] = _strip_code(parsed.get("code", parsed.get("Code", "")))
    result: dict[str, object] = {"Error": error}
    if error["Code"] == MODEL_ERROR:
        # Endpoint._add_modeled_error_fields: the error shape's members, from the body
        for name, kind in MODEL_ERROR_FIELDS.items():
            if name in parsed and parsed[name] is not None:
                result[name] = kind(parsed[name])
        if "Message" in parsed:
            result["Message"] = parsed["Message"]
    return result


def error_from_parsed(parsed: Mapping[str, Any], status: int | None = None) -> InvocationError:
    """The InvocationError for a parsed error response (ours or a `ClientError.response`).

    Same text as the boto3 path (`sm_locust.transport.boto3.name_error`): code, else the status; a
    ModelError's message starts with `(original status N)`.
    """
    info = parsed.get("Error", {}) or {}
    if status is None:
        status = (parsed.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    code = str(info.get("QueryErrorCode") or info.get("Code") or status or "Unknown")
    message = str(info.get("Message") or "")
    if code == MODEL_ERROR and parsed.get("OriginalStatusCode"):
        message = f"(original status {parsed['OriginalStatusCode']}) {message}"
    return InvocationError(code, message, status)


def error_from_response(
    status: int, headers: object, body: bytes | None
) -> InvocationError:
    """`InvocationError` for an HTTP error response, as botocore would name it."""
    return error_from_parsed(parse_error_response(status, headers, body), status)


def error_from_client_error(exc: object) -> InvocationError:
    """`InvocationError` for a botocore `ClientError`: the boto3 path's twin of the above."""
    response = getattr(exc, "response", None) or {}
    return error_from_parsed(response)


def _in_connect_phase(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name in _CONNECT_FRAMES:
            return True
        tb = tb.tb_next
    return False


def network_error(exc: BaseException, url: str) -> InvocationError:
    """Map a transport exception to botocore's error name and text for `url`.

    - refused / unreachable / DNS failure while connecting -> EndpointConnectionError
    - timeout while connecting -> ConnectTimeoutError; while waiting or reading -> ReadTimeoutError
    - reset, broken pipe or closed before a complete response -> ConnectionClosedError
    - TLS failure -> SSLError; no credentials -> NoCredentialsError
    Anything else is named by its class, so it still shows up as a failure, never raised.
    """
    # lazy: ssl, gevent and geventhttpclient load after Locust has patched gevent (this module is imported before)
    import ssl

    from gevent import Timeout

    from geventhttpclient.response import HTTPParseError

    if isinstance(exc, InvocationError):
        return exc
    if isinstance(exc, NoCredentialsError):
        code = NO_CREDENTIALS_ERROR
    elif isinstance(exc, (Timeout, socket.timeout, TimeoutError)):
        code = CONNECT_TIMEOUT_ERROR if _in_connect_phase(exc) else READ_TIMEOUT_ERROR
    elif isinstance(exc, ssl.SSLError):
        code = SSL_ERROR
    elif isinstance(exc, HTTPParseError):  # includes HTTPConnectionClosed
        code = CONNECTION_CLOSED_ERROR
    elif isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        code = CONNECTION_CLOSED_ERROR
    elif isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
        code = ENDPOINT_CONNECTION_ERROR
    elif isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE):
        code = CONNECTION_CLOSED_ERROR
    elif isinstance(exc, OSError):
        code = ENDPOINT_CONNECTION_ERROR if _in_connect_phase(exc) else CONNECTION_CLOSED_ERROR
    else:
        return InvocationError(type(exc).__name__, str(exc))
    text = _MESSAGES[code].format(url=url, error=exc)
    if "endpoint URL" in text:  # as sm_locust.transport.boto3.name_error: the URL is the same every time
        text = text.split(":", 1)[0]
    return InvocationError(code, text)


# modeled exceptions of the ResponseStream event stream and their members (service model)
STREAM_EXCEPTION_MEMBERS = {
    "ModelStreamError": ("Message", "ErrorCode"),
    "InternalStreamFailure": ("Message",),
}


def error_from_stream_message(headers: Mapping[str, object], payload: bytes) -> InvocationError:
    """InvocationError for an `exception` / `error` event-stream message, as botocore names it.

    botocore (`BaseEventStreamParser._do_error_parse`): a modeled exception is named by
    `:exception-type`, its message is the payload's `Message` member; anything else is named by
    the `:error-code` header with the `:error-message` header as message.
    """
    exception_type = headers.get(":exception-type")
    if exception_type in STREAM_EXCEPTION_MEMBERS:
        body = _json_body(payload)
        members = STREAM_EXCEPTION_MEMBERS[exception_type]
        message = body.get("Message", "") if "Message" in members else ""
        parsed = {"Error": {"Code": exception_type, "Message": message}}
    else:
        parsed = {
            "Error": {
                "Code": headers.get(":error-code", ""),
                "Message": headers.get(":error-message", ""),
            }
        }
    return error_from_parsed(parsed, 200)
