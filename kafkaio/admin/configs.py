"""Admin config calls: DescribeConfigs and IncrementalAlterConfigs for topics, brokers and
groups. Broker resources go to that broker; the others to any broker."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafkaio.admin.config_types import (
    AlterConfigOp,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
)
from kafkaio.admin.core import AdminCore, broker_error, missing_is_final, name_list
from kafkaio.errors import KafkaError
from kafkaio.protocol import messages as m

_ANY_NODE = -1
_PER_BROKER = (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER)


def config_node(resource: ConfigResource) -> int:
    """The broker that must answer for `resource`: a broker's own id, else any (-1)."""
    if resource.type in _PER_BROKER and resource.name.strip().isdigit():
        return int(resource.name)
    return _ANY_NODE


def resource_error(resource: ConfigResource, code: int, message: str | None) -> KafkaError | None:
    """A resource's error; UNKNOWN_TOPIC_OR_PARTITION for a topic is final (the topic does
    not exist: as Java, the resource fails at once instead of being retried)."""
    err = broker_error(code, message, resource=resource.name)
    return missing_is_final(err) if resource.type == ConfigResourceType.TOPIC else err


def parse_config_result(
    result: Any, keys: Collection[str] | None
) -> tuple[ConfigResource, ConfigDescription]:
    """One DescribeConfigs result as a ConfigDescription (only `keys`, when given)."""
    resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
    err = resource_error(resource, result.error_code, result.error_message)
    entries: dict[str, ConfigEntry] = {}
    for c in result.configs:
        if keys is not None and c.name not in keys:
            continue
        source = ConfigSource.parse(c.config_source)
        if c.config_source == -1 and c.is_default:  # v0: only the is_default flag
            source = ConfigSource.DEFAULT_CONFIG
        entries[c.name] = ConfigEntry(
            name=c.name,
            value=c.value,
            source=source,
            is_read_only=c.read_only,
            is_sensitive=c.is_sensitive,
            synonyms=tuple(
                ConfigSynonym(s.name, s.value, ConfigSource.parse(s.source)) for s in c.synonyms
            ),
            config_type=c.config_type,
            documentation=c.documentation or None,
        )
    return resource, ConfigDescription(resource, err, entries)


class ConfigsMixin(AdminCore):
    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Collection[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, ConfigDescription]:
        """Each resource's configs (only `keys`, when given), or the error describing it.

        Every key is requested and `keys` filtered here: some brokers (Tansu 0.6) drop the
        connection when DescribeConfigs names keys.
        """
        wanted = None if keys is None else frozenset(name_list(keys, "keys"))

        async def send(
            node: int, items: list[ConfigResource]
        ) -> dict[ConfigResource, ConfigDescription | KafkaError]:
            conn = await (self._any() if node == _ANY_NODE else self._node(node))
            request = m.DescribeConfigsRequest(
                resources=[
                    m.DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=int(r.type), resource_name=r.name, configuration_keys=None
                    )
                    for r in items
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            response = await conn.send(request)
            out: dict[ConfigResource, ConfigDescription | KafkaError] = {}
            for result in response.results:
                resource, description = parse_config_result(result, wanted)
                if description.error is not None and description.error.retriable:
                    out[resource] = description.error
                else:
                    out[resource] = description
            return out

        return await self._fan_out(
            "describe_configs",
            resources,
            prepare=self._prepare_config_nodes,
            route=config_node,
            send=send,
            failed=lambda r, e: ConfigDescription(r, e),
            timeout_ms=timeout_ms,
        )

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, KafkaError | None]:
        """Apply SET/DELETE/APPEND/SUBTRACT changes (IncrementalAlterConfigs); each
        resource's error, or None where the change was applied."""

        async def send(
            node: int, items: list[ConfigResource]
        ) -> dict[ConfigResource, KafkaError | None]:
            conn = await (self._any() if node == _ANY_NODE else self._node(node))
            request = m.IncrementalAlterConfigsRequest(
                resources=[
                    m.IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configs=[
                            m.IncrementalAlterConfigsRequest.AlterableConfig(
                                name=op.name, config_operation=int(op.op), value=op.value
                            )
                            for op in changes[r]
                        ],
                    )
                    for r in items
                ],
                validate_only=validate_only,
            )
            response = await conn.send(request)
            out: dict[ConfigResource, KafkaError | None] = {}
            for r in response.responses:
                resource = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
                out[resource] = resource_error(resource, r.error_code, r.error_message)
            return out

        results: dict[ConfigResource, KafkaError | None] = await self._fan_out(
            "incremental_alter_configs",
            list(changes),
            prepare=self._prepare_config_nodes,
            route=config_node,
            send=send,
            failed=lambda _r, e: e,
            timeout_ms=timeout_ms,
        )
        return results

    async def _prepare_config_nodes(self, pending: list[ConfigResource]) -> None:
        if any(config_node(r) != _ANY_NODE for r in pending) and (
            self._metadata_stale or not self._cluster.brokers
        ):
            await self._refresh_metadata()
