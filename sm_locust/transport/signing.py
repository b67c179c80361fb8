"""SigV4 signing of SageMaker Runtime requests, three interchangeable signers.

A signer adds `Host`, `X-Amz-Date`, `X-Amz-Security-Token` and `Authorization` to one request's
headers. All three give the same signature for the same request and time (tested), so the choice is
CPU per request: `lean` (default, precomputed per request shape and per second,
differential-tested against botocore), `botocore` (`SigV4Auth`, the reference), `crt` (`awscrt`).
The payload is always signed, as botocore does for this service (docs/transport.md, with the
figures). Credentials come from botocore's chain; the frozen copy is re-read every
`CREDENTIAL_CHECK_SECONDS`. Nothing here prints or logs a credential.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from sm_locust.aws.clients import FrozenCredentialsSource, chain_credentials
from sm_locust.errors import UsageError
from sm_locust.util.registry import Registry

if TYPE_CHECKING:
    from botocore.credentials import ReadOnlyCredentials

SIGNING_NAME = "sagemaker"
ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
CREDENTIAL_CHECK_SECONDS = 1.0
# lean signer memory bounds: signatures kept for the current second, large bodies' hashes by identity,
# templates (one per request shape)
MEMO_ENTRIES = 256
MEMO_MAX_BODY = 256 * 1024
HASH_ENTRIES = 512
HASH_MIN_BYTES = 16 * 1024
HASH_MAX_BYTES = 64 * 1024 * 1024
TEMPLATE_ENTRIES = 256
CRT_INSTALL_HINT = "pip install 'sm-locust[crt]'"

# botocore.auth.SIGNED_HEADERS_BLACKLIST: headers botocore never signs (proxies may change them).
UNSIGNED_HEADERS = frozenset(
    (
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    )
)

_SIGNER_OWNED = frozenset(("authorization", "x-amz-date", "x-amz-security-token", "host"))

SIGNERS: Registry[type[BaseSigner]] = Registry("signer")


class NoCredentialsError(Exception):
    """No credentials found in the provider chain (botocore's error name and text)."""

    def __init__(self) -> None:
        super().__init__("Unable to locate credentials")


@lru_cache(maxsize=256)
def host_header(url: str) -> str:
    """The Host header botocore signs for `url`: the port only when it is not the default one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = 443 if parts.scheme == "https" else 80
    if parts.port is not None and parts.port != default:
        return f"{host}:{parts.port}"
    return host


class CredentialSource:
    """Frozen credentials from a botocore credentials object, re-read once per check interval.

    `credentials` is anything with `get_frozen_credentials()` (botocore `Credentials` or
    `RefreshableCredentials`); None means botocore's default provider chain, resolved on first use.
    """

    def __init__(self, credentials: FrozenCredentialsSource | None = None,
                 check_interval: float = CREDENTIAL_CHECK_SECONDS):
        self._credentials = credentials
        self._check_interval = check_interval
        self._frozen: ReadOnlyCredentials | None = None
        self._error: Exception | None = None
        self._checked_at = float("-inf")

    def get(self) -> ReadOnlyCredentials:
        """A `ReadOnlyCredentials(access_key, secret_key, token)`; raises NoCredentialsError.

        A miss is remembered for the check interval too: without credentials every call fails at
        once instead of running botocore's provider chain again (~10 ms of CPU each time).
        """
        now = time.monotonic()
        if now - self._checked_at >= self._check_interval:
            self._checked_at = now
            self._frozen, self._error = None, None
            try:
                if self._credentials is None:
                    self._credentials = _default_credentials()
                frozen = self._credentials.get_frozen_credentials()
                if not frozen.access_key or not frozen.secret_key:
                    raise NoCredentialsError()
            except Exception as exc:
                self._error = exc
                raise
            self._frozen = frozen
        if self._frozen is None:
            raise (self._error or NoCredentialsError()).with_traceback(None)
        return self._frozen

    def __repr__(self) -> str:  # never show the keys
        return f"{type(self).__name__}(check_interval={self._check_interval})"


def _default_credentials() -> FrozenCredentialsSource:
    credentials = chain_credentials()  # botocore loads only when a client signs: after Locust patched gevent
    if credentials is None:
        raise NoCredentialsError()
    return credentials


class _Clock:
    """`X-Amz-Date` for the current second, formatted once per second."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def amz_date(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._text = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
            self._second = second
        return self._text


class BaseSigner:
    """Signs one request: `sign(method, url, headers, body) -> headers to send`.

    `url` is the full request URL with the path already percent-encoded as sent on the wire;
    `headers` are the request headers to sign (not modified). `amz_date` (`YYYYMMDDTHHMMSSZ`)
    fixes the signing time, for tests; by default it is now.
    """

    name = "base"

    def __init__(self, region: str, credentials: FrozenCredentialsSource | None = None, service: str = SIGNING_NAME):
        if not region:
            raise ValueError("a SigV4 signer needs a region")
        self.region = region
        self.service = service
        self.credentials = CredentialSource(credentials)
        self._clock = _Clock()

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        amz_date: str | None = None,
    ) -> dict[str, str]:
        raise NotImplementedError

    def _base_headers(self, url: str, headers: Mapping[str, str], amz_date: str, token: str | None):
        out = {k: v for k, v in headers.items() if k.lower() not in _SIGNER_OWNED}
        out["Host"] = host_header(url)
        out["X-Amz-Date"] = amz_date
        if token:
            out["X-Amz-Security-Token"] = token
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(region={self.region!r}, service={self.service!r})"


class SigningTemplate:
    """What SigV4 computes once per request shape: one method, URL, set of header values and credentials.

    `headers` are the headers to send before `X-Amz-Date` and `Authorization` (the caller's, minus
    those the signer owns, plus `Host` and, with temporary credentials, `X-Amz-Security-Token`).
    A signature then needs only the date, the payload hash and two SHA-256s:
    canonical request = `canonical_head + amz_date + canonical_tail + payload_hash`.
    Templates compare by identity (a transport may key its own per-shape data on them).
    """

    __slots__ = ("headers", "canonical_head", "canonical_tail", "signed_headers", "credentials")

    def __init__(self, headers: dict[str, str], canonical_head: str, canonical_tail: str, signed_headers: str,
                 credentials: ReadOnlyCredentials):
        self.headers = headers
        self.canonical_head = canonical_head
        self.canonical_tail = canonical_tail
        self.signed_headers = signed_headers
        self.credentials = credentials

    def __repr__(self) -> str:  # never show the keys
        return f"SigningTemplate(headers={sorted(self.headers)}, signed={self.signed_headers!r})"


@SIGNERS.register("lean", "fast", "python")
class LeanSigner(BaseSigner):
    """SigV4 in plain Python: per request shape a `SigningTemplate`, per second the scope and key.

    `sign_parts(method, url, headers, body)` is the hot path (the fast transport writes its own
    request head from it); `sign()` builds the same headers as a dict.
    """

    name = "lean"

    def __init__(self, region: str, credentials: FrozenCredentialsSource | None = None, service: str = SIGNING_NAME):
        super().__init__(region, credentials, service)
        self._key_for: tuple[str, str] | None = None
        self._key = b""
        self._paths: dict[str, str] = {}
        self._templates: dict[tuple, SigningTemplate] = {}
        self._hashes: dict[int, tuple[bytes, str]] = {}
        self._hashed_bytes = 0
        self._memo: dict[tuple, tuple[bytes, str]] = {}
        # the current second's parts: (amz_date, credentials, string-to-sign head, key, Authorization head)
        self._second: tuple = ("", None, "", b"", "")

    def _signing_key(self, secret: str, day: str) -> bytes:
        if self._key_for != (secret, day):
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
            for part in (self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._key, self._key_for = key, (secret, day)
        return self._key

    def _canonical_uri(self, path: str) -> str:
        uri = self._paths.get(path)
        if uri is None:
            from botocore.utils import normalize_url_path  # lazy: see _default_credentials

            # botocore: quote(normalize_url_path(path), safe='/~') - non-S3 paths are encoded twice
            uri = quote(normalize_url_path(path), safe="/~")
            if len(self._paths) < 1024:
                self._paths[path] = uri
        return uri

    def sign(self, method, url, headers, body=b"", *, amz_date=None):
        template, amz_date, authorization = self.sign_parts(method, url, headers, body, amz_date=amz_date)
        out = dict(template.headers)
        out["X-Amz-Date"] = amz_date
        out["Authorization"] = authorization
        return out

    def sign_parts(self, method: str, url: str, headers: Mapping[str, str], body: bytes = b"", *,
                   amz_date: str | None = None) -> tuple[SigningTemplate, str, str]:
        """`(template, X-Amz-Date, Authorization)`: the headers to send are `template.headers` plus those two.

        The same request signed in the same second gets the same signature (SigV4 has no nonce), so
        a pooled payload sent thousands of times a second is signed about once a second: the
        signature is remembered per (template, body object) for the rest of the second.
        """
        creds = self.credentials.get()
        if amz_date is None:
            amz_date = self._clock.amz_date()
        key = (method, url, tuple(headers.items()), creds)
        template = self._templates.get(key)
        if template is None:
            template = self._template(method, url, headers, creds, key)
        second = self._second
        if second[0] != amz_date or second[1] is not creds:
            second = self._new_second(amz_date, creds)
        if type(body) is bytes and len(body) <= MEMO_MAX_BODY:
            memo_key = (template, id(body))
            hit = self._memo.get(memo_key)
            if hit is not None and hit[0] is body:
                return template, amz_date, hit[1]
            authorization = self._authorization(template, body, amz_date, second)
            if len(self._memo) < MEMO_ENTRIES:
                self._memo[memo_key] = (body, authorization)  # holds the body: its id cannot be reused meanwhile
            return template, amz_date, authorization
        return template, amz_date, self._authorization(template, body, amz_date, second)

    def _authorization(self, template: SigningTemplate, body, amz_date: str, second: tuple) -> str:
        canonical = f"{template.canonical_head}{amz_date}{template.canonical_tail}{self._payload_hash(body)}"
        string_to_sign = second[2] + hashlib.sha256(canonical.encode()).hexdigest()
        signature = hmac.digest(second[3], string_to_sign.encode(), "sha256").hex()
        return f"{second[4]}{template.signed_headers}, Signature={signature}"

    def _new_second(self, amz_date: str, creds: ReadOnlyCredentials) -> tuple:
        """Scope, string-to-sign head, signing key and Authorization head for this second; the memo restarts."""
        day = amz_date[:8]
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        assert creds.secret_key is not None  # CredentialSource.get refuses credentials without keys
        second = (amz_date, creds, f"{ALGORITHM}\n{amz_date}\n{scope}\n", self._signing_key(creds.secret_key, day),
                  f"{ALGORITHM} Credential={creds.access_key}/{scope}, SignedHeaders=")
        self._memo.clear()
        self._second = second
        return second

    def _template(self, method: str, url: str, headers: Mapping[str, str], creds: ReadOnlyCredentials,
                  key: tuple) -> SigningTemplate:
        """The headers kept (`_base_headers`' rule) and the canonical request around the date and the
        payload hash; headers botocore never signs (`UNSIGNED_HEADERS`) are sent but not signed."""
        token = creds.token
        out = {k: v for k, v in headers.items() if k.lower() not in _SIGNER_OWNED}
        out["Host"] = host_header(url)
        if token:
            out["X-Amz-Security-Token"] = token
        signed: dict[str, list[str]] = {"x-amz-date": []}
        for k in out:
            lk = k.lower()
            if lk not in UNSIGNED_HEADERS:
                signed.setdefault(lk, []).append(k)
        before: list[str] = []
        after: list[str] = []
        for name in sorted(signed):
            if name == "x-amz-date":
                before, after = after, before  # everything so far sorts before the date
                continue
            after.append(f"{name}:{','.join([' '.join(str(out[k]).split()) for k in signed[name]])}\n")
        signed_headers = ";".join(sorted(signed))
        parts = _split(url)
        query = _canonical_query(parts.query) if parts.query else ""
        template = SigningTemplate(
            out,
            f"{method.upper()}\n{self._canonical_uri(parts.path or '/')}\n{query}\n{''.join(before)}x-amz-date:",
            f"\n{''.join(after)}\n{signed_headers}\n",
            signed_headers,
            creds,
        )
        if len(self._templates) >= TEMPLATE_ENTRIES:
            self._templates.clear()
            self._memo.clear()
        self._templates[key] = template
        return template

    def _payload_hash(self, body: bytes) -> str:
        """SHA-256 of the body, remembered for the large bodies last seen (pools resend the same
        objects; a 1 MB body costs ~600 µs to hash, a 1 KB one ~1 µs, less than remembering it).
        Keyed by identity, so never a wrong hit."""
        if not body:
            return EMPTY_SHA256
        if type(body) is not bytes or len(body) < HASH_MIN_BYTES:  # mutable buffers: hashed every time
            return hashlib.sha256(body).hexdigest()
        hit = self._hashes.get(id(body))
        if hit is not None and hit[0] is body:
            return hit[1]
        digest = hashlib.sha256(body).hexdigest()
        if len(self._hashes) >= HASH_ENTRIES or self._hashed_bytes + len(body) > HASH_MAX_BYTES:
            self._hashes.clear()
            self._hashed_bytes = 0
        self._hashes[id(body)] = (body, digest)  # holds the body: its id cannot be reused meanwhile
        self._hashed_bytes += len(body)
        return digest


@lru_cache(maxsize=256)
def _split(url: str):
    """urlsplit, cached: a client signs the same few URLs over and over."""
    return urlsplit(url)


def _canonical_query(query: str) -> str:
    # botocore: split on '&' and '=', sort the (key, value) pairs, values already encoded
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)


@SIGNERS.register("botocore", "boto3")
class BotocoreSigner(BaseSigner):
    """botocore's `SigV4Auth`, the reference implementation."""

    name = "botocore"

    def sign(self, method, url, headers, body=b"", *, amz_date=None):
        # lazy: see _default_credentials
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        creds = self.credentials.get()
        amz_date = amz_date or self._clock.amz_date()
        out = self._base_headers(url, headers, amz_date, creds.token)
        request = AWSRequest(method=method, url=url, headers=out, data=body)
        request.context["timestamp"] = amz_date
        auth = SigV4Auth(creds, self.service, self.region)
        # add_auth() would take its own clock; the same steps with the given time:
        canonical = auth.canonical_request(request)
        signature = auth.signature(auth.string_to_sign(request, canonical), request)
        signed = auth.signed_headers(auth.headers_to_sign(request))
        out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={auth.scope(request)}, SignedHeaders={signed}, "
                                f"Signature={signature}")  # as SigV4Auth writes it (its _inject_signature_to_request)
        return out


@SIGNERS.register("crt", "awscrt")
class CrtSigner(BaseSigner):
    """The C signer of awscrt (optional extra `crt`)."""

    name = "crt"

    def __init__(self, region: str, credentials: FrozenCredentialsSource | None = None, service: str = SIGNING_NAME):
        super().__init__(region, credentials, service)
        try:  # lazy: awscrt is the optional `crt` extra
            import awscrt.auth
            import awscrt.http
        except ImportError as exc:
            raise UsageError(f"the 'crt' signer needs awscrt: {CRT_INSTALL_HINT}") from exc
        self._auth, self._http = awscrt.auth, awscrt.http
        self._provider_for: ReadOnlyCredentials | None = None
        self._provider: object = None

    def _credentials_provider(self, creds: ReadOnlyCredentials) -> object:
        if self._provider_for is not creds:
            self._provider = self._auth.AwsCredentialsProvider.new_static(
                creds.access_key, creds.secret_key, creds.token
            )
            self._provider_for = creds
        return self._provider

    def sign(self, method, url, headers, body=b"", *, amz_date=None):
        auth, http = self._auth, self._http
        creds = self.credentials.get()
        amz_date = amz_date or self._clock.amz_date()
        out = self._base_headers(url, headers, amz_date, creds.token)
        parts = urlsplit(url)
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        when = when.replace(tzinfo=datetime.UTC)
        config = auth.AwsSigningConfig(
            algorithm=auth.AwsSigningAlgorithm.V4,
            signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
            credentials_provider=self._credentials_provider(creds),
            region=self.region,
            service=self.service,
            date=when,
            should_sign_header=_crt_should_sign,
            use_double_uri_encode=True,
            should_normalize_uri_path=True,
            signed_body_value=hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256,
            signed_body_header_type=auth.AwsSignedBodyHeaderType.NONE,
        )
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        # X-Amz-Date and the token are added by the CRT signer itself
        crt_headers = [
            (k, v) for k, v in out.items() if k not in ("X-Amz-Date", "X-Amz-Security-Token")
        ]
        request = http.HttpRequest(method, path, http.HttpHeaders(crt_headers))
        auth.aws_sign_request(request, config).result()
        signed = dict(request.headers)
        for key in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if key in signed:
                out[key] = signed[key]
        return out


def _crt_should_sign(name: str) -> bool:
    return name.lower() not in UNSIGNED_HEADERS


def create_signer(signer: str | BaseSigner, region: str,
                  credentials: FrozenCredentialsSource | None = None) -> BaseSigner:
    """A signer by registry name (`lean`, `botocore`, `crt`), or the given instance unchanged."""
    if isinstance(signer, BaseSigner):
        return signer
    return SIGNERS.get(signer)(region, credentials)


DEFAULT_SIGNER = "lean"
