"""What SageMaker's runtime API accepts, checked once before a test sends anything.

A value SageMaker refuses is refused on every request, so it is one line here naming the option and
the rule. The rules are botocore's service model for `sagemaker-runtime` (InvokeEndpoint's `pattern`,
`min`, `max`; docs/facts.md, "SageMaker Runtime request limits"): Java patterns matched against the
whole value, the ASCII class read as printable ASCII plus tab (a control character cannot travel in an
HTTP header). `MAX_BODY_BYTES` is the body limit; the local endpoint enforces it as SageMaker does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sm_locust.errors import UsageError

MAX_BODY_BYTES = 6_291_456  # InvokeEndpoint's Body: max 6291456 (6 MB)

_NAME = r"[a-zA-Z0-9](?:-*[a-zA-Z0-9])*"  # EndpointName, TargetVariant, TargetContainerHostname
_NAME_SAYS = "letters, digits and hyphens, starting and ending with a letter or digit, at most 63"
_HEADER_TEXT = r"[\t\x20-\x7e]*"  # \p{ASCII}*, without the control characters no header can carry
_PRINTABLE_FROM_NON_SPACE = r"[\x21-\x7e][\x20-\x7e]*"  # \A\S[\p{Print}]*\z


@dataclass(frozen=True)
class Rule:
    """One InvokeEndpoint member: its API name, its flag, the pattern and length bounds."""

    api_name: str
    flag: str
    pattern: str
    max_length: int
    min_length: int = 0
    says: str = ""

    def problem(self, value: str) -> str | None:
        """Why `value` is not accepted, or None."""
        if len(value) < self.min_length:
            return f"must not be empty ({self.api_name})"
        if len(value) > self.max_length:
            return f"is {len(value)} characters; {self.api_name} takes at most {self.max_length}"
        if not re.fullmatch(self.pattern, value):
            bad = next((c for c in value if not re.fullmatch(r"[\t\x20-\x7e]", c)), None)
            if bad is not None:
                return f"holds {bad!r}: {self.api_name} takes {self.says or 'printable ASCII'}"
            return f"does not match {self.api_name}'s pattern: {self.says}"
        return None


ENDPOINT_NAME = Rule("EndpointName", "--endpoint-name", _NAME, 63,
                     says=_NAME_SAYS)

# Invocation field -> its rule (sm_locust.invocation.Invocation.http_headers names the wire headers).
HEADER_RULES: dict[str, Rule] = {
    "content_type": Rule("ContentType", "--content-type", _HEADER_TEXT, 1024, says="printable ASCII, at most 1024"),
    "accept": Rule("Accept", "--accept", _HEADER_TEXT, 1024, says="printable ASCII, at most 1024"),
    "custom_attributes": Rule("CustomAttributes", "--custom-attributes", _HEADER_TEXT, 1024,
                              says="printable ASCII, at most 1024"),
    "target_model": Rule("TargetModel", "--target-model", _PRINTABLE_FROM_NON_SPACE, 1024, 1,
                         says="printable ASCII not starting with a space, 1-1024"),
    "target_variant": Rule("TargetVariant", "--target-variant", _NAME, 63,
                           says=_NAME_SAYS),
    "target_container_hostname": Rule("TargetContainerHostname", "TargetContainerHostname", _NAME, 63,
                                      says="letters, digits and hyphens, at most 63"),
    "inference_component": Rule("InferenceComponentName", "--inference-component",
                                r"[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?", 63,
                                says=_NAME_SAYS),
    "inference_id": Rule("InferenceId", "--inference-id", _PRINTABLE_FROM_NON_SPACE, 64, 1,
                         says="printable ASCII not starting with a space, 1-64"),
    "enable_explanations": Rule("EnableExplanations", "EnableExplanations", r"[\x20-\x7e]*", 64, 1,
                                says="printable ASCII, 1-64"),
    "session_id": Rule("SessionId", "SessionId", r"NEW_SESSION|" + _NAME, 256,
                       says="NEW_SESSION, or letters, digits and hyphens, at most 256"),
}


def check_endpoint_name(name: str, flag: str = "--endpoint-name") -> str:
    """`name` when SageMaker can have it, else a one-line UsageError naming `flag`."""
    problem = ENDPOINT_NAME.problem(name)
    if problem:
        raise UsageError(f"{flag} {name!r} {problem}")
    return name


def check_header(field: str, value: str | None, where: str = "") -> None:
    """A UsageError when `value` cannot be the `field` of an InvokeEndpoint request. `where` names its
    source (a JSONL line); without it the option's flag is named."""
    rule = HEADER_RULES.get(field)
    if rule is None or value is None:
        return
    problem = rule.problem(value)
    if problem:
        raise UsageError(f"{where + ': ' + rule.api_name if where else rule.flag} {_shown(value)} {problem}")


def check_body_size(size: int, where: str, hint: str = "") -> None:
    """A UsageError when a request body is over SageMaker's limit (6 MB)."""
    if size > MAX_BODY_BYTES:
        raise UsageError(f"{where}: the request body is {size:,} bytes; SageMaker's InvokeEndpoint takes at most "
                         f"{MAX_BODY_BYTES:,} (6 MB){'; ' + hint if hint else ''}")


def _shown(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 4] + "...'"
