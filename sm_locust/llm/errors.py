"""In-band errors of LLM streams: a generation that fails after its stream started says so in the bytes.

InvokeEndpointWithResponseStream has answered 200 and streamed tokens by the time a container's
generation fails, so the failure travels inside the model's own stream, in each container's format
(docs/facts.md, "LLM containers' streams", has each fact and its upstream source):

- TGI: an SSE event `{"error": TEXT, "error_type": KIND}` (`generation`, `incomplete_generation_stream`,
  `validation`, ...), the stream's last;
- LMI / DJL rolling batch: a last token line whose token has id -1 and an `error_msg`, with
  `details.finish_reason: "error"` (the TGI-compatible output keeps only the id and the finish reason;
  the `3p` output an `error` object with `error_msg`); LMI's chat output: a choice with
  `finish_reason: "error"`;
- OpenAI-style servers (vLLM, TGI's Messages API): a chunk `{"error": {"message": ..., "type": ..., "code": N}}`
  (TGI: `http_status_code` and no type), followed by `data: [DONE]`.

`in_band_error(obj)` names the error one decoded JSON object carries (None for anything else, cheaply:
it runs on every object of every stream). The name is the failure code Locust's failure table groups
by, `<container>.<kind>`: `TGI.generation`, `LMI.error`, `OpenAI.InternalServerError`, `OpenAI.error`
(no type given), `OpenAI.finish_reason_error`; the message is the container's text (the client's `InvocationError`
sanitises it). Pure: nothing here imports Locust or another sm_locust module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TGI_PREFIX = "TGI."
LMI_ERROR = "LMI.error"
OPENAI_PREFIX = "OpenAI."
OPENAI_ERROR = "OpenAI.error"
FINISH_REASON_ERROR = "OpenAI.finish_reason_error"
GENERIC = "InBandError"
LMI_ERROR_TOKEN_ID = -1
_KIND = re.compile(r"[^A-Za-z0-9_]+")
MAX_KIND = 48


@dataclass(frozen=True)
class InBandError:
    """One stream's in-band error: its failure code and the container's message (the client reports it as
    `InvocationError(code, message)`: `TGI.generation: Request failed during generation: ...`)."""

    code: str
    message: str = ""


def _kind(value: object) -> str:
    """A container's error kind as a code suffix: letters, digits and `_` only (it is untrusted text)."""
    return _KIND.sub("_", str(value)).strip("_")[:MAX_KIND] or "error"


def _status_prefix(status: object) -> str:
    return f"(status {status}) " if isinstance(status, int) and not isinstance(status, bool) else ""


def in_band_error(obj: object) -> InBandError | None:
    """The in-band error `obj` (one decoded JSON object of a stream) carries, or None."""
    if not isinstance(obj, dict):
        return None
    error = obj.get("error")
    if error is not None:
        return _error_member(obj, error)
    token = obj.get("token")
    details = obj.get("details")
    failed = isinstance(details, dict) and details.get("finish_reason") == "error"
    if isinstance(token, dict) and (token.get("error_msg") is not None
                                    or (failed and token.get("id") == LMI_ERROR_TOKEN_ID)):
        return InBandError(LMI_ERROR, str(token.get("error_msg") or "the generation failed (finish_reason error)"))
    if failed:
        return InBandError(LMI_ERROR, "the generation failed (finish_reason error)")
    choices = obj.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and choice.get("finish_reason") == "error":
                return InBandError(FINISH_REASON_ERROR, "a choice finished with finish_reason \"error\"")
    return None


def _error_member(obj: dict, error: object) -> InBandError | None:
    """An object with an `error` member: TGI's event, an OpenAI-style error chunk, LMI's error objects."""
    if isinstance(error, str):
        if "error_type" in obj:
            return InBandError(TGI_PREFIX + _kind(obj["error_type"]), error)
        return InBandError(LMI_ERROR if "code" in obj or "details" in obj else GENERIC, error)
    if isinstance(error, dict):
        if "error_msg" in error:  # LMI's 3p output: {"error": {"error_code": 400, "error_msg": ...}}
            return InBandError(LMI_ERROR, _status_prefix(error.get("error_code")) + str(error["error_msg"]))
        kind = error.get("type")
        status = error.get("code", error.get("http_status_code"))
        code = OPENAI_PREFIX + _kind(kind) if kind else OPENAI_ERROR
        return InBandError(code, _status_prefix(status) + str(error.get("message", "")))
    return None
