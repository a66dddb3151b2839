"""The one exception hierarchy of kafkaio: base errors plus one class per broker error code.

Codes map to classes via error_for_code/raise_for_code; flags mirror the Java client's classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import ClassVar


class KafkaError(Exception):
    """Base class of every kafkaio error."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


class KafkaConfigError(KafkaError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


class KafkaProtocolError(KafkaError):
    """Bytes on the wire do not follow the Kafka protocol (truncated, oversized, malformed)."""


def _where(topic: str | None, partition: int | None, offset: int | None) -> str:
    """``topic='t', partition=0, offset=5`` for what is known ("" for nothing)."""
    parts = [
        f"{name}={value!r}"
        for name, value in (("topic", topic), ("partition", partition), ("offset", offset))
        if value is not None
    ]
    return ", ".join(parts)


class CorruptRecordError(KafkaError):
    """A record batch failed its CRC-32C check or could not be decoded.

    Names the topic, partition and base offset of the batch when they are known.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = _where(topic, partition, offset)
        super().__init__(f"{message} ({where})" if where else message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class SerializationError(KafkaError, ValueError):
    """A serializer or deserializer could not convert a key or value.

    ``reason`` says what was wrong; ``path`` names the field inside the key or value when a
    typed serde knows it (``"customer.age"``, ``"items[2].sku"``). Raised by the producer
    (naming ``topic``, ``partition`` when chosen, and ``field``: ``"key"`` or ``"value"``), and
    by serdes themselves (without the location, which the client adds).
    """

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        field: str | None = None,
        path: str | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.field = field
        self.path = path
        where = _where(topic, partition, offset)
        at = f" (field {path!r})" if path and path not in reason else ""
        super().__init__(f"{reason}{at}" + (f" ({where})" if where else ""))


class RecordDeserializationError(SerializationError):
    """The consumer's key or value deserializer raised for one record (the cause is chained).

    ``topic``, ``partition`` and ``offset`` name the record, ``part`` (also ``field``) is
    ``"key"`` or ``"value"`` and ``path`` the field inside it when the deserializer named one.
    The records before it were handed out; the position stays at this record,
    so every later call raises again until the application seeks past it
    (``consumer.seek(TopicPartition(topic, partition), offset + 1)``).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        part: str,
        cause: BaseException | None = None,
    ) -> None:
        detail = "see the cause"
        path = None
        if isinstance(cause, SerializationError):
            detail, path = cause.reason, cause.path
            if path:
                detail = f"{detail} (field {path!r})"
        elif cause is not None:
            detail = f"{type(cause).__name__}: {cause}"
        KafkaError.__init__(
            self,
            f"the {part} deserializer failed for the record at offset {offset} of "
            f"{topic!r} partition {partition}: {detail}; the records before it were "
            f"returned and the position stays at it: seek to offset {offset + 1} to skip it",
        )
        self.reason = detail
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.field = self.part = part
        self.path = path


class KafkaConnectionError(KafkaError):
    """A connection to a broker could not be made or was lost. Retrying may help."""

    retriable = True


class SslAuthenticationError(KafkaConnectionError):
    """The TLS handshake with a broker failed: its certificate was rejected, or the listener
    does not speak TLS to this client. Retrying cannot fix it, so clients stop at once (as
    Java's SslAuthenticationException); fix ssl_context or security_protocol."""

    retriable = False


class NotKafkaPeerError(KafkaConnectionError, KafkaProtocolError):
    """The peer answered the first request, but not in the Kafka protocol: an HTTP server, a
    TLS listener reached without TLS, another service on the port. Retrying cannot fix it,
    so clients stop at once; check bootstrap_servers (the port) and security_protocol."""

    retriable = False


class ClientClosedError(KafkaConnectionError):
    """The client (its connection manager) is closed: no request can be sent any more, and
    retrying does not help. Create a new client."""

    retriable = False


class KafkaTimeoutError(KafkaError):
    """A deadline passed before the operation completed."""

    retriable = True


class BootstrapError(KafkaConnectionError, KafkaTimeoutError):
    """A client's start() got no cluster metadata from any bootstrap server in time: the
    addresses are wrong, the brokers are down or unreachable, or they answered too slowly.
    Both a KafkaConnectionError and a KafkaTimeoutError, so code catching either (what the
    clients raised before) catches it."""

    retriable = True


class BrokerResponseError(KafkaError):
    """A broker answered with a non-zero error code.

    Each subclass stands for one Kafka error code: ``code``, ``name`` (Kafka's enum name, e.g.
    ``"NOT_LEADER_OR_FOLLOWER"``) and ``description`` (Kafka's text plus, where useful, what to
    do) are class attributes. An instance carries the broker's optional error message
    (``message``) and optional context the caller knows, such as ``topic=`` and ``partition=``
    (``context``; ``None`` values are dropped); both appear in ``str(error)``.
    Do not instantiate this class itself: use a subclass, :func:`error_for_code` or
    :func:`raise_for_code`.
    """

    code: ClassVar[int]
    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self, message: str | None = None, **context: object) -> None:
        if not hasattr(type(self), "code"):
            raise TypeError(
                f"{type(self).__name__} stands for no error code; instantiate a subclass "
                "or use error_for_code(code)"
            )
        self.message = message
        self.context: dict[str, object] = {k: v for k, v in context.items() if v is not None}
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.name} (error {self.code})"
        if self.context:
            head += " [" + ", ".join(f"{k}={v!r}" for k, v in self.context.items()) + "]"
        detail = (self.message or "").strip()
        if not detail or self.description.startswith(detail.rstrip(".")):
            return f"{head}: {self.description}"
        if detail[-1] not in ".!?":
            detail += "."
        return f"{head}: {detail} {self.description}"

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*args); rebuild from message and context instead.
        # Classes made for unknown codes are not importable, so those travel by code.
        cls = type(self)
        known = None if issubclass(cls, UnknownBrokerError) else cls
        return (_rebuild_broker_error, (known, self.code, self.message, self.context))


# --- generated by tools/gen_errors.py from Kafka's error table (Errors.java in
# kafka-clients 4.4.0): change EXTRAS there, not this part ---


class UnknownServerError(BrokerResponseError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    description = (
        "The server experienced an unexpected error when processing the request. Check the "
        "broker logs for the cause."
    )


class OffsetOutOfRangeError(BrokerResponseError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    description = (
        "The requested offset is not within the range of offsets maintained by the server. "
        "Reset the position (auto.offset.reset: earliest or latest) or seek to an offset "
        "inside the log."
    )


class CorruptMessageError(BrokerResponseError, CorruptRecordError):
    """Code 2. Also a :class:`CorruptRecordError`, so one ``except`` catches both kinds."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    description = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for "
        "a compacted topic, or is otherwise corrupt. Retry; if it persists, check for a null "
        "key on a compacted topic, or for network or disk corruption."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        **context: object,
    ) -> None:
        super().__init__(message, topic=topic, partition=partition, offset=offset, **context)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class UnknownTopicOrPartitionError(BrokerResponseError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    invalid_metadata = True
    description = (
        "This server does not host this topic-partition. Refresh metadata and retry; create "
        "the topic if it does not exist."
    )


class InvalidFetchSizeError(BrokerResponseError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    description = (
        "The requested fetch size is invalid. Use a positive fetch.max.bytes / "
        "max.partition.fetch.bytes."
    )


class LeaderNotAvailableError(BrokerResponseError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election. Refresh metadata and retry after a short backoff."
    )


class NotLeaderOrFollowerError(BrokerResponseError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    invalid_metadata = True
    description = (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition. Refresh metadata to find "
        "the current leader and retry."
    )


class RequestTimedOutError(BrokerResponseError, KafkaTimeoutError):
    """Code 7. Also a :class:`KafkaTimeoutError`, so one ``except`` catches both kinds."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    description = (
        "The request timed out. Retry; if it persists, check broker load and replication health."
    )


class BrokerNotAvailableError(BrokerResponseError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    description = "The broker is not available. Refresh metadata and send to another broker."


class ReplicaNotAvailableError(BrokerResponseError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = (
        "The replica is not available for the requested topic-partition. Produce/Fetch "
        "requests and other requests intended only for the leader or follower return "
        "NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition. "
        "Refresh metadata and retry."
    )


class MessageTooLargeError(BrokerResponseError):
    code = 10
    name = "MESSAGE_TOO_LARGE"
    description = (
        "The request included a message larger than the max message size the server will "
        "accept. Send smaller records, or raise the topic's max.message.bytes (and the "
        "client's max.request.size)."
    )


class StaleControllerEpochError(BrokerResponseError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(BrokerResponseError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    description = (
        "The metadata field of the offset request was too large. Shorten the commit metadata "
        "string (broker limit: offset.metadata.max.bytes)."
    )


class NetworkError(BrokerResponseError):
    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    invalid_metadata = True
    description = (
        "The server disconnected before a response was received. Refresh metadata and retry."
    )


class CoordinatorLoadInProgressError(BrokerResponseError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    description = (
        "The coordinator is loading and hence can't process requests. Retry after a short backoff."
    )


class CoordinatorNotAvailableError(BrokerResponseError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    description = (
        "The coordinator is not available. Look up the coordinator again (FindCoordinator) "
        "and retry."
    )


class NotCoordinatorError(BrokerResponseError):
    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    description = (
        "This is not the correct coordinator. Look up the coordinator again (FindCoordinator) "
        "and retry."
    )


class InvalidTopicError(BrokerResponseError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    description = (
        "The request attempted to perform an operation on an invalid topic. Use a legal topic "
        "name (at most 249 of [a-zA-Z0-9._-]) and do not write to internal topics."
    )


class RecordListTooLargeError(BrokerResponseError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    description = (
        "The request included message batch larger than the configured segment size on the "
        "server. Send smaller batches (batch.size) or raise the topic's segment.bytes."
    )


class NotEnoughReplicasError(BrokerResponseError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    description = (
        "Messages are rejected since there are fewer in-sync replicas than required. Retry; "
        "if it persists, bring replicas back in sync or lower min.insync.replicas."
    )


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    description = (
        "Messages are written to the log, but to fewer in-sync replicas than required. "
        "Retrying may write duplicates unless the producer is idempotent."
    )


class InvalidRequiredAcksError(BrokerResponseError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    description = (
        "Produce request specified an invalid value for required acks. Use acks=all (-1), 0 or 1."
    )


class IllegalGenerationError(BrokerResponseError):
    code = 22
    name = "ILLEGAL_GENERATION"
    description = "Specified group generation id is not valid. Rejoin the group."


class InconsistentGroupProtocolError(BrokerResponseError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    description = (
        "The group member's supported protocols are incompatible with those of existing "
        "members or first group member tried to join with empty protocol type or empty "
        "protocol list. Give every member the same protocol type and at least one common "
        "assignor."
    )


class InvalidGroupIdError(BrokerResponseError):
    code = 24
    name = "INVALID_GROUP_ID"
    description = "The group id is invalid. Set a non-empty group.id."


class UnknownMemberIdError(BrokerResponseError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    description = (
        "The coordinator is not aware of this member. Rejoin the group with an empty member id."
    )


class InvalidSessionTimeoutError(BrokerResponseError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    description = (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms). Choose a "
        "session.timeout.ms inside that range."
    )


class RebalanceInProgressError(BrokerResponseError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    description = "The group is rebalancing, so a rejoin is needed. Rejoin the group, then retry."


class InvalidCommitOffsetSizeError(BrokerResponseError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    description = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(BrokerResponseError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    description = (
        "Topic authorization failed. Grant the principal the needed ACL on the topic (e.g. "
        "READ, WRITE or DESCRIBE)."
    )


class GroupAuthorizationFailedError(BrokerResponseError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    description = "Group authorization failed. Grant the principal READ on the consumer group."


class ClusterAuthorizationFailedError(BrokerResponseError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    description = (
        "Cluster authorization failed. Grant the principal the needed ACL on the cluster resource."
    )


class InvalidTimestampError(BrokerResponseError):
    code = 32
    name = "INVALID_TIMESTAMP"
    description = (
        "The timestamp of the message is out of acceptable range. Check the record timestamps "
        "against the topic's message.timestamp.*.max.ms settings."
    )


class UnsupportedSaslMechanismError(BrokerResponseError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    description = (
        "The broker does not support the requested SASL mechanism. Use a mechanism listed in "
        "the broker's sasl.enabled.mechanisms."
    )


class IllegalSaslStateError(BrokerResponseError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    description = "Request is not valid given the current SASL state."


class UnsupportedVersionError(BrokerResponseError):
    """The broker does not support any version of an API that this client can speak.

    Code 35 when a broker answers with it; kafkaio also raises it itself when ApiVersions
    shows no version in common.
    """

    code = 35
    name = "UNSUPPORTED_VERSION"
    description = (
        "The version of API is not supported. Upgrade the broker, or avoid the feature that "
        "needs this API version."
    )


class TopicAlreadyExistsError(BrokerResponseError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    description = (
        "Topic with this name already exists. Use the existing topic or choose another name."
    )


class InvalidPartitionsError(BrokerResponseError):
    code = 37
    name = "INVALID_PARTITIONS"
    description = "Number of partitions is below 1."


class InvalidReplicationFactorError(BrokerResponseError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    description = "Replication factor is below 1 or larger than the number of available brokers."


class InvalidReplicaAssignmentError(BrokerResponseError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    description = "Replica assignment is invalid."


class InvalidConfigError(BrokerResponseError):
    code = 40
    name = "INVALID_CONFIG"
    description = "Configuration is invalid."


class NotControllerError(BrokerResponseError):
    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    description = (
        "This is not the correct controller for this cluster. Refresh metadata to find the "
        "active controller and retry."
    )


class InvalidRequestError(BrokerResponseError):
    code = 42
    name = "INVALID_REQUEST"
    description = (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    )


class UnsupportedForMessageFormatError(BrokerResponseError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    description = "The message format version on the broker does not support the request."


class PolicyViolationError(BrokerResponseError):
    code = 44
    name = "POLICY_VIOLATION"
    description = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(BrokerResponseError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    description = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(BrokerResponseError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    description = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(BrokerResponseError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    description = (
        "Producer attempted to produce with an old epoch. Abort the ongoing transaction; the "
        "producer then re-initializes its epoch."
    )


class InvalidTxnStateError(BrokerResponseError):
    code = 48
    name = "INVALID_TXN_STATE"
    description = "The producer attempted a transactional operation in an invalid state."


class InvalidProducerIdMappingError(BrokerResponseError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    description = (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    )


class InvalidTransactionTimeoutError(BrokerResponseError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    description = (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms). Lower transaction.timeout.ms."
    )


class ConcurrentTransactionsError(BrokerResponseError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True
    description = (
        "The producer attempted to update a transaction while another concurrent operation on "
        "the same transaction was ongoing. Retry after a short backoff."
    )


class TransactionCoordinatorFencedError(BrokerResponseError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    description = (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer."
    )


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    description = (
        "Transactional Id authorization failed. Grant the principal WRITE on the transactional id."
    )


class SecurityDisabledError(BrokerResponseError):
    code = 54
    name = "SECURITY_DISABLED"
    description = "Security features are disabled."


class OperationNotAttemptedError(BrokerResponseError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    description = (
        "The broker did not attempt to execute this operation. This may happen for batched "
        "RPCs where some operations in the batch failed, causing the broker to respond "
        "without trying the rest."
    )


class KafkaStorageError(BrokerResponseError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    invalid_metadata = True
    description = (
        "Disk error when trying to access log file on the disk. Refresh metadata and retry."
    )


class LogDirNotFoundError(BrokerResponseError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    description = "The user-specified log directory is not found in the broker config."


class SaslAuthenticationFailedError(BrokerResponseError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    description = "SASL Authentication failed. Check the credentials and the SASL mechanism."


class UnknownProducerIdError(BrokerResponseError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    description = (
        "The broker could not locate the producer metadata associated with the producerId in "
        "question. This could happen if, for instance, the producer's records were deleted "
        "because their retention time had elapsed."
    )


class ReassignmentInProgressError(BrokerResponseError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(BrokerResponseError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    description = "Delegation Token feature is not enabled."


class DelegationTokenNotFoundError(BrokerResponseError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    description = "Delegation Token is not found on server."


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    description = "Specified Principal is not valid Owner/Renewer."


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    description = (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
        "delegation token authenticated channels."
    )


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    description = "Delegation Token authorization failed."


class DelegationTokenExpiredError(BrokerResponseError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    description = "Delegation Token is expired."


class InvalidPrincipalTypeError(BrokerResponseError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    description = "Supplied principalType is not supported."


class NonEmptyGroupError(BrokerResponseError):
    code = 68
    name = "NON_EMPTY_GROUP"
    description = "The group is not empty. Stop the group's members before deleting the group."


class GroupIdNotFoundError(BrokerResponseError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    description = "The group id does not exist."


class FetchSessionIdNotFoundError(BrokerResponseError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    description = (
        "The fetch session ID was not found. Start a new fetch session (full fetch) and retry."
    )


class InvalidFetchSessionEpochError(BrokerResponseError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    description = (
        "The fetch session epoch is invalid. Start a new fetch session (full fetch) and retry."
    )


class ListenerNotFoundError(BrokerResponseError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no listener on the leader broker that matches the listener on which "
        "metadata request was processed. Refresh metadata and retry; if it persists, check "
        "that every broker defines this listener."
    )


class TopicDeletionDisabledError(BrokerResponseError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    description = "Topic deletion is disabled. Enable delete.topic.enable on the brokers."


class FencedLeaderEpochError(BrokerResponseError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    invalid_metadata = True
    description = (
        "The leader epoch in the request is older than the epoch on the broker. Refresh "
        "metadata and retry."
    )


class UnknownLeaderEpochError(BrokerResponseError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    description = (
        "The leader epoch in the request is newer than the epoch on the broker. Retry after a "
        "short backoff; the broker has not caught up yet."
    )


class UnsupportedCompressionTypeError(BrokerResponseError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    description = (
        "The requesting client does not support the compression type of given partition. Use "
        "a request version that supports the topic's compression (zstd needs Produce/Fetch "
        "v10+)."
    )


class StaleBrokerEpochError(BrokerResponseError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    description = "Broker epoch has changed."


class OffsetNotAvailableError(BrokerResponseError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    description = (
        "The leader high watermark has not caught up from a recent leader election so the "
        "offsets cannot be guaranteed to be monotonically increasing. Retry after a short "
        "backoff."
    )


class MemberIdRequiredError(BrokerResponseError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    description = (
        "The group member needs to have a valid member id before actually entering a consumer "
        "group. Rejoin with the member id the broker returned."
    )


class PreferredLeaderNotAvailableError(BrokerResponseError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "The preferred leader was not available."


class GroupMaxSizeReachedError(BrokerResponseError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    description = (
        "The group has reached its maximum size. Stop extra members or raise the broker's "
        "group.max.size."
    )


class FencedInstanceIdError(BrokerResponseError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    description = (
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id. Give every member its "
        "own group.instance.id."
    )


class EligibleLeadersNotAvailableError(BrokerResponseError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "Eligible topic partition leaders are not available."


class ElectionNotNeededError(BrokerResponseError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    invalid_metadata = True
    description = "Leader election not needed for topic partition."


class NoReassignmentInProgressError(BrokerResponseError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(BrokerResponseError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    description = (
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it."
    )


class InvalidRecordError(BrokerResponseError):
    code = 87
    name = "INVALID_RECORD"
    description = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(BrokerResponseError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    description = (
        "There are unstable offsets that need to be cleared. Retry after a short backoff; a "
        "transaction on these partitions is still open."
    )


class ThrottlingQuotaExceededError(BrokerResponseError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    description = (
        "The throttling quota has been exceeded. Retry after the throttle time the broker returned."
    )


class ProducerFencedError(BrokerResponseError):
    code = 90
    name = "PRODUCER_FENCED"
    description = (
        "There is a newer producer with the same transactionalId which fences the current "
        "one. Close this producer; another instance with the same transactional.id took over."
    )


class ResourceNotFoundError(BrokerResponseError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    description = "A request illegally referred to a resource that does not exist."


class DuplicateResourceError(BrokerResponseError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    description = "A request illegally referred to the same resource twice."


class UnacceptableCredentialError(BrokerResponseError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    description = "Requested credential would not meet criteria for acceptability."


class InconsistentVoterSetError(BrokerResponseError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    description = (
        "Indicates that either the sender or recipient of a voter-only request is not one of "
        "the expected voters."
    )


class InvalidUpdateVersionError(BrokerResponseError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    description = "The given update version was invalid."


class FeatureUpdateFailedError(BrokerResponseError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    description = "Unable to update finalized features due to an unexpected server error."


class PrincipalDeserializationFailureError(BrokerResponseError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    description = (
        "Request principal deserialization failed during forwarding. This indicates an "
        "internal error on the broker cluster security setup."
    )


class SnapshotNotFoundError(BrokerResponseError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    description = "Requested snapshot was not found."


class PositionOutOfRangeError(BrokerResponseError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    description = (
        "Requested position is not greater than or equal to zero, and less than the size of "
        "the snapshot."
    )


class UnknownTopicIdError(BrokerResponseError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = (
        "This server does not host this topic ID. Refresh metadata and retry; the topic may "
        "have been deleted or re-created."
    )


class DuplicateBrokerRegistrationError(BrokerResponseError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    description = "This broker ID is already in use."


class BrokerIdNotRegisteredError(BrokerResponseError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    description = "The given broker ID was not registered."


class InconsistentTopicIdError(BrokerResponseError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = (
        "The log's topic ID did not match the topic ID in the request. Refresh metadata and "
        "retry; the topic was probably re-created."
    )


class InconsistentClusterIdError(BrokerResponseError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    description = "The clusterId in the request does not match that found on the server."


class TransactionalIdNotFoundError(BrokerResponseError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    description = "The transactionalId could not be found."


class FetchSessionTopicIdError(BrokerResponseError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True
    description = (
        "The fetch session encountered inconsistent topic ID usage. Start a new fetch session "
        "(full fetch) and retry."
    )


class IneligibleReplicaError(BrokerResponseError):
    code = 107
    name = "INELIGIBLE_REPLICA"
    description = "The new ISR contains at least one ineligible replica."


class NewLeaderElectedError(BrokerResponseError):
    code = 108
    name = "NEW_LEADER_ELECTED"
    description = (
        "The AlterPartition request successfully updated the partition state but the leader "
        "has changed."
    )


class OffsetMovedToTieredStorageError(BrokerResponseError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    description = "The requested offset is moved to tiered storage."


class FencedMemberEpochError(BrokerResponseError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"
    description = (
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin."
    )


class UnreleasedInstanceIdError(BrokerResponseError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    description = (
        "The instance ID is still used by another member in the consumer group. That member "
        "must leave first."
    )


class UnsupportedAssignorError(BrokerResponseError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    description = (
        "The assignor or its version range is not supported by the consumer group. Use a "
        "server-side assignor the broker enables (group.consumer.assignors)."
    )


class StaleMemberEpochError(BrokerResponseError):
    code = 113
    name = "STALE_MEMBER_EPOCH"
    description = (
        "The member epoch is stale. The member must retry after receiving its updated member "
        "epoch via the ConsumerGroupHeartbeat API."
    )


class MismatchedEndpointTypeError(BrokerResponseError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    description = "The request was sent to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(BrokerResponseError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    description = "This endpoint type is not supported yet."


class UnknownControllerIdError(BrokerResponseError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    description = "This controller ID is not known."


class UnknownSubscriptionIdError(BrokerResponseError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    description = (
        "Client sent a push telemetry request with an invalid or outdated subscription ID. "
        "Fetch a new telemetry subscription."
    )


class TelemetryTooLargeError(BrokerResponseError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"
    description = (
        "Client sent a push telemetry request larger than the maximum size the broker will accept."
    )


class InvalidRegistrationError(BrokerResponseError):
    code = 119
    name = "INVALID_REGISTRATION"
    description = "The controller has considered the broker registration to be invalid."


class TransactionAbortableError(BrokerResponseError):
    code = 120
    name = "TRANSACTION_ABORTABLE"
    description = (
        "The server encountered an error with the transaction. The client can abort the "
        "transaction to continue using this transactional ID."
    )


class InvalidRecordStateError(BrokerResponseError):
    code = 121
    name = "INVALID_RECORD_STATE"
    description = (
        "The record state is invalid. The acknowledgement of delivery could not be completed."
    )


class ShareSessionNotFoundError(BrokerResponseError):
    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True
    description = "The share session was not found. Open a new share session and retry."


class InvalidShareSessionEpochError(BrokerResponseError):
    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True
    description = "The share session epoch is invalid. Open a new share session and retry."


class FencedStateEpochError(BrokerResponseError):
    code = 124
    name = "FENCED_STATE_EPOCH"
    description = (
        "The share coordinator rejected the request because the share-group state epoch did "
        "not match."
    )


class InvalidVoterKeyError(BrokerResponseError):
    code = 125
    name = "INVALID_VOTER_KEY"
    description = "The voter key doesn't match the receiving replica's key."


class DuplicateVoterError(BrokerResponseError):
    code = 126
    name = "DUPLICATE_VOTER"
    description = "The voter is already part of the set of voters."


class VoterNotFoundError(BrokerResponseError):
    code = 127
    name = "VOTER_NOT_FOUND"
    description = "The voter is not part of the set of voters."


class InvalidRegularExpressionError(BrokerResponseError):
    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    description = (
        "The regular expression is not valid. Fix the subscription pattern (the broker uses "
        "RE2/J syntax)."
    )


class RebootstrapRequiredError(BrokerResponseError):
    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    description = "Client metadata is stale. The client should rebootstrap to obtain new metadata."


class StreamsInvalidTopologyError(BrokerResponseError):
    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"
    description = "The supplied topology is invalid."


class StreamsInvalidTopologyEpochError(BrokerResponseError):
    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"
    description = "The supplied topology epoch is invalid."


class StreamsTopologyFencedError(BrokerResponseError):
    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"
    description = "The supplied topology epoch is outdated."


class ShareSessionLimitReachedError(BrokerResponseError):
    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True
    description = "The limit of share sessions has been reached. Retry after a short backoff."


class GroupDeletionFailedError(BrokerResponseError):
    code = 134
    name = "GROUP_DELETION_FAILED"
    description = (
        "DeleteGroups could not complete; see the error message on the per-group result for "
        "details."
    )


class StreamsTopologyDescriptionUpdateFailedError(BrokerResponseError):
    code = 135
    name = "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"
    description = (
        "The broker could not process the topology description update; see the error message "
        "for details."
    )


class ControllerIdNotRegisteredError(BrokerResponseError):
    code = 136
    name = "CONTROLLER_ID_NOT_REGISTERED"
    description = "The given controller ID was not registered."


_CODE_CLASSES: tuple[type[BrokerResponseError], ...] = (
    UnknownServerError,
    OffsetOutOfRangeError,
    CorruptMessageError,
    UnknownTopicOrPartitionError,
    InvalidFetchSizeError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    BrokerNotAvailableError,
    ReplicaNotAvailableError,
    MessageTooLargeError,
    StaleControllerEpochError,
    OffsetMetadataTooLargeError,
    NetworkError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    InvalidTopicError,
    RecordListTooLargeError,
    NotEnoughReplicasError,
    NotEnoughReplicasAfterAppendError,
    InvalidRequiredAcksError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    UnknownMemberIdError,
    InvalidSessionTimeoutError,
    RebalanceInProgressError,
    InvalidCommitOffsetSizeError,
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    InvalidTimestampError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
    UnsupportedVersionError,
    TopicAlreadyExistsError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidReplicaAssignmentError,
    InvalidConfigError,
    NotControllerError,
    InvalidRequestError,
    UnsupportedForMessageFormatError,
    PolicyViolationError,
    OutOfOrderSequenceNumberError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    ConcurrentTransactionsError,
    TransactionCoordinatorFencedError,
    TransactionalIdAuthorizationFailedError,
    SecurityDisabledError,
    OperationNotAttemptedError,
    KafkaStorageError,
    LogDirNotFoundError,
    SaslAuthenticationFailedError,
    UnknownProducerIdError,
    ReassignmentInProgressError,
    DelegationTokenAuthDisabledError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
    DelegationTokenRequestNotAllowedError,
    DelegationTokenAuthorizationFailedError,
    DelegationTokenExpiredError,
    InvalidPrincipalTypeError,
    NonEmptyGroupError,
    GroupIdNotFoundError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    ListenerNotFoundError,
    TopicDeletionDisabledError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    UnsupportedCompressionTypeError,
    StaleBrokerEpochError,
    OffsetNotAvailableError,
    MemberIdRequiredError,
    PreferredLeaderNotAvailableError,
    GroupMaxSizeReachedError,
    FencedInstanceIdError,
    EligibleLeadersNotAvailableError,
    ElectionNotNeededError,
    NoReassignmentInProgressError,
    GroupSubscribedToTopicError,
    InvalidRecordError,
    UnstableOffsetCommitError,
    ThrottlingQuotaExceededError,
    ProducerFencedError,
    ResourceNotFoundError,
    DuplicateResourceError,
    UnacceptableCredentialError,
    InconsistentVoterSetError,
    InvalidUpdateVersionError,
    FeatureUpdateFailedError,
    PrincipalDeserializationFailureError,
    SnapshotNotFoundError,
    PositionOutOfRangeError,
    UnknownTopicIdError,
    DuplicateBrokerRegistrationError,
    BrokerIdNotRegisteredError,
    InconsistentTopicIdError,
    InconsistentClusterIdError,
    TransactionalIdNotFoundError,
    FetchSessionTopicIdError,
    IneligibleReplicaError,
    NewLeaderElectedError,
    OffsetMovedToTieredStorageError,
    FencedMemberEpochError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    StaleMemberEpochError,
    MismatchedEndpointTypeError,
    UnsupportedEndpointTypeError,
    UnknownControllerIdError,
    UnknownSubscriptionIdError,
    TelemetryTooLargeError,
    InvalidRegistrationError,
    TransactionAbortableError,
    InvalidRecordStateError,
    ShareSessionNotFoundError,
    InvalidShareSessionEpochError,
    FencedStateEpochError,
    InvalidVoterKeyError,
    DuplicateVoterError,
    VoterNotFoundError,
    InvalidRegularExpressionError,
    RebootstrapRequiredError,
    StreamsInvalidTopologyError,
    StreamsInvalidTopologyEpochError,
    StreamsTopologyFencedError,
    ShareSessionLimitReachedError,
    GroupDeletionFailedError,
    StreamsTopologyDescriptionUpdateFailedError,
    ControllerIdNotRegisteredError,
)
# --- end of the generated error classes ---


class UnknownBrokerError(BrokerResponseError):
    """Base of the classes made for error codes this version of kafkaio does not know.

    A newer broker may send codes added after this table was written; :func:`error_for_code`
    then returns a subclass of this class whose ``code`` is the number the broker sent.
    Not retriable, as the Java client treats unknown codes (``UnknownServerException``).
    """


ERRORS_BY_CODE: Mapping[int, type[BrokerResponseError]] = MappingProxyType(
    {cls.code: cls for cls in _CODE_CLASSES}
)
"""Every known broker error code (0, NONE, excluded) mapped to its class."""

if len(ERRORS_BY_CODE) != len(_CODE_CLASSES):  # pragma: no cover - guards edits to the table
    raise RuntimeError("two classes in kafkaio.errors claim the same broker error code")


def error_for_code(code: int) -> type[BrokerResponseError]:
    """Return the class for a broker error code.

    Code 0 (NONE) means success and raises :class:`ValueError`. A code this table does not
    know yields a subclass of :class:`UnknownBrokerError` carrying that code, the same class
    for the same code, so a newer broker never crashes the client.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) means success; it has no error class")
    known = ERRORS_BY_CODE.get(code)
    return known if known is not None else _unknown_error_class(code)


def raise_for_code(code: int, message: str | None = None, **context: object) -> None:
    """Raise the error for a broker error code, or do nothing for 0 (NONE).

    ``message`` is the broker's error message, if the response has one; ``context`` (e.g.
    ``topic="orders", partition=3``) names what the error is about. Both show in the text.
    """
    if code != 0:
        raise error_for_code(code)(message, **context)


@lru_cache(maxsize=512)
def _unknown_error_class(error_code: int) -> type[UnknownBrokerError]:
    class _UnknownCodeError(UnknownBrokerError):
        code = error_code
        name = f"UNKNOWN_ERROR_CODE_{error_code}"
        description = (
            f"The broker returned error code {error_code}, which this version of kafkaio does "
            "not know. Check the broker's documentation and logs for this code, or upgrade "
            "kafkaio."
        )

    _UnknownCodeError.__name__ = _UnknownCodeError.__qualname__ = f"UnknownBrokerError{error_code}"
    return _UnknownCodeError


def _rebuild_broker_error(
    cls: type[BrokerResponseError] | None,
    code: int,
    message: str | None,
    context: dict[str, object],
) -> BrokerResponseError:
    return (cls if cls is not None else error_for_code(code))(message, **context)
