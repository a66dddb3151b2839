"""Admin consumer-group calls: list (every broker), describe and delete (each group's
coordinator), with classic (DescribeGroups) and consumer-protocol (KIP-848) groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkaio.admin.core import AdminCore, broker_error, name_list
from kafkaio.admin.group_types import GroupDescription, GroupListing, MemberDescription
from kafkaio.errors import (
    GroupIdNotFoundError,
    KafkaError,
    KafkaProtocolError,
    UnsupportedVersionError,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol import messages as m


def decode_assignment(protocol_type: str, data: bytes | None) -> tuple[TopicPartition, ...]:
    """The partitions in a classic consumer member's assignment bytes (empty if unknown)."""
    if protocol_type != "consumer" or not data:
        return ()
    try:
        version = int.from_bytes(data[:2], "big", signed=True)
        decoded = m.ConsumerProtocolAssignment.decode(data, min(max(version, 0), 3))
    except (KafkaProtocolError, ValueError, IndexError):
        return ()
    return tuple(
        sorted(
            TopicPartition(t.topic, p) for t in decoded.assigned_partitions for p in t.partitions
        )
    )


def parse_classic_group(group: Any, coordinator: int) -> GroupDescription:
    err = broker_error(group.error_code, None, group_id=group.group_id)
    members = tuple(
        MemberDescription(
            member_id=mem.member_id,
            client_id=mem.client_id,
            client_host=mem.client_host,
            group_instance_id=mem.group_instance_id,
            assignment=decode_assignment(group.protocol_type, mem.member_assignment),
        )
        for mem in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        error=err,
        state=group.group_state,
        protocol_type=group.protocol_type,
        protocol=group.protocol_data,
        group_type="classic",
        members=members,
        coordinator=coordinator,
    )


def parse_consumer_group(group: Any, coordinator: int) -> GroupDescription:
    err = broker_error(group.error_code, group.error_message, group_id=group.group_id)
    members = tuple(
        MemberDescription(
            member_id=mem.member_id,
            client_id=mem.client_id,
            client_host=mem.client_host,
            group_instance_id=mem.instance_id,
            assignment=tuple(
                sorted(
                    TopicPartition(t.topic_name, p)
                    for t in mem.assignment.topic_partitions
                    for p in t.partitions
                )
            ),
            member_epoch=mem.member_epoch,
            subscribed_topics=tuple(mem.subscribed_topic_names),
        )
        for mem in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        error=err,
        state=group.group_state,
        protocol_type="consumer",
        protocol=group.assignor_name,
        group_type="consumer",
        members=members,
        coordinator=coordinator,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
    )


class GroupsMixin(AdminCore):
    async def list_groups(
        self,
        *,
        states: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        timeout_ms: float | None = None,
    ) -> list[GroupListing]:
        """Every group on every broker, sorted by id; filtered by state (ListGroups v4+,
        e.g. "Stable", "Empty") and type (v5+: "classic", "consumer") where given.

        Raises the error of a broker that could not be asked (a partial list would hide
        groups), UnsupportedVersionError if a filter needs a newer ListGroups.
        """
        states = None if states is None else name_list(states, "states")
        types = None if types is None else name_list(types, "types")

        async def send(node: int, _items: list[int]) -> dict[int, list[GroupListing]]:
            conn = await self._node(node)
            version = conn.version_for(m.ListGroupsRequest)
            for name, wanted, needs in (("states", states, 4), ("types", types, 5)):
                if wanted and version < needs:
                    raise UnsupportedVersionError(
                        f"filtering groups by {name} needs ListGroups v{needs}+, but {conn} "
                        f"speaks v{version}; list without the filter",
                        api="ListGroups",
                    )
            request = m.ListGroupsRequest(
                states_filter=list(states or ()), types_filter=list(types or ())
            )
            response = await conn.send(request, version=version)
            err = broker_error(response.error_code, None, broker=node)
            if err is not None:
                raise err
            return {
                node: [
                    GroupListing(
                        g.group_id,
                        g.protocol_type,
                        g.group_state if version >= 4 else None,
                        (g.group_type or None) if version >= 5 else None,
                    )
                    for g in response.groups
                ]
            }

        async def prepare(_pending: list[int]) -> None:
            if self._metadata_stale:
                await self._refresh_metadata()

        per_broker: dict[int, list[GroupListing] | KafkaError] = await self._fan_out(
            "list_groups",
            await self._retrying("list_groups", self._broker_ids, timeout_ms),
            prepare=prepare,
            route=lambda node: node,
            send=send,
            failed=lambda _n, e: e,
            timeout_ms=timeout_ms,
        )
        groups: dict[str, GroupListing] = {}
        for outcome in per_broker.values():
            if isinstance(outcome, KafkaError):
                raise outcome
            for g in outcome:
                groups.setdefault(g.group_id, g)
        return [groups[g] for g in sorted(groups)]

    async def describe_groups(
        self, group_ids: Sequence[str], *, timeout_ms: float | None = None
    ) -> dict[str, GroupDescription]:
        """Each group's state, protocol and members (with decoded assignments).

        Classic groups are described with DescribeGroups; a group it reports as Dead or
        unknown is asked again with ConsumerGroupDescribe (KIP-848 groups) when the
        coordinator supports it.
        """
        group_ids = name_list(group_ids, "describe_groups group_ids")

        async def send(node: int, items: list[str]) -> dict[str, GroupDescription | KafkaError]:
            conn = await self._node(node)
            response = await conn.send(m.DescribeGroupsRequest(groups=list(items)))
            out: dict[str, GroupDescription | KafkaError] = {}
            retry_as_consumer: list[str] = []
            for g in response.groups:
                description = parse_classic_group(g, node)
                if description.error is not None and description.error.retriable:
                    out[g.group_id] = description.error
                    continue
                out[g.group_id] = description
                if isinstance(description.error, GroupIdNotFoundError) or (
                    description.error is None and not description.found
                ):
                    retry_as_consumer.append(g.group_id)
            if retry_as_consumer and conn.supports(m.ConsumerGroupDescribeRequest):
                response2 = await conn.send(
                    m.ConsumerGroupDescribeRequest(group_ids=retry_as_consumer)
                )
                for cg in response2.groups:
                    described = parse_consumer_group(cg, node)
                    if described.error is None:
                        out[cg.group_id] = described
                    elif described.error.retriable:
                        out[cg.group_id] = described.error
            return out

        results: dict[str, GroupDescription] = await self._fan_out(
            "describe_groups",
            group_ids,
            **self._group_router(),
            send=send,
            failed=lambda g, e: GroupDescription(g, e),
            timeout_ms=timeout_ms,
        )
        return results

    async def delete_groups(
        self, group_ids: Sequence[str], *, timeout_ms: float | None = None
    ) -> dict[str, KafkaError | None]:
        """Delete empty groups (with their committed offsets); each group's error or None."""
        group_ids = name_list(group_ids, "delete_groups group_ids")

        async def send(node: int, items: list[str]) -> dict[str, KafkaError | None]:
            conn = await self._node(node)
            response = await conn.send(m.DeleteGroupsRequest(groups_names=list(items)))
            return {
                r.group_id: broker_error(r.error_code, None, group_id=r.group_id)
                for r in response.results
            }

        results: dict[str, KafkaError | None] = await self._fan_out(
            "delete_groups",
            group_ids,
            **self._group_router(),
            send=send,
            failed=lambda _g, e: e,
            timeout_ms=timeout_ms,
        )
        return results
