"""kafkaio.Admin: topics, configs, consumer groups, offsets, records, ACLs and the cluster.

Typed requests and per-item results live in the *_types modules, re-exported here.
"""

from __future__ import annotations

from kafkaio.admin.acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    DeleteAclsResult,
    PatternType,
    ResourceType,
)
from kafkaio.admin.client import Admin
from kafkaio.admin.config_types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
)
from kafkaio.admin.group_types import (
    CommittedOffset,
    GroupDescription,
    GroupListing,
    MemberDescription,
    PartitionLag,
)
from kafkaio.admin.scram import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kafkaio.admin.types import (
    BrokerLogDirs,
    ClusterDescription,
    CreateTopicResult,
    DeletedRecords,
    ListedOffset,
    LogDirDescription,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ReplicaLogInfo,
)

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerLogDirs",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "CreateTopicResult",
    "DeleteAclsResult",
    "DeletedRecords",
    "GroupDescription",
    "GroupListing",
    "ListedOffset",
    "LogDirDescription",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionLag",
    "PatternType",
    "ReplicaLogInfo",
    "ResourceType",
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
