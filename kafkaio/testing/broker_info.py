"""What a test broker is and can do: ``BrokerInfo`` and the named features tests ask for.

Most features come from the broker's ApiVersions answer; a few describe the test set-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkaio.errors import (
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)

if TYPE_CHECKING:
    from kafkaio.testing.apache import ApacheKafka
    from kafkaio.testing.mockcluster import MockCluster
    from kafkaio.testing.tansu import TansuBroker

# Feature name -> the API keys a broker must advertise for it.
API_FEATURES: dict[str, tuple[int, ...]] = {
    "consumer_groups": (8, 9, 10, 11, 12, 13, 14),  # classic groups with offset commits
    "group_admin": (15, 16, 42),  # DescribeGroups, ListGroups, DeleteGroups
    "create_topics": (19,),
    "delete_topics": (20,),
    "delete_records": (21,),
    "idempotence": (22,),  # InitProducerId
    "offset_for_leader_epoch": (23,),
    "transactions": (22, 24, 25, 26, 28),
    "describe_configs": (32,),
    "alter_configs": (44,),  # IncrementalAlterConfigs
    "create_partitions": (37,),
    "describe_log_dirs": (35,),
    "sasl": (17, 36),  # advertised only; the fixtures configure no credentials
    "describe_cluster": (60,),
    "consumer_group_heartbeat": (68,),  # KIP-848
    "telemetry": (71, 72),  # KIP-714
    "describe_topic_partitions": (75,),
    "share_groups": (76, 78, 79),  # KIP-932
}

# Features that describe the set-up rather than an API.
SETUP_FEATURES: dict[str, str] = {
    "fault_injection": "librdkafka mock-cluster fault injection (BrokerInfo.cluster)",
    "multi_broker": "more than one broker, so leaders can move between brokers",
    "exact_end_offsets": "ListOffsets latest equals last acked offset + 1 (Tansu 0.6 can be lower)",
    "aborted_transactions": (
        "Fetch lists aborted transactions, so read_committed readers skip aborted records "
        "(Tansu 0.6 lists none)"
    ),
}

FEATURES: frozenset[str] = frozenset(API_FEATURES) | frozenset(SETUP_FEATURES)

_API_NAMES = {
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    78: "ShareFetch",
    79: "ShareAcknowledge",
}


def features_from_api_versions(api_versions: Mapping[int, tuple[int, int]]) -> frozenset[str]:
    """The API features whose API keys are all advertised (min <= max) in ``api_versions``."""
    advertised = {key for key, (low, high) in api_versions.items() if 0 <= low <= high}
    return frozenset(
        name for name, keys in API_FEATURES.items() if all(key in advertised for key in keys)
    )


def _missing_reason(name: str, feature: str, api_versions: Mapping[int, tuple[int, int]]) -> str:
    if feature in SETUP_FEATURES:
        return f"broker {name!r} lacks feature {feature!r}: {SETUP_FEATURES[feature]}"
    missing = [
        f"{_API_NAMES.get(key, 'api')} (key {key})"
        for key in API_FEATURES[feature]
        if key not in api_versions
    ]
    return (
        f"broker {name!r} lacks feature {feature!r}: it does not advertise "
        f"{', '.join(missing) or 'the needed APIs'} in ApiVersions"
    )


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A running test broker: its name, bootstrap list and features.

    ``name`` is "tansu", "mock", "kafka" (Apache Kafka) or "external"; ``api_versions``
    is the ApiVersions v0 answer of the first bootstrap broker; ``cluster`` is the
    MockCluster (fault injection) for mock brokers; ``tansu`` the TansuBroker handle for
    private Tansu brokers (``isolated_tansu_broker``), e.g. to restart it; ``apache`` the
    ApacheKafka handle of Apache Kafka brokers (kill, pause, restart brokers, move leaders).
    """

    name: str
    bootstrap: str
    features: frozenset[str]
    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    cluster: MockCluster | None = None
    tansu: TansuBroker | None = None
    apache: ApacheKafka | None = None

    def has(self, feature: str) -> bool:
        """Whether the broker has ``feature`` (a name from FEATURES; unknown names raise)."""
        if feature not in FEATURES:
            raise KafkaConfigError(
                f"unknown broker feature {feature!r}; known: {', '.join(sorted(FEATURES))}"
            )
        return feature in self.features

    def skip_unless(self, *features: str) -> None:
        """``pytest.skip`` the running test unless the broker has every feature named."""
        for feature in features:
            if not self.has(feature):
                import pytest

                pytest.skip(_missing_reason(self.name, feature, self.api_versions))

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        *,
        timeout: float = 15.0,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (with topic `configs`, e.g. max.message.bytes) and wait until every
        partition's leader serves it.

        Mock cluster: through librdkafka's mock API (it has no CreateTopics, and no topic
        configs). Other brokers: CreateTopics through kafkaio's Admin.
        """
        if self.cluster is not None:
            if configs:
                raise ValueError("the mock cluster creates topics without configs")
            self.cluster.create_topic(name, partitions, replication_factor)
            return
        try:
            await asyncio.wait_for(
                _create_topic_with_admin(
                    self.bootstrap, name, partitions, replication_factor, dict(configs or {})
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(
                f"creating topic {name!r} ({partitions} partitions) on broker {self.name!r} "
                f"({self.bootstrap}) did not finish within {timeout} s: CreateTopics got no "
                "answer or some partition still has no leader"
            ) from None


async def _create_topic_with_admin(
    bootstrap: str, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> None:
    from kafkaio.admin import Admin, NewTopic

    async with Admin(bootstrap, client_id="kafkaio-testing") as admin:
        created = await admin.create_topics(
            [NewTopic(name, partitions, replication_factor, configs=configs)]
        )
        error = created[name].error
        if error is not None:
            raise KafkaError(f"CreateTopics for {name!r} on {bootstrap} failed: {error}")
    await _wait_for_leaders(bootstrap, name, partitions)


def _leaders_serving(bootstrap: str, name: str, partitions: int) -> bool:
    """Whether every partition has a leader that answers ListOffsets for it without error.

    A broker can list a new partition's leader in Metadata a moment before that leader
    serves it (Apache Kafka answers NOT_LEADER_OR_FOLLOWER meanwhile).
    """
    from kafkaio.testing._probe import list_offsets_errors, metadata, parse_bootstrap

    host, port = parse_bootstrap(bootstrap)[0]
    answer = metadata(host, port, [name])
    states = answer.topics.get(name, {})
    if len(states) != partitions or any(s.leader < 0 for s in states.values()):
        return False
    by_leader: dict[int, list[int]] = {}
    for index, state in states.items():
        by_leader.setdefault(state.leader, []).append(index)
    for leader, indexes in by_leader.items():
        if leader not in answer.brokers:
            return False
        leader_host, leader_port = answer.brokers[leader]
        errors = list_offsets_errors(leader_host, leader_port, name, indexes)
        if any(errors.get(index, -1) != 0 for index in indexes):
            return False
    return True


async def wait_for_leaders(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 60.0
) -> None:
    """Wait until each of ``topic``'s ``partitions`` has a leader that serves it (answers
    ListOffsets for it without error), e.g. after CreateTopics: Apache Kafka lists a new
    partition's leader in Metadata before that broker has created the partition's log, and
    answers Produce with NOT_LEADER_OR_FOLLOWER meanwhile.

    Raises KafkaTimeoutError after ``timeout`` seconds.
    """
    try:
        await asyncio.wait_for(_wait_for_leaders(bootstrap, topic, partitions), timeout)
    except asyncio.TimeoutError:
        raise KafkaTimeoutError(
            f"{topic!r} ({partitions} partitions) on {bootstrap}: some partition still has "
            f"no leader serving it after {timeout} s"
        ) from None


async def _wait_for_leaders(bootstrap: str, name: str, partitions: int) -> None:
    while True:
        try:
            if await asyncio.to_thread(_leaders_serving, bootstrap, name, partitions):
                return
        except (KafkaConnectionError, KafkaProtocolError):
            pass
        await asyncio.sleep(0.05)
