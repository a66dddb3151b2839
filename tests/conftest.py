"""Shared test configuration. Broker fixtures (tansu_broker, mock_cluster, kafka_broker,
unique_topic, ...) come from the kafkaio.testing pytest plugin, registered by entry point.
"""
