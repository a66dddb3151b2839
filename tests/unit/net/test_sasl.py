"""SASL mechanisms: RFC 5802/7677 SCRAM vectors, PLAIN and OAUTHBEARER bytes, SASLprep."""

from __future__ import annotations

import base64

import pytest

from kafkaio.errors import KafkaConfigError, KafkaError, SaslAuthenticationFailedError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.sasl import OAuthBearerMechanism, PlainMechanism, ScramMechanism, saslprep

# RFC 7677 section 3
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

# RFC 5802 section 5 (SHA-1; not a Kafka mechanism, same algorithm)
RFC5802_SERVER_FIRST = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
RFC5802_CLIENT_FINAL = (
    b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
)
RFC5802_SERVER_FINAL = b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="


def rfc7677() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")


def test_scram_sha256_rfc7677_vector() -> None:
    mech = rfc7677()
    assert mech.initial_response() == RFC7677_CLIENT_FIRST
    assert mech.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert mech.step(RFC7677_SERVER_FINAL) is None


def test_scram_sha1_rfc5802_vector() -> None:
    mech = ScramMechanism("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    assert mech.initial_response() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    assert mech.step(RFC5802_SERVER_FIRST) == RFC5802_CLIENT_FINAL
    assert mech.step(RFC5802_SERVER_FINAL) is None


def test_scram_wrong_server_signature_fails() -> None:
    mech = rfc7677()
    mech.initial_response()
    mech.step(RFC7677_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(SaslAuthenticationFailedError, match="server signature is wrong"):
        mech.step(forged)


def test_scram_wrong_password_gives_different_proof() -> None:
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil!", nonce="rOprNGfwEbeRWgbNEkqO")
    mech.initial_response()
    assert mech.step(RFC7677_SERVER_FIRST) != RFC7677_CLIENT_FINAL


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024", "1024 iterations"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,s=!!notbase64,i=4096", "malformed salt"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,i=4096", "lacks"),
        (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxx,s=W22Z,i=4096", "extension"),
        (b"e=unknown-user", "unknown-user"),
        (b"garbage", "malformed"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16385", "maximum 16384"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2147483648", "maximum"),
        (b"r=rOprNGfwEbeRWgbNEkqOxx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=" + b"9" * 5000, "maximum"),
    ],
)
def test_scram_bad_server_first(server_first: bytes, match: str) -> None:
    mech = rfc7677()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match=match):
        mech.step(server_first)


def test_scram_server_final_error() -> None:
    mech = rfc7677()
    mech.initial_response()
    mech.step(RFC7677_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        mech.step(b"e=invalid-proof")


def test_scram_sha512_round_trip_against_reference_formulas() -> None:
    import hashlib
    import hmac

    mech = ScramMechanism("SCRAM-SHA-512", "alice", "s3cret", nonce="abc")
    assert mech.initial_response() == b"n,,n=alice,r=abc"
    salt = b"0123456789abcdef"
    server_first = b"r=abcSERVER,s=" + base64.b64encode(salt) + b",i=4096"
    final = mech.step(server_first)
    assert final is not None
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cret", salt, 4096)
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()
    without_proof = final.rsplit(b",p=", 1)[0]
    auth = b"n=alice,r=abc," + server_first + b"," + without_proof
    signature = hmac.new(server_key, auth, "sha512").digest()
    assert mech.step(b"v=" + base64.b64encode(signature)) is None


def test_scram_escapes_username_and_uses_random_nonce() -> None:
    a = ScramMechanism("SCRAM-SHA-256", "us=er,x", "p")
    b = ScramMechanism("SCRAM-SHA-256", "us=er,x", "p")
    first_a, first_b = a.initial_response(), b.initial_response()
    assert first_a.startswith(b"n,,n=us=3Der=2Cx,r=")
    assert first_a != first_b  # nonces from secrets
    assert len(first_a.split(b",r=")[1]) >= 24


def test_scram_out_of_order_use() -> None:
    mech = rfc7677()
    with pytest.raises(KafkaError, match="out of order"):
        mech.step(RFC7677_SERVER_FIRST)
    with pytest.raises(KafkaConfigError):
        ScramMechanism("SCRAM-MD5", "u", "p")


@pytest.mark.parametrize(
    ("raw", "prepared"),
    [
        ("user", "user"),
        ("I\u00adX", "IX"),  # soft hyphen maps to nothing (RFC 4013 examples)
        ("\u00aa", "a"),  # NFKC
        ("\u2168", "IX"),  # NFKC
        ("a\u2003b", "a b"),  # non-ASCII space
    ],
)
def test_saslprep(raw: str, prepared: str) -> None:
    assert saslprep(raw) == prepared


def test_saslprep_rejects_prohibited() -> None:
    with pytest.raises(KafkaConfigError, match="U\\+0007"):
        saslprep("\u0007")


def test_plain_bytes() -> None:
    mech = PlainMechanism("alice", "secret")
    assert mech.initial_response() == b"\x00alice\x00secret"
    assert mech.step(b"") is None
    assert PlainMechanism("a", "b", authzid="z").initial_response() == b"z\x00a\x00b"
    with pytest.raises(KafkaConfigError):
        PlainMechanism("a\x00", "b")


def test_plain_repr_hides_password() -> None:
    assert "secret" not in repr(PlainMechanism("alice", "secret"))


def test_oauthbearer_bytes() -> None:
    mech = OAuthBearerMechanism("eyJ.abc.def")
    assert mech.initial_response() == b"n,,\x01auth=Bearer eyJ.abc.def\x01\x01"
    assert mech.step(b"") is None
    with_ext = OAuthBearerMechanism("t", authzid="bob", extensions={"traceId": "42"})
    assert with_ext.initial_response() == b"n,a=bob,\x01auth=Bearer t\x01traceId=42\x01\x01"


def test_oauthbearer_error_challenge() -> None:
    mech = OAuthBearerMechanism("tok")
    mech.initial_response()
    assert mech.step(b'{"status":"invalid_token"}') == b"\x01"
    assert mech.server_error == '{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        mech.step(b"")


@pytest.mark.parametrize("token", ["", "has space", "ctl\x01"])
def test_oauthbearer_rejects_bad_token(token: str) -> None:
    with pytest.raises(KafkaConfigError):
        OAuthBearerMechanism(token)


def test_scram_maximum_iterations_is_configurable() -> None:
    server_first = b"r=rOprNGfwEbeRWgbNEkqOxx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=20000"
    mech = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    mech.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match="sasl_scram_max_iterations"):
        mech.step(server_first)
    mech = ScramMechanism(
        "SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO", max_iterations=20000
    )
    mech.initial_response()
    assert mech.step(server_first) is not None
    with pytest.raises(KafkaConfigError, match="sasl_scram_max_iterations must be <= 2147483647"):
        ConnectionConfig(sasl_scram_max_iterations=2**31)
    with pytest.raises(KafkaConfigError, match="sasl_scram_max_iterations must be >= 4096"):
        ConnectionConfig(sasl_scram_max_iterations=100)
