"""The fast transport over TLS: its own request writer sends through geventhttpclient's TLS pool, the
certificate is checked against `ca_bundle`, keep-alive connections are reused, and a certificate it
cannot verify is an `SSLError` failure (never a call sent in the clear)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from gevent.server import StreamServer
from locust.env import Environment

import pytest

from sm_locust.invocation import Invocation
from tests.fakes import recorded, signed_client

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

x509 = pytest.importorskip("cryptography.x509")

ANSWER = b'{"ok": true}'
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-Amzn-Invoked-Production-Variant: v1\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))


def self_signed(tmp_path):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(certfile), str(keyfile)


class TlsServer:
    """Answers every request with RESPONSE on keep-alive TLS connections; records heads and connections."""

    def __init__(self, certfile: str, keyfile: str):
        self.heads: list[str] = []
        self.connections = 0
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certfile, keyfile)
        self._server = StreamServer(("127.0.0.1", 0), self._handle, ssl_context=context)

    def _handle(self, sock, _address) -> None:
        self.connections += 1
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                text = head.decode("latin-1")
                length = next((int(line.split(":", 1)[1]) for line in text.split("\r\n")
                               if line.lower().startswith("content-length:")), 0)
                while len(buffer) < length:
                    buffer += sock.recv(65536)
                buffer = buffer[length:]
                self.heads.append(text)
                sock.sendall(RESPONSE)
        except OSError:  # the client gave up on the handshake (unverified certificate)
            return
        finally:
            sock.close()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> TlsServer:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop(timeout=1)


def test_fast_transport_over_tls_with_a_ca_bundle(tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    env = Environment()
    seen = recorded(env)
    with TlsServer(certfile, keyfile) as server:
        client = signed_client("fast", env, server.url, endpoint="ep", ca_bundle=certfile)
        results = [client.invoke(Invocation(body=b'{"n": %d}' % i, custom_attributes="trace=1")) for i in range(3)]
        client.close()
    assert [r.body for r in results] == [ANSWER] * 3 and results[0].variant == "v1", [e["exception"] for e in seen]
    assert server.connections == 1  # one keep-alive connection for the three calls
    head = server.heads[0].split("\r\n")
    assert head[0] == "POST /endpoints/ep/invocations HTTP/1.1"
    fields = dict(line.split(": ", 1) for line in head[1:])
    assert fields["Host"] == f"127.0.0.1:{server.url.rsplit(':', 1)[1]}"
    assert fields["Content-Length"] == "8" and fields["X-Amzn-SageMaker-Custom-Attributes"] == "trace=1"
    assert fields["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=") and "X-Amz-Date" in fields


def test_an_unverified_certificate_is_an_ssl_error_failure(tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    env = Environment()
    seen = recorded(env)
    with TlsServer(certfile, keyfile) as server:
        client = signed_client("fast", env, server.url, endpoint="ep")  # certifi's bundle: not this certificate
        assert client.invoke(Invocation(body=b"{}")) is None
        client.close()
    assert str(seen[0]["exception"]).startswith("SSLError: SSL validation failed for "), seen[0]["exception"]
    assert server.heads == []
