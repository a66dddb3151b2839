"""kafkaio.Admin: one client class assembled from the per-area call modules.

Topics, configs, groups, group offsets, partition offsets/records, ACLs, SCRAM credentials
and the cluster.
"""

from __future__ import annotations

from kafkaio.admin.acls import AclsMixin
from kafkaio.admin.cluster import ClusterMixin
from kafkaio.admin.configs import ConfigsMixin
from kafkaio.admin.group_offsets import GroupOffsetsMixin
from kafkaio.admin.groups import GroupsMixin
from kafkaio.admin.scram import ScramMixin
from kafkaio.admin.topics import TopicsMixin


class Admin(
    TopicsMixin,
    ConfigsMixin,
    GroupsMixin,
    GroupOffsetsMixin,
    AclsMixin,
    ScramMixin,
    ClusterMixin,
):
    """An admin client. Use ``async with Admin(bootstrap_servers=...) as admin``.

    Options: every connection option (client_id, request_timeout_ms, security_protocol,
    ssl_context, sasl_*...) plus default_api_timeout_ms (60000, each call's deadline unless
    it gets ``timeout_ms=``), retry_backoff_ms (100) and retry_backoff_max_ms (1000).

    Each call is routed to the broker that must answer it (the controller for topic
    changes, a group's coordinator for group calls, partition leaders for ListOffsets and
    DeleteRecords, one request per broker), retried on retriable errors with backoff until
    its deadline, and answers per item: results carry ``error`` (None on success) rather
    than one failure hiding the outcome of the others.
    """
