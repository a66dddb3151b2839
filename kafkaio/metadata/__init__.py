"""Cluster metadata: immutable snapshots (brokers, topics, leaders) and the manager refreshing them.

Sans-I/O throughout; the network layer sends the requests `MetadataManager.poll` returns.
"""

from __future__ import annotations

from kafkaio.metadata.cluster import (
    BrokerNode,
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
    TopicPartition,
)
from kafkaio.metadata.manager import MetadataManager

__all__ = [
    "BrokerNode",
    "ClusterMetadata",
    "MetadataManager",
    "PartitionInfo",
    "TopicInfo",
    "TopicPartition",
]
