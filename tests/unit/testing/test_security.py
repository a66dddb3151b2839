"""kafkaio.testing.security without a broker: the test PKI verifies as a client expects
(trusted CA, host names, the unrelated CA rejected) and tokens carry the claims Kafka's
unsecured validator reads."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from pathlib import Path

import pytest

from kafkaio.testing import security

pytestmark = pytest.mark.skipif(
    security.unavailable_reason() is not None, reason=str(security.unavailable_reason())
)


def handshake(files: security.TestCertificates, context: ssl.SSLContext, host: str) -> None:
    """A TLS handshake with a server holding the keystore's key and chain."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(files.keystore)  # key and chain in one file, as Kafka's
    left, right = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server_context.wrap_socket(right, server_side=True):
                pass
        except (ssl.SSLError, OSError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with context.wrap_socket(left, server_hostname=host):
            pass
    finally:
        left.close()
        thread.join(5)
        right.close()


def test_the_server_certificate_verifies_for_its_names_only(tmp_path: Path) -> None:
    files = security.make_certificates(tmp_path)
    assert files == security.TestCertificates.at(tmp_path)
    for host in ("localhost", "127.0.0.1"):
        handshake(files, files.client_context(), host)
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(files, files.client_context(), "broker.example.com")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(files, files.client_context(trust="other_ca"), "localhost")
    assert b"BEGIN PRIVATE KEY" in files.keystore.read_bytes()  # PKCS#8, unencrypted


def test_unsecured_jwt_claims() -> None:
    token = security.unsecured_jwt("svc", lifetime_s=60, scope=("a", "b"), issued_at=1000)
    header, claims, signature = token.split(".")

    def decode(part: str) -> object:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    assert decode(header) == {"alg": "none"} and signature == ""
    assert decode(claims) == {"sub": "svc", "iat": 1000, "exp": 1060, "scope": "a b"}
