"""Real Kafka-protocol brokers for tests (Apache Kafka, Tansu, librdkafka's mock cluster).

The pytest plugin (``kafkaio.testing.plugin``) exposes them as fixtures yielding BrokerInfo.
"""

from __future__ import annotations

from kafkaio.testing.apache import ApacheKafka
from kafkaio.testing.broker_info import FEATURES, BrokerInfo, wait_for_leaders
from kafkaio.testing.errors import BrokerStartError, MockClusterError
from kafkaio.testing.eventually import eventually
from kafkaio.testing.mockcluster import MockCluster
from kafkaio.testing.tansu import TansuBroker

__all__ = [
    "FEATURES",
    "ApacheKafka",
    "BrokerInfo",
    "BrokerStartError",
    "MockCluster",
    "MockClusterError",
    "TansuBroker",
    "eventually",
    "wait_for_leaders",
]
