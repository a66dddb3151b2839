"""Credentials for test brokers: a throwaway PKI for TLS listeners, unsecured OAuth tokens.

``make_certificates(directory)`` writes a test CA, a server certificate it signs (for
``localhost`` and ``127.0.0.1``) with its key as one PEM file (Apache Kafka's PEM keystore,
``ApacheKafka(tls_keystore=...)``), and an unrelated CA (a client trusting only that one
rejects the server). It needs the ``cryptography`` package; ``unavailable_reason()`` says
when it is missing.

``unsecured_jwt(subject)`` is an unsigned JWS (``{"alg": "none"}``) as Kafka's
OAuthBearerUnsecuredLoginCallbackHandler makes them, which Kafka's unsecured validator
accepts: for tests against a listener configured with that validator, never in production.
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TestCertificates", "make_certificates", "unavailable_reason", "unsecured_jwt"]

_VALID_DAYS = 2


def unavailable_reason() -> str | None:
    """None when certificates can be made here, else why not (for a skip message)."""
    try:
        import cryptography.x509  # noqa: F401
    except ImportError:
        return "the cryptography package is needed to make test certificates (pip install it)"
    return None


@dataclass(frozen=True, slots=True)
class TestCertificates:
    """Where ``make_certificates`` wrote each file (PEM)."""

    __test__ = False  # not a pytest test class

    ca: Path  # the CA certificate clients trust
    other_ca: Path  # a CA that signed nothing here
    certificate: Path  # the server certificate (localhost, 127.0.0.1)
    key: Path  # the server's private key (PKCS#8, unencrypted)
    keystore: Path  # key then certificate chain: Kafka's PEM keystore

    @classmethod
    def at(cls, directory: Path) -> TestCertificates:
        """The files ``make_certificates(directory)`` wrote."""
        return cls(
            ca=directory / "ca.pem",
            other_ca=directory / "other-ca.pem",
            certificate=directory / "server.pem",
            key=directory / "server.key",
            keystore=directory / "server-keystore.pem",
        )

    def client_context(self, *, trust: str = "ca") -> ssl.SSLContext:
        """A client context verifying certificates (and host names) against ``trust``:
        "ca" (the server's issuer) or "other_ca" (an unrelated CA)."""
        return ssl.create_default_context(cafile=str(getattr(self, trust)))


def make_certificates(directory: Path, hosts: tuple[str, ...] = ("localhost",)) -> TestCertificates:
    """Write a test CA, an unrelated CA and a server certificate for ``hosts`` and
    127.0.0.1, valid for two days, into ``directory``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def new_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return key, certificate

    ca_key, ca = new_ca("kafkaio test CA")
    _, other_ca = new_ca("kafkaio unrelated test CA")
    server_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    server = (
        x509.CertificateBuilder()
        .subject_name(name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = server_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    files = TestCertificates.at(directory)
    files.ca.write_bytes(ca.public_bytes(pem))
    files.other_ca.write_bytes(other_ca.public_bytes(pem))
    files.certificate.write_bytes(server.public_bytes(pem))
    files.key.write_bytes(key_pem)
    files.keystore.write_bytes(key_pem + server.public_bytes(pem) + ca.public_bytes(pem))
    return files


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(
    subject: str,
    *,
    lifetime_s: float = 3600.0,
    scope: tuple[str, ...] = (),
    issued_at: float | None = None,
) -> str:
    """An unsigned JWS compact string (header ``{"alg": "none"}``, an empty signature) with
    the claims ``sub``, ``iat`` and ``exp`` (``iat`` + ``lifetime_s``), and ``scope`` if
    given: what Kafka's unsecured OAUTHBEARER validator accepts."""
    now = time.time() if issued_at is None else issued_at
    claims: dict[str, object] = {"sub": subject, "iat": int(now), "exp": int(now + lifetime_s)}
    if scope:
        claims["scope"] = " ".join(scope)
    header = _b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{_b64url(json.dumps(claims).encode())}."
