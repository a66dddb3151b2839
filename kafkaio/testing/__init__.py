"""Real Kafka-protocol brokers for tests (Tansu, librdkafka's mock cluster, Apache Kafka).

The pytest plugin (``kafkaio.testing.plugin``) exposes them as fixtures yielding BrokerInfo.
"""

from __future__ import annotations

from kafkaio.testing.broker_info import FEATURES, BrokerInfo
from kafkaio.testing.errors import BrokerStartError, ContainerStartError, MockClusterError
from kafkaio.testing.mockcluster import MockCluster
from kafkaio.testing.tansu import TansuBroker

__all__ = [
    "FEATURES",
    "BrokerInfo",
    "BrokerStartError",
    "ContainerStartError",
    "MockCluster",
    "MockClusterError",
    "TansuBroker",
]
