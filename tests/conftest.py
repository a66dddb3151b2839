"""Shared test configuration. Broker fixtures (tansu_broker, mock_cluster, kafka_broker,
unique_topic, ...) come from the kafkaio.testing pytest plugin, registered by entry point.
"""

from __future__ import annotations

import pytest

from kafkaio.testing import BrokerInfo

# The brokers `broker` can be: Apache Kafka, the reference, and Tansu, the embedded broker
# that `make demo` and `kafkaio broker` run.
_BROKERS = {"kafka": "apache_kafka", "tansu": "tansu_broker"}


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """The broker for tests of client-side behaviour: Apache Kafka (one KRaft node).

    A smoke test that the demo's users rely on runs on Tansu too:
    ``@pytest.mark.parametrize("broker", ["kafka", "tansu"], indirect=True)``.
    """
    name = getattr(request, "param", "kafka")
    info = request.getfixturevalue(_BROKERS[name])
    assert isinstance(info, BrokerInfo)
    return info
