"""Tests of kafkaio.errors: the broker error-code table, its flags and the code lookups.

Flag facts come from the Java client's exception classes (Kafka 4.4 `Errors.java`); the classes
are generated from that table by tools/gen_errors.py (tests/unit/test_gen_errors.py).
"""

from __future__ import annotations

import pickle
import re

import pytest

from kafkaio import errors
from kafkaio.errors import (
    ERRORS_BY_CODE,
    BrokerResponseError,
    CorruptMessageError,
    CorruptRecordError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    UnknownBrokerError,
    UnknownServerError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_code,
)

NEWEST_CODE = 136  # CONTROLLER_ID_NOT_REGISTERED, Kafka 4.4

# Codes whose Java exception extends InvalidMetadataException (itself a RetriableException).
JAVA_INVALID_METADATA = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}
# Codes whose Java exception extends RetriableException but not InvalidMetadataException.
JAVA_RETRIABLE_ONLY = {2, 7, 14, 15, 16, 19, 20, 41, 51, 70, 71, 75, 78, 88, 89, 106, 122, 123, 133}


def expected_class_name(kafka_name: str) -> str:
    camel = "".join(word.capitalize() for word in kafka_name.split("_"))
    for suffix in ("Exception", "Error"):
        camel = camel.removesuffix(suffix)
    return camel + "Error"


ALL_CODES = sorted(ERRORS_BY_CODE)


def test_table_covers_every_code_from_minus_one_to_newest() -> None:
    assert set(ERRORS_BY_CODE) == set(range(-1, NEWEST_CODE + 1)) - {0}


@pytest.mark.parametrize("code", ALL_CODES)
def test_code_round_trips_through_its_class(code: int) -> None:
    cls = error_for_code(code)
    assert cls is ERRORS_BY_CODE[code]
    assert cls.code == code
    assert issubclass(cls, BrokerResponseError)
    assert issubclass(cls, KafkaError)
    assert re.fullmatch(r"[A-Z][A-Z0-9_]+", cls.name)
    assert cls.__name__ == expected_class_name(cls.name)
    assert getattr(errors, cls.__name__) is cls  # importable by name
    assert cls.description.endswith(".")
    err = cls()
    assert err.code == code
    assert f"{cls.name} (error {code})" in str(err)
    assert cls.description in str(err)


def test_names_and_class_names_are_unique() -> None:
    classes = list(ERRORS_BY_CODE.values())
    assert len({cls.name for cls in classes}) == len(classes)
    assert len({cls.__name__ for cls in classes}) == len(classes)
    assert len(set(classes)) == len(classes)


def test_every_code_class_in_the_module_is_registered() -> None:
    defined = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, BrokerResponseError) and "code" in vars(obj)
    }
    assert defined == set(ERRORS_BY_CODE.values())


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (-1, "UNKNOWN_SERVER_ERROR"),
        (1, "OFFSET_OUT_OF_RANGE"),
        (3, "UNKNOWN_TOPIC_OR_PARTITION"),
        (6, "NOT_LEADER_OR_FOLLOWER"),
        (13, "NETWORK_EXCEPTION"),
        (25, "UNKNOWN_MEMBER_ID"),
        (27, "REBALANCE_IN_PROGRESS"),
        (35, "UNSUPPORTED_VERSION"),
        (56, "KAFKA_STORAGE_ERROR"),
        (87, "INVALID_RECORD"),
        (90, "PRODUCER_FENCED"),
        (100, "UNKNOWN_TOPIC_ID"),
        (110, "FENCED_MEMBER_EPOCH"),
        (113, "STALE_MEMBER_EPOCH"),
        (120, "TRANSACTION_ABORTABLE"),
        (121, "INVALID_RECORD_STATE"),
        (122, "SHARE_SESSION_NOT_FOUND"),
        (123, "INVALID_SHARE_SESSION_EPOCH"),
        (124, "FENCED_STATE_EPOCH"),
        (125, "INVALID_VOTER_KEY"),
        (126, "DUPLICATE_VOTER"),
        (127, "VOTER_NOT_FOUND"),
        (128, "INVALID_REGULAR_EXPRESSION"),
        (129, "REBOOTSTRAP_REQUIRED"),
        (132, "STREAMS_TOPOLOGY_FENCED"),
        (133, "SHARE_SESSION_LIMIT_REACHED"),
    ],
)
def test_kafka_names_match_codes(code: int, name: str) -> None:
    assert error_for_code(code).name == name


@pytest.mark.parametrize(
    ("name", "retriable", "invalid_metadata"),
    [
        ("NOT_LEADER_OR_FOLLOWER", True, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", True, True),
        ("LEADER_NOT_AVAILABLE", True, True),
        ("FENCED_LEADER_EPOCH", True, True),
        ("KAFKA_STORAGE_ERROR", True, True),
        ("UNKNOWN_TOPIC_ID", True, True),
        ("INCONSISTENT_TOPIC_ID", True, True),
        ("NETWORK_EXCEPTION", True, True),
        ("UNKNOWN_LEADER_EPOCH", True, False),
        ("NOT_CONTROLLER", True, False),
        ("COORDINATOR_NOT_AVAILABLE", True, False),
        ("NOT_COORDINATOR", True, False),
        ("COORDINATOR_LOAD_IN_PROGRESS", True, False),
        ("REQUEST_TIMED_OUT", True, False),
        ("CORRUPT_MESSAGE", True, False),
        ("CONCURRENT_TRANSACTIONS", True, False),
        ("SHARE_SESSION_LIMIT_REACHED", True, False),
        ("TOPIC_AUTHORIZATION_FAILED", False, False),
        ("REBALANCE_IN_PROGRESS", False, False),
        ("UNKNOWN_MEMBER_ID", False, False),
        ("ILLEGAL_GENERATION", False, False),
        ("PRODUCER_FENCED", False, False),
        ("INVALID_PRODUCER_EPOCH", False, False),
        ("UNKNOWN_SERVER_ERROR", False, False),
        ("BROKER_NOT_AVAILABLE", False, False),
        ("UNSUPPORTED_VERSION", False, False),
        ("REBOOTSTRAP_REQUIRED", False, False),
        ("TRANSACTION_ABORTABLE", False, False),
        ("STALE_MEMBER_EPOCH", False, False),
    ],
)
def test_flags_match_java(name: str, retriable: bool, invalid_metadata: bool) -> None:
    (cls,) = [cls for cls in ERRORS_BY_CODE.values() if cls.name == name]
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata


def test_flag_sets_match_java_across_the_whole_table() -> None:
    invalid_metadata = {c for c, cls in ERRORS_BY_CODE.items() if cls.invalid_metadata}
    retriable = {c for c, cls in ERRORS_BY_CODE.items() if cls.retriable}
    assert invalid_metadata == JAVA_INVALID_METADATA
    assert retriable == JAVA_INVALID_METADATA | JAVA_RETRIABLE_ONLY
    assert invalid_metadata <= retriable  # InvalidMetadataException is a RetriableException


def test_flags_are_readable_on_instances() -> None:
    err = error_for_code(6)("not leader")
    assert err.retriable and err.invalid_metadata
    assert not error_for_code(29)().retriable


def test_code_zero_has_no_class() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)


def test_raise_for_code_zero_does_nothing() -> None:
    raise_for_code(0, "ignored", topic="t")  # must not raise


@pytest.mark.parametrize("code", [NEWEST_CODE + 1, 4242, 32767, -2, -32768])
def test_unknown_code_yields_a_class_carrying_that_code(code: int) -> None:
    cls = error_for_code(code)
    assert issubclass(cls, UnknownBrokerError)
    assert issubclass(cls, BrokerResponseError)
    assert code not in ERRORS_BY_CODE
    assert cls.code == code
    assert str(code) in cls.name
    assert error_for_code(code) is cls  # stable, so `except` and identity checks work
    assert not cls.retriable and not cls.invalid_metadata
    with pytest.raises(UnknownBrokerError) as info:
        raise_for_code(code, "from the future", topic="t")
    assert info.value.code == code
    assert f"(error {code})" in str(info.value)
    assert "from the future" in str(info.value)
    assert "topic='t'" in str(info.value)


def test_different_unknown_codes_get_different_classes() -> None:
    assert error_for_code(5000) is not error_for_code(5001)
    assert error_for_code(5000).code != error_for_code(5001).code


def test_raise_for_code_puts_message_and_context_in_str() -> None:
    with pytest.raises(NotLeaderOrFollowerError) as info:
        raise_for_code(6, "Leader is broker 2", topic="orders", partition=3)
    err = info.value
    text = str(err)
    assert text.startswith("NOT_LEADER_OR_FOLLOWER (error 6) [topic='orders', partition=3]: ")
    assert "Leader is broker 2." in text
    assert "Refresh metadata" in text
    assert err.message == "Leader is broker 2"
    assert err.context == {"topic": "orders", "partition": 3}


def test_raise_for_code_is_caught_by_base_classes() -> None:
    with pytest.raises(KafkaError):
        raise_for_code(29, None, topic="secret")
    with pytest.raises(BrokerResponseError):
        raise_for_code(29)


def test_without_message_str_shows_description() -> None:
    err = TopicAuthorizationFailedError(topic="secret")
    assert err.message is None
    assert str(err) == (
        f"TOPIC_AUTHORIZATION_FAILED (error 29) [topic='secret']: {err.description}"
    )


def test_none_context_values_are_dropped() -> None:
    err = NotLeaderOrFollowerError(None, topic="t", partition=None)
    assert err.context == {"topic": "t"}
    assert "partition=" not in str(err)


def test_message_equal_to_description_is_not_repeated() -> None:
    err = RequestTimedOutError("The request timed out.")
    assert str(err).count("The request timed out") == 1


def test_message_keeps_its_own_punctuation() -> None:
    err = UnknownServerError("disk on fire!")
    assert "disk on fire! The server" in str(err)


def test_base_class_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError, match="error_for_code"):
        BrokerResponseError("no code")
    with pytest.raises(TypeError):
        UnknownBrokerError("no code either")


def test_unsupported_version_is_the_class_for_code_35() -> None:
    assert error_for_code(35) is UnsupportedVersionError
    assert issubclass(UnsupportedVersionError, BrokerResponseError)
    assert not UnsupportedVersionError.retriable
    # The existing client-side use, a plain message, still works.
    err = UnsupportedVersionError("no Fetch version in common with broker 1")
    assert isinstance(err, KafkaError)
    assert err.code == 35
    assert "no Fetch version in common with broker 1" in str(err)
    with pytest.raises(UnsupportedVersionError):
        raise_for_code(35)


def test_request_timed_out_is_also_a_timeout_error() -> None:
    assert error_for_code(7) is RequestTimedOutError
    with pytest.raises(KafkaTimeoutError) as info:
        raise_for_code(7, None, topic="t")
    assert isinstance(info.value, BrokerResponseError)
    assert info.value.retriable
    assert not issubclass(KafkaTimeoutError, BrokerResponseError)  # client deadlines stay apart


def test_corrupt_message_is_also_a_corrupt_record_error() -> None:
    assert error_for_code(2) is CorruptMessageError
    err = CorruptMessageError("crc mismatch", topic="t", partition=1, offset=5)
    assert isinstance(err, CorruptRecordError)
    assert (err.topic, err.partition, err.offset) == ("t", 1, 5)
    assert err.retriable  # CorruptRecordException is retriable in Java
    text = str(err)
    assert "CORRUPT_MESSAGE (error 2)" in text
    assert "topic='t', partition=1, offset=5" in text
    assert "crc mismatch" in text
    with pytest.raises(CorruptRecordError) as info:
        raise_for_code(2, None, topic="t", partition=0)
    assert (info.value.topic, info.value.partition) == ("t", 0)


def test_existing_base_classes_keep_their_behaviour() -> None:
    err = CorruptRecordError("bad batch", topic="t", partition=2, offset=9)
    assert str(err) == "bad batch (topic='t', partition=2, offset=9)"
    assert not err.retriable
    assert not isinstance(err, BrokerResponseError)
    assert str(CorruptRecordError("plain")) == "plain"
    assert isinstance(KafkaConfigError("x"), ValueError)
    assert KafkaConnectionError.retriable and KafkaTimeoutError.retriable
    assert not KafkaProtocolError.retriable
    for cls in (KafkaConfigError, KafkaProtocolError, KafkaConnectionError, KafkaTimeoutError):
        assert issubclass(cls, KafkaError)
        assert not issubclass(cls, BrokerResponseError)


@pytest.mark.parametrize(
    "err",
    [
        NotLeaderOrFollowerError("moved", topic="t", partition=1),
        CorruptMessageError("crc", topic="t", partition=0, offset=7),
        UnsupportedVersionError("no common version"),
        error_for_code(7777)("future", topic="t"),
    ],
    ids=["known", "corrupt-message", "unsupported-version", "unknown-code"],
)
def test_errors_survive_pickling(err: BrokerResponseError) -> None:
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is type(err)
    assert str(copy) == str(err)
    assert copy.message == err.message
    assert copy.context == err.context
