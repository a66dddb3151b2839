"""Admin argument checks against a scripted fake cluster: repeated names are sent once,
a bare str is refused where a list of names is expected, and so are negative offsets."""

from __future__ import annotations

from typing import Any

import pytest

from kafkaio.admin import NewTopic
from kafkaio.errors import InvalidTopicError, KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m
from tests.unit.admin.fake import FakeCluster, admin_on
from tests.unit.admin.test_routing import metadata

CT = m.CreateTopicsResponse
DT = m.DeleteTopicsResponse


def handler(node: int, request: Any) -> Any:
    """Answers as Kafka does: INVALID_REQUEST (42) for every copy of a repeated name."""
    if isinstance(request, m.MetadataRequest):
        return metadata({0: 1})
    names = [t.name for t in request.topics]
    if isinstance(request, m.CreateTopicsRequest):
        return CT(
            topics=[
                CT.CreatableTopicResult(name=n, error_code=42 if names.count(n) > 1 else 0)
                for n in names
            ]
        )
    assert isinstance(request, m.DeleteTopicsRequest)
    return DT(
        responses=[
            DT.DeletableTopicResult(name=n, error_code=42 if names.count(n) > 1 else 0)
            for n in names
        ]
    )


async def test_repeated_topic_names_are_sent_once() -> None:
    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    created = await admin.create_topics([NewTopic("n", 1, 1), NewTopic("n", 1, 1)])
    assert created["n"].error is None
    deleted = await admin.delete_topics(["n", "n"])
    assert deleted["n"] is None
    ((_, create),) = cluster.requests("CreateTopicsRequest")
    ((_, delete),) = cluster.requests("DeleteTopicsRequest")
    assert [t.name for t in create.topics] == ["n"] and [t.name for t in delete.topics] == ["n"]
    with pytest.raises(KafkaConfigError, match="two different specs for 'n'"):
        await admin.create_topics([NewTopic("n", 1, 1), NewTopic("n", 3, 1)])
    assert len(cluster.requests("CreateTopicsRequest")) == 1


async def test_a_bare_str_is_refused_where_names_are_expected() -> None:
    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.delete_topics("orders")
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.describe_topics("orders")
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.describe_groups("g1")
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.delete_groups("g1")
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.list_groups(states="Empty")
    with pytest.raises(KafkaConfigError, match="list of names"):
        await admin.describe_configs([], keys="retention.ms")
    assert cluster.sent == []


async def test_alter_group_offsets_refuses_negative_offsets() -> None:
    cluster = FakeCluster(handler)
    with pytest.raises(KafkaConfigError, match="offset -5 for"):
        await admin_on(cluster).alter_group_offsets("g", {TP("t", 0): 3, TP("t", 1): -5})
    assert cluster.sent == []


@pytest.mark.parametrize("name", ["", ".", "a/b", "x" * 250])
async def test_create_topics_refuses_an_illegal_name_before_sending(name: str) -> None:
    # NewTopic("", 1, 1) was sent, and Tansu created a topic named ""
    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    with pytest.raises(InvalidTopicError, match="is illegal"):
        await admin.create_topics([NewTopic("ok", 1, 1), NewTopic(name, 1, 1)])
    assert cluster.requests("CreateTopicsRequest") == []
