"""SigV4 signing of SageMaker Runtime requests, three interchangeable signers.

A signer turns the headers of one request into the headers to send: it adds `Host`,
`X-Amz-Date`, `X-Amz-Security-Token` (temporary credentials) and `Authorization`, signing every
header it was given plus those. All three produce the same signature for the same request and time
(the tests check it), so the choice is only about CPU per request:

- `lean` (default): SigV4 written out for this one job. The signing key is derived once per
  (secret key, day) and cached, canonical URIs are cached per path, and the timestamp string once
  per second, so a signature costs one SHA-256 of the body, one of the canonical request and one
  HMAC. Differential-tested against botocore's `SigV4Auth` on every header SageMaker uses.
- `botocore`: `botocore.auth.SigV4Auth`, the reference (what boto3 does).
- `crt`: the C signer of `awscrt` (`pip install 'sm-locust[crt]'`).

Figures (µs per signature) are in docs/transport.md; `python bench/signing.py` measures them.

Credentials come from botocore's provider chain (environment, profile, SSO, container, instance
metadata...) unless given. Temporary credentials are refreshed by botocore; the frozen copy is
re-read at most every `CREDENTIAL_CHECK_SECONDS`, far inside botocore's 15-minute refresh window.
Nothing here prints or logs a credential.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlsplit

from sm_locust.registry import Registry

SIGNING_NAME = "sagemaker"
ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
CREDENTIAL_CHECK_SECONDS = 1.0
# lean signer memory bounds: signatures kept for the current second, body hashes by identity
MEMO_ENTRIES = 256
MEMO_MAX_BODY = 256 * 1024
HASH_ENTRIES = 512
HASH_MAX_BYTES = 64 * 1024 * 1024
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

    def __init__(self, credentials: Any = None, check_interval: float = CREDENTIAL_CHECK_SECONDS):
        self._credentials = credentials
        self._check_interval = check_interval
        self._frozen: Any = None
        self._checked_at = float("-inf")

    def get(self) -> Any:
        """A `ReadOnlyCredentials(access_key, secret_key, token)`; raises NoCredentialsError."""
        now = time.monotonic()
        if now - self._checked_at >= self._check_interval or self._frozen is None:
            if self._credentials is None:
                self._credentials = _default_credentials()
            frozen = self._credentials.get_frozen_credentials()
            if not frozen.access_key or not frozen.secret_key:
                raise NoCredentialsError()
            self._frozen = frozen
            self._checked_at = now
        return self._frozen

    def __repr__(self) -> str:  # never show the keys
        return f"{type(self).__name__}(check_interval={self._check_interval})"


def _default_credentials() -> Any:
    import botocore.session

    credentials = botocore.session.Session().get_credentials()
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

    def __init__(self, region: str, credentials: Any = None, service: str = SIGNING_NAME):
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


@SIGNERS.register("lean", "fast", "python")
class LeanSigner(BaseSigner):
    """SigV4 in plain Python with the signing key cached per (secret, day)."""

    name = "lean"

    def __init__(self, region: str, credentials: Any = None, service: str = SIGNING_NAME):
        super().__init__(region, credentials, service)
        self._key_for: tuple[str, str] | None = None
        self._key = b""
        self._paths: dict[str, str] = {}
        self._layouts: dict[tuple, tuple] = {}
        self._hashes: dict[int, tuple[bytes, str]] = {}
        self._hashed_bytes = 0
        self._memo: dict[tuple, tuple[bytes, dict]] = {}
        self._memo_date = ""

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
            from botocore.utils import normalize_url_path

            # botocore: quote(normalize_url_path(path), safe='/~') - non-S3 paths are encoded twice
            uri = quote(normalize_url_path(path), safe="/~")
            if len(self._paths) < 1024:
                self._paths[path] = uri
        return uri

    def sign(self, method, url, headers, body=b"", *, amz_date=None):
        creds = self.credentials.get()
        amz_date = amz_date or self._clock.amz_date()
        # The same request signed in the same second gets the same signature: a pooled payload
        # sent thousands of times a second is signed once per second (SigV4 has no nonce).
        if type(body) is not bytes or len(body) > MEMO_MAX_BODY:
            return self._sign(method, url, headers, body, amz_date, creds)
        if amz_date != self._memo_date:
            self._memo.clear()
            self._memo_date = amz_date
        key = (method, url, id(body), tuple(headers.items()), creds)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is body:
            return dict(hit[1])
        out = self._sign(method, url, headers, body, amz_date, creds)
        if len(self._memo) < MEMO_ENTRIES:
            self._memo[key] = (body, dict(out))  # holds the body: its id cannot be reused meanwhile
        return out

    def _sign(self, method, url, headers, body, amz_date, creds):
        token = creds.token
        layout = self._layouts.get((tuple(headers), bool(token)))
        if layout is None:
            layout = self._layout(headers, token)
        kept, names, signed_headers = layout
        out = {k: headers[k] for k in kept}
        out["Host"] = host_header(url)
        out["X-Amz-Date"] = amz_date
        if token:
            out["X-Amz-Security-Token"] = token
        canonical_headers = "".join(
            f"{name}:{','.join([' '.join(str(out[k]).split()) for k in keys])}\n" for name, keys in names
        )
        parts = _split(url)
        query = _canonical_query(parts.query) if parts.query else ""
        canonical = (
            f"{method.upper()}\n{self._canonical_uri(parts.path or '/')}\n{query}\n"
            f"{canonical_headers}\n{signed_headers}\n{self._payload_hash(body)}"
        )
        day = amz_date[:8]
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        string_to_sign = (
            f"{ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        signature = hmac.digest(
            self._signing_key(creds.secret_key, day), string_to_sign.encode(), "sha256"
        ).hex()
        out["Authorization"] = (
            f"{ALGORITHM} Credential={creds.access_key}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={signature}"
        )
        return out

    def _layout(self, headers: Mapping[str, str], token: str | None) -> tuple:
        """What does not change between requests with the same header names: the headers kept
        (`_base_headers`' rule), each signed name with its source keys, in order, and the
        SignedHeaders value."""
        kept = [k for k in headers if k.lower() not in _SIGNER_OWNED]
        keys = [*kept, "Host", "X-Amz-Date", *(["X-Amz-Security-Token"] if token else [])]
        signed: dict[str, list[str]] = {}
        for k in keys:
            lk = k.lower()
            if lk not in UNSIGNED_HEADERS:
                signed.setdefault(lk, []).append(k)
        names = tuple((n, tuple(signed[n])) for n in sorted(signed))
        layout = (tuple(kept), names, ";".join(n for n, _ in names))
        if len(self._layouts) < 256:
            self._layouts[(tuple(headers), bool(token))] = layout
        return layout

    def _payload_hash(self, body: bytes) -> str:
        """SHA-256 of the body, remembered for the bodies last seen (pools resend the same
        objects; a 1 MB body costs ~600 µs to hash). Keyed by identity, so never a wrong hit."""
        if not body:
            return EMPTY_SHA256
        if type(body) is not bytes:  # mutable buffers: hashed every time
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
        string_to_sign = auth.string_to_sign(request, canonical)
        auth._inject_signature_to_request(request, auth.signature(string_to_sign, request))
        out["Authorization"] = request.headers["Authorization"]
        return out


@SIGNERS.register("crt", "awscrt")
class CrtSigner(BaseSigner):
    """The C signer of awscrt (optional extra `crt`)."""

    name = "crt"

    def __init__(self, region: str, credentials: Any = None, service: str = SIGNING_NAME):
        super().__init__(region, credentials, service)
        try:
            import awscrt.auth  # noqa: F401
            import awscrt.http  # noqa: F401
        except ImportError as exc:
            from sm_locust.errors import UsageError

            raise UsageError(f"the 'crt' signer needs awscrt: {CRT_INSTALL_HINT}") from exc
        self._provider_for: Any = None
        self._provider: Any = None

    def _credentials_provider(self, creds: Any) -> Any:
        import awscrt.auth

        if self._provider_for is not creds:
            self._provider = awscrt.auth.AwsCredentialsProvider.new_static(
                creds.access_key, creds.secret_key, creds.token
            )
            self._provider_for = creds
        return self._provider

    def sign(self, method, url, headers, body=b"", *, amz_date=None):
        import datetime

        import awscrt.auth
        import awscrt.http

        creds = self.credentials.get()
        amz_date = amz_date or self._clock.amz_date()
        out = self._base_headers(url, headers, amz_date, creds.token)
        parts = urlsplit(url)
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        when = when.replace(tzinfo=datetime.timezone.utc)
        config = awscrt.auth.AwsSigningConfig(
            algorithm=awscrt.auth.AwsSigningAlgorithm.V4,
            signature_type=awscrt.auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
            credentials_provider=self._credentials_provider(creds),
            region=self.region,
            service=self.service,
            date=when,
            should_sign_header=_crt_should_sign,
            use_double_uri_encode=True,
            should_normalize_uri_path=True,
            signed_body_value=hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256,
            signed_body_header_type=awscrt.auth.AwsSignedBodyHeaderType.NONE,
        )
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        # X-Amz-Date and the token are added by the CRT signer itself
        crt_headers = [
            (k, v) for k, v in out.items() if k not in ("X-Amz-Date", "X-Amz-Security-Token")
        ]
        request = awscrt.http.HttpRequest(method, path, awscrt.http.HttpHeaders(crt_headers))
        awscrt.auth.aws_sign_request(request, config).result()
        signed = dict(request.headers)
        for key in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if key in signed:
                out[key] = signed[key]
        return out


def _crt_should_sign(name: str) -> bool:
    return name.lower() not in UNSIGNED_HEADERS


def create_signer(signer: str | BaseSigner, region: str, credentials: Any = None) -> BaseSigner:
    """A signer by registry name (`lean`, `botocore`, `crt`), or the given instance unchanged."""
    if isinstance(signer, BaseSigner):
        return signer
    return SIGNERS.get(signer)(region, credentials)


DEFAULT_SIGNER = "lean"
