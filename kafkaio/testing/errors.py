"""Errors raised by the test-broker helpers of kafkaio.testing.

All derive from kafkaio.errors.KafkaError; messages quote the broker's log tail when useful.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class BrokerStartError(KafkaError):
    """A test broker did not start or did not answer in time; the message holds its log tail."""


class MockClusterError(KafkaError):
    """A librdkafka mock-cluster call failed, or the mock-cluster helper process did."""
