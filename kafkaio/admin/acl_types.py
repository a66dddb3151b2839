"""Typed ACL values for the Admin client: resource, pattern, operation and permission
enums (Kafka's codes), bindings and the filters that match them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkaio.errors import KafkaError


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _parse(enum_cls: type[enum.IntEnum], code: int) -> int:
    try:
        return enum_cls(code)
    except ValueError:
        return enum_cls(0)  # UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` (e.g. "User:alice") may `operation` the resource from `host`."""

    resource_type: ResourceType
    resource_name: str
    principal: str
    operation: AclOperation
    permission_type: AclPermissionType = AclPermissionType.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission_type: int,
    ) -> AclBinding:
        return cls(
            ResourceType(_parse(ResourceType, resource_type)),
            resource_name,
            principal,
            AclOperation(_parse(AclOperation, operation)),
            AclPermissionType(_parse(AclPermissionType, permission_type)),
            host,
            PatternType(_parse(PatternType, pattern_type)),
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches ACLs; None (or ANY) in a field matches every value. The default matches all."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    """What one filter deleted: the bindings removed, those that failed, or a filter error."""

    error: KafkaError | None
    deleted: tuple[AclBinding, ...] = ()
    failed: tuple[tuple[AclBinding, KafkaError], ...] = ()
