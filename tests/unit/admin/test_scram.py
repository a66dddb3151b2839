"""Admin SCRAM credentials against a scripted fake cluster: what the requests carry (a salted
password a SCRAM login verifies, never the password), one change per user per request (a
KRaft controller refuses more), per-user results."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest

from kafkaio.admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkaio.errors import KafkaConfigError, ResourceNotFoundError, UnacceptableCredentialError
from kafkaio.net.sasl import ScramMechanism
from kafkaio.protocol import messages as m
from tests.unit.admin.fake import FakeCluster, admin_on
from tests.unit.metadata.responses import response

AR = m.AlterUserScramCredentialsResponse
DR = m.DescribeUserScramCredentialsResponse


def scram_login_succeeds(upsertion: Any, password: str) -> bool:
    """Run kafkaio's SCRAM client against a server holding only what the Admin sent (salt,
    iterations, salted password), as a Kafka broker stores it."""
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[upsertion.mechanism]
    digest = {1: "sha256", 2: "sha512"}[upsertion.mechanism]
    client = ScramMechanism(name, upsertion.name, password)
    client_first_bare = client.initial_response()[3:]
    nonce = client_first_bare.split(b",r=")[1] + b"server"
    server_first = b"r=%s,s=%s,i=%d" % (
        nonce,
        base64.b64encode(upsertion.salt),
        upsertion.iterations,
    )
    client_final = client.step(server_first)
    assert client_final is not None
    without_proof, proof = client_final.rsplit(b",p=", 1)
    auth = client_first_bare + b"," + server_first + b"," + without_proof
    client_key_stored = hmac.new(upsertion.salted_password, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key_stored).digest()
    signature = hmac.new(stored_key, auth, digest).digest()
    client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
    return hashlib.new(digest, client_key).digest() == stored_key


async def test_upsertions_carry_a_salted_password_a_scram_login_verifies() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return response()
        users = [u.name for u in (*request.deletions, *request.upsertions)]
        return AR(results=[AR.AlterUserScramCredentialsResult(user=u) for u in users])

    cluster = FakeCluster(handler)
    change = UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", "pässword", iterations=8192)
    assert "pässword" not in repr(change)
    assert await admin_on(cluster).alter_user_scram_credentials([change]) == {"carol": None}
    ((_, request),) = cluster.requests("AlterUserScramCredentialsRequest")
    (sent,) = request.upsertions
    assert (sent.name, sent.mechanism, sent.iterations, len(sent.salt)) == ("carol", 2, 8192, 32)
    assert "pässword".encode() not in sent.salted_password
    assert scram_login_succeeds(sent, "pässword")
    assert not scram_login_succeeds(sent, "password")


async def test_one_change_per_user_per_request_in_the_order_given() -> None:
    """Before, both changes of one user went in one request, which a KRaft controller
    refuses with DUPLICATE_RESOURCE."""
    seen: list[list[tuple[str, str]]] = []

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return response()
        batch = [("delete", d.name) for d in request.deletions]
        batch += [("upsert", u.name) for u in request.upsertions]
        seen.append(batch)
        names = [name for _, name in batch]
        assert len(names) == len(set(names))
        code = {"dave": 93}  # UNACCEPTABLE_CREDENTIAL for dave's first change
        return AR(
            results=[
                AR.AlterUserScramCredentialsResult(user=n, error_code=code.get(n, 0)) for n in names
            ]
        )

    cluster = FakeCluster(handler)
    results = await admin_on(cluster).alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "a"),
            UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", "b"),
            UserScramCredentialUpsertion("dave", "SCRAM-SHA-256", "c"),
            UserScramCredentialDeletion("dave", "SCRAM-SHA-512"),
            UserScramCredentialDeletion("carol", "SCRAM-SHA-256"),
        ]
    )
    assert results["carol"] is None
    assert isinstance(results["dave"], UnacceptableCredentialError)
    # dave's later change is not sent after its first failed
    assert seen == [
        [("upsert", "carol"), ("upsert", "dave")],
        [("upsert", "carol")],
        [("delete", "carol")],
    ]


async def test_describe_lists_mechanisms_and_per_user_errors() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return response()
        assert [u.name for u in request.users] == ["carol", "nobody"]
        return DR(
            results=[
                DR.DescribeUserScramCredentialsResult(
                    user="carol",
                    credential_infos=[DR.CredentialInfo(1, 4096), DR.CredentialInfo(2, 8192)],
                ),
                DR.DescribeUserScramCredentialsResult(
                    user="nobody", error_code=91, error_message="no such user"
                ),
            ]
        )

    described = await admin_on(FakeCluster(handler)).describe_user_scram_credentials(
        ["carol", "nobody", "carol"]
    )
    assert described["carol"].credentials == [
        ScramCredentialInfo("SCRAM-SHA-256", 4096),
        ScramCredentialInfo("SCRAM-SHA-512", 8192),
    ]
    assert described["carol"].error is None
    assert isinstance(described["nobody"].error, ResourceNotFoundError)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (UserScramCredentialUpsertion("u", "SCRAM-SHA-1", "p"), "unknown SCRAM mechanism"),
        (UserScramCredentialUpsertion("u", "SCRAM-SHA-256", "p", iterations=100), "4096-16384"),
        (UserScramCredentialUpsertion("", "SCRAM-SHA-256", "p"), "needs a user name"),
        (UserScramCredentialDeletion("u", "PLAIN"), "unknown SCRAM mechanism"),
    ],
)
async def test_bad_changes_are_refused_before_sending(change: Any, match: str) -> None:
    cluster = FakeCluster(lambda node, request: response())
    with pytest.raises(KafkaConfigError, match=match):
        await admin_on(cluster).alter_user_scram_credentials([change])
    assert cluster.requests("AlterUserScramCredentialsRequest") == []
