"""Credentials never leak: not in logs (DEBUG), reprs, exceptions or config dumps.

SASL PLAIN, SCRAM and OAUTHBEARER connects of Producer, Consumer and Admin to a fake broker,
accepted and refused; every ``kafkaio`` log record (with tracebacks), the repr/str of the
clients and their configs, and the errors raised (with their causes) are searched for the
secret. Hostname verification on by default: tests/integration/test_net.py
(test_tls_with_hostname_verification,
test_tls_rejects_bad_certificates[wrong-hostname]).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

from kafkaio import Admin, Consumer, Producer, ShareConsumer
from kafkaio.errors import KafkaConfigError, KafkaError, SaslAuthenticationFailedError
from kafkaio.net.config import ConnectionConfig
from kafkaio.protocol import messages as m
from tests.leaks._silent_broker import APIS, _coordinator, _metadata
from tests.unit.net._fake_broker import FakeBroker, FakeClient, api_versions_response

PASSWORD = "pw-S3cr3t-7f3a9"
TOKEN = "tok-S3cr3t-b41c2"
SECRETS = (PASSWORD, TOKEN)
SASL_APIS = {**APIS, 17: (0, 1), 36: (0, 2)}


def sasl_broker_handler(port: list[int]) -> Any:
    """Accepts a SASL exchange iff the client's bytes carry PASSWORD or TOKEN; then answers
    discovery (ApiVersions, Metadata, FindCoordinator) and drops everything else."""

    async def handler(client: FakeClient) -> None:
        received = await client.read_request()
        assert received.api_key == 18
        await client.respond(received, api_versions_response(SASL_APIS))
        handshake = await client.read_request()
        await client.respond(
            handshake,
            m.SaslHandshakeResponse(mechanisms=["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]),
        )
        auth = await client.read_request()
        payload = bytes(auth.request.auth_bytes)
        good = any(s.encode() in payload for s in SECRETS)
        if handshake.request.mechanism == "SCRAM-SHA-256" or not good:
            await client.respond(
                auth,
                m.SaslAuthenticateResponse(
                    error_code=58, error_message="Authentication failed: invalid credentials"
                ),
            )
            return
        await client.respond(auth, m.SaslAuthenticateResponse(auth_bytes=b""))
        while True:
            received = await client.read_request()
            if received.api_key == 3:
                topics = received.request.topics
                names = None if topics is None else [t.name for t in topics]
                await client.respond(received, _metadata(port[0], names))
            elif received.api_key == 10:
                r = received.request
                keys = list(r.coordinator_keys) if received.version >= 4 else [r.key]
                await client.respond(received, _coordinator(port[0], received.version, keys))

    return handler


class Capture(logging.Handler):
    """Every record of the ``kafkaio`` loggers, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record) + repr(record.args))


@pytest.fixture
def captured() -> Iterator[Capture]:
    handler = Capture()
    logger = logging.getLogger("kafkaio")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def error_texts(exc: BaseException | None) -> Iterator[str]:
    """str and repr of an error, its args, and of every cause and context in its chain."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield str(exc)
        yield repr(exc)
        yield from (repr(a) for a in exc.args)
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                yield from error_texts(sub)
        exc = exc.__cause__ or exc.__context__


def dumps(obj: Any, depth: int = 0) -> Iterator[str]:
    """repr/str of an object and of its config-like attributes (configs, options)."""
    yield repr(obj)
    yield str(obj)
    if depth > 2:
        return
    for name in ("config", "_config", "_conn_config", "options", "_options", "connection"):
        value = getattr(obj, name, None)
        if value is not None and not callable(value):
            yield from dumps(value, depth + 1)


def assert_no_secret(texts: list[str], where: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{where} shows a credential: {text[:300]}"


def sasl_options(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    if mechanism == "OAUTHBEARER":

        async def provider() -> str:
            return TOKEN if password == PASSWORD else "tok-wrong"

        return dict(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        )
    return dict(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=password,
    )


def make_client(kind: str, bootstrap: str, options: dict[str, Any]) -> Any:
    if kind == "producer":
        return Producer(bootstrap, max_block_ms=600, request_timeout_ms=500, **options)
    if kind == "consumer":
        return Consumer(
            bootstrap_servers=bootstrap,
            group_id="g",
            default_api_timeout_ms=600,
            request_timeout_ms=500,
            fetch_max_wait_ms=100,
            **options,
        )
    return Admin(bootstrap, default_api_timeout_ms=600, request_timeout_ms=500, **options)


CASES = [
    ("PLAIN", PASSWORD, True),
    ("PLAIN", "pw-wrong", False),
    ("OAUTHBEARER", PASSWORD, True),
    ("OAUTHBEARER", "x", False),
    ("SCRAM-SHA-256", PASSWORD, False),  # the fake refuses SCRAM: an auth failure path
]


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
@pytest.mark.parametrize(("mechanism", "password", "accepted"), CASES)
def test_no_credential_in_logs_reprs_errors(
    kind: str, mechanism: str, password: str, accepted: bool, captured: Capture
) -> None:
    texts: list[str] = []
    errors: list[BaseException] = []

    async def main() -> None:
        port: list[int] = [0]
        async with FakeBroker(sasl_broker_handler(port)) as broker:
            port[0] = broker.port
            client = make_client(kind, broker.bootstrap, sasl_options(mechanism, password))
            texts.extend(dumps(client))
            with anyio.fail_after(10):
                try:
                    await client.start()
                except KafkaError as exc:
                    errors.append(exc)
                else:
                    texts.extend(dumps(client))
                    if kind == "consumer":
                        try:
                            await client.committed(("t", 0), timeout_ms=200)
                        except KafkaError as exc:
                            errors.append(exc)
                finally:
                    await client.close()
            assert broker.errors == []

    anyio.run(main)
    assert (errors == [] or kind == "consumer") if accepted else len(errors) == 1
    if not accepted:
        assert "SASL" in str(errors[0]) or "auth" in str(errors[0]).lower(), errors[0]
    for exc in errors:
        texts.extend(error_texts(exc))
    if accepted or kind != "admin":
        assert captured.texts, "nothing was logged at DEBUG: the capture is broken"
    assert any(mechanism in t or "SASL" in t or "sasl" in t for t in texts + captured.texts)
    assert_no_secret(texts, f"{kind} repr/config/error")
    assert_no_secret(captured.texts, f"{kind} log")


def test_connection_config_repr_and_dumps_hide_secrets() -> None:
    plain = ConnectionConfig(**sasl_options("PLAIN"))
    oauth = ConnectionConfig(**sasl_options("OAUTHBEARER"))
    for config in (plain, oauth):
        texts = list(dumps(config)) + [f"{config}", f"{config!r}", format(config)]
        assert_no_secret(texts, "ConnectionConfig")
    assert "sasl_plain_password='***'" in repr(plain)


def test_spark_settings_reprs_hide_secrets() -> None:
    # the Spark settings dataclasses' default repr showed the SASL password and the SSL key
    # password (and Spark logs options objects)
    pytest.importorskip("pyarrow", reason="kafkaio.spark needs the spark extra (pyarrow)")
    pytest.importorskip("pyspark", reason="kafkaio.spark needs the spark extra (pyspark)")
    from kafkaio.spark.options import SinkOptions, SourceOptions  # noqa: PLC0415

    options = {
        "kafka.bootstrap.servers": "a:1",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="alice" password="{PASSWORD}";'
        ),
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.key.password": TOKEN,
        "subscribe": "t",
        "topic": "t",
    }
    for parsed in (SourceOptions.parse(options), SinkOptions.parse(options)):
        texts = [repr(parsed), str(parsed), repr(parsed.client), repr(parsed.client.ssl_files)]
        assert_no_secret(texts, type(parsed).__name__)
        assert "sasl_plain_password': '***'" in repr(parsed) and "key_password='***'" in repr(parsed)
        assert parsed.client.options["sasl_plain_password"] == PASSWORD  # still usable


def test_config_errors_do_not_echo_secrets() -> None:
    """A misspelt or misplaced credential option: the error names the option, not its value."""
    with pytest.raises(KafkaConfigError) as typo:
        Producer(
            "127.0.0.1:1",
            security_protocol="SASL_PLAINTEXT",
            sasl_plain_username="a",
            sasl_plain_pasword=PASSWORD,
        )
    with pytest.raises(KafkaConfigError) as not_sasl:
        Admin("127.0.0.1:1", sasl_plain_username="a", sasl_plain_password=PASSWORD)
    with pytest.raises(KafkaConfigError) as no_ssl_password:
        Consumer(bootstrap_servers="127.0.0.1:1", ssl_password=PASSWORD)
    for info in (typo, not_sasl, no_ssl_password):
        assert_no_secret(list(error_texts(info.value)), "config error")
    assert "sasl_plain_password" in str(typo.value)  # the did-you-mean hint


@pytest.mark.parametrize("kind", ["producer", "consumer", "share", "admin"])
def test_authentication_failure_is_raised_at_once(kind: str) -> None:
    """A refused login is final: start() raises the SaslAuthenticationFailedError itself well
    before a 30 s max_block_ms/default_api_timeout_ms (no retries until the timeout)."""
    raised: list[KafkaError] = []

    async def main() -> None:
        port: list[int] = [0]
        async with FakeBroker(sasl_broker_handler(port)) as broker:
            port[0] = broker.port
            options = sasl_options("PLAIN", "pw-wrong")
            if kind == "producer":
                client: Any = Producer(broker.bootstrap, max_block_ms=30_000, **options)
            elif kind == "consumer":
                client = Consumer(
                    bootstrap_servers=broker.bootstrap, default_api_timeout_ms=30_000, **options
                )
            elif kind == "share":
                client = ShareConsumer(
                    "t",
                    bootstrap_servers=broker.bootstrap,
                    group_id="g",
                    default_api_timeout_ms=30_000,
                    **options,
                )
            else:
                client = Admin(broker.bootstrap, default_api_timeout_ms=30_000, **options)
            try:
                with anyio.fail_after(2):
                    await client.start()
            except KafkaError as exc:
                raised.append(exc)
            finally:
                await client.close()

    anyio.run(main)
    assert isinstance(raised[0], SaslAuthenticationFailedError), raised
