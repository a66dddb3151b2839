"""kafkaio.metadata.coordinators: the one FindCoordinator lookup of every client."""

from __future__ import annotations

import pytest

from kafkaio.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaio.metadata.coordinators import (
    CoordinatorAddress,
    CoordinatorType,
    lookup_request,
    parse_lookup,
)
from kafkaio.protocol.messages import FindCoordinatorResponse

Entry = FindCoordinatorResponse.Coordinator


def test_the_request_carries_the_first_key_for_old_versions_and_all_for_new() -> None:
    request = lookup_request(CoordinatorType.TRANSACTION, ["t1", "t2"])
    assert (request.key, request.key_type, request.coordinator_keys) == ("t1", 1, ["t1", "t2"])
    with pytest.raises(ValueError):
        lookup_request(CoordinatorType.GROUP, [])


def test_an_answer_up_to_v3_is_about_the_one_key_sent() -> None:
    response = FindCoordinatorResponse(error_code=0, node_id=2, host="h", port=9)
    assert parse_lookup(response, CoordinatorType.GROUP, ["g"]) == {
        "g": CoordinatorAddress(2, "h", 9)
    }


def test_a_v4_answer_has_an_entry_per_key_errors_name_their_key() -> None:
    response = FindCoordinatorResponse(
        coordinators=[
            Entry(key="a", node_id=1, host="h1", port=1),
            Entry(key="b", error_code=GroupAuthorizationFailedError.code),
            Entry(key="c", node_id=-1, host=""),
            Entry(key="not-asked", node_id=3, host="h3", port=3),
        ]
    )
    found = parse_lookup(response, CoordinatorType.GROUP, ["a", "b", "c", "d"])
    assert found["a"] == CoordinatorAddress(1, "h1", 1)
    assert isinstance(found["b"], GroupAuthorizationFailedError)
    assert "group_id='b'" in str(found["b"])
    # no coordinator named, or no entry at all: retriable
    assert isinstance(found["c"], CoordinatorNotAvailableError) and found["c"].retriable
    assert isinstance(found["d"], CoordinatorNotAvailableError) and "'d'" in str(found["d"])
    assert "not-asked" not in found


def test_transactional_ids_are_named_as_such() -> None:
    response = FindCoordinatorResponse(
        coordinators=[Entry(key="tx", error_code=TransactionalIdAuthorizationFailedError.code)]
    )
    error = parse_lookup(response, CoordinatorType.TRANSACTION, ["tx"])["tx"]
    assert isinstance(error, TransactionalIdAuthorizationFailedError)
    assert "transactional_id='tx'" in str(error)
