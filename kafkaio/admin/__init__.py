"""kafkaio.Admin: topics and cluster administration."""

from __future__ import annotations

from kafkaio.admin.client import Admin
from kafkaio.admin.types import ClusterDescription, CreateTopicResult, NewTopic

__all__ = ["Admin", "ClusterDescription", "CreateTopicResult", "NewTopic"]
