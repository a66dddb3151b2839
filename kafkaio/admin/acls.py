"""Admin ACL calls: DescribeAcls, CreateAcls and DeleteAcls (any broker answers them).

Bindings and filters are typed (kafkaio.admin.acl_types); results come back per item.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaio.admin.acl_types import AclBinding, AclBindingFilter, DeleteAclsResult
from kafkaio.admin.core import AdminCore, broker_error
from kafkaio.errors import KafkaError
from kafkaio.protocol import messages as m


class AclsMixin(AdminCore):
    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """The ACLs matching `acl_filter` (all ACLs by default); raises the broker's error
        (e.g. SECURITY_DISABLED when the cluster has no authorizer)."""
        f = acl_filter or AclBindingFilter()
        request = m.DescribeAclsRequest(
            resource_type_filter=int(f.resource_type),
            resource_name_filter=f.resource_name,
            pattern_type_filter=int(f.pattern_type),
            principal_filter=f.principal,
            host_filter=f.host,
            operation=int(f.operation),
            permission_type=int(f.permission_type),
        )

        async def attempt() -> list[AclBinding]:
            response = await (await self._any()).send(request)
            err = broker_error(response.error_code, response.error_message)
            if err is not None:
                raise err
            return [
                AclBinding.from_codes(
                    r.resource_type,
                    r.resource_name,
                    r.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for r in response.resources
                for a in r.acls
            ]

        return await self._retrying("describe_acls", attempt, timeout_ms)

    async def create_acls(
        self, bindings: Sequence[AclBinding], *, timeout_ms: float | None = None
    ) -> dict[AclBinding, KafkaError | None]:
        """Create ACLs; each binding's error, or None where it was created."""
        ordered = list(dict.fromkeys(bindings))
        request = m.CreateAclsRequest(
            creations=[
                m.CreateAclsRequest.AclCreation(
                    resource_type=int(b.resource_type),
                    resource_name=b.resource_name,
                    resource_pattern_type=int(b.pattern_type),
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission_type),
                )
                for b in ordered
            ]
        )

        async def attempt() -> dict[AclBinding, KafkaError | None]:
            response = await (await self._any()).send(request)
            if len(response.results) != len(ordered):
                raise KafkaError(
                    f"CreateAcls answered {len(response.results)} results for "
                    f"{len(ordered)} bindings"
                )
            return {
                b: broker_error(r.error_code, r.error_message)
                for b, r in zip(ordered, response.results, strict=True)
            }

        return await self._retrying("create_acls", attempt, timeout_ms)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, timeout_ms: float | None = None
    ) -> dict[AclBindingFilter, DeleteAclsResult]:
        """Delete the ACLs matching each filter; what each filter deleted (or its error)."""
        ordered = list(dict.fromkeys(filters))
        request = m.DeleteAclsRequest(
            filters=[
                m.DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=int(f.resource_type),
                    resource_name_filter=f.resource_name,
                    pattern_type_filter=int(f.pattern_type),
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=int(f.operation),
                    permission_type=int(f.permission_type),
                )
                for f in ordered
            ]
        )

        async def attempt() -> dict[AclBindingFilter, DeleteAclsResult]:
            response = await (await self._any()).send(request)
            if len(response.filter_results) != len(ordered):
                raise KafkaError(
                    f"DeleteAcls answered {len(response.filter_results)} results for "
                    f"{len(ordered)} filters"
                )
            out: dict[AclBindingFilter, DeleteAclsResult] = {}
            for f, r in zip(ordered, response.filter_results, strict=True):
                deleted: list[AclBinding] = []
                failed: list[tuple[AclBinding, KafkaError]] = []
                for a in r.matching_acls:
                    binding = AclBinding.from_codes(
                        a.resource_type,
                        a.resource_name,
                        a.pattern_type,
                        a.principal,
                        a.host,
                        a.operation,
                        a.permission_type,
                    )
                    err = broker_error(a.error_code, a.error_message)
                    if err is None:
                        deleted.append(binding)
                    else:
                        failed.append((binding, err))
                out[f] = DeleteAclsResult(
                    broker_error(r.error_code, r.error_message), tuple(deleted), tuple(failed)
                )
            return out

        return await self._retrying("delete_acls", attempt, timeout_ms)
