"""Admin routing and retries against a scripted fake cluster: one request per leader or
coordinator, retries after retriable errors, per-item errors at the deadline."""

from __future__ import annotations

from typing import Any

import pytest

from kafkaio.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafkaio.errors import (
    KafkaTimeoutError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m
from tests.unit.admin.fake import FakeCluster, admin_on
from tests.unit.metadata.responses import partition, response, topic

LO = m.ListOffsetsResponse


def metadata(leaders: dict[int, int], name: str = "t") -> m.MetadataResponse:
    return response(topic(name, *(partition(p, leader) for p, leader in leaders.items())))


def list_offsets_answer(request: Any, code_for: dict[int, int] | None = None) -> Any:
    codes = code_for or {}
    return LO(
        topics=[
            LO.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    LO.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=codes.get(p.partition_index, 0),
                        timestamp=-1,
                        offset=100 + p.partition_index if not codes.get(p.partition_index) else -1,
                        leader_epoch=0,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


async def test_list_offsets_sends_one_request_per_leader() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1, 1: 2, 2: 1})
        return list_offsets_answer(request)

    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    result = await admin.list_offsets(dict.fromkeys([TP("t", 0), TP("t", 1), TP("t", 2)], -1))
    assert {tp: r.offset for tp, r in result.items()} == {
        TP("t", 0): 100,
        TP("t", 1): 101,
        TP("t", 2): 102,
    }
    sent = {
        node: sorted(p.partition_index for t in req.topics for p in t.partitions)
        for node, req in cluster.requests("ListOffsetsRequest")
    }
    assert sent == {1: [0, 2], 2: [1]}
    assert len(cluster.requests("ListOffsetsRequest")) == 2


async def test_list_offsets_follows_a_moved_leader() -> None:
    moved = False

    def handler(node: int, request: Any) -> Any:
        nonlocal moved
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1, 1: 3 if moved else 2})
        if node == 2:
            moved = True
            return list_offsets_answer(request, {1: 6})  # NOT_LEADER_OR_FOLLOWER
        return list_offsets_answer(request)

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).list_offsets({TP("t", 0): -2, TP("t", 1): -2})
    assert result[TP("t", 1)].offset == 101 and result[TP("t", 1)].error is None
    nodes = [node for node, _ in cluster.requests("ListOffsetsRequest")]
    assert sorted(nodes) == [1, 2, 3]
    assert len(cluster.requests("MetadataRequest")) == 2


async def test_retriable_errors_become_per_item_errors_at_the_deadline() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1, 1: 1})
        return list_offsets_answer(request, {0: 5})  # LEADER_NOT_AVAILABLE, forever

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).list_offsets({TP("t", 0): -1, TP("t", 1): -1}, timeout_ms=150)
    assert isinstance(result[TP("t", 0)].error, LeaderNotAvailableError)
    assert result[TP("t", 0)].offset is None
    assert result[TP("t", 1)].offset == 101 and result[TP("t", 1)].error is None
    assert len(cluster.requests("ListOffsetsRequest")) > 1  # it did retry


async def test_fatal_item_errors_are_not_retried_and_unknown_topics_fail_fast() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return response(topic("t", partition(0, 1)), topic("gone", error=3))
        return list_offsets_answer(request, {0: 29})  # TOPIC_AUTHORIZATION_FAILED

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).list_offsets(
        {TP("t", 0): -1, TP("gone", 0): -1, TP("t", 7): -1}
    )
    assert isinstance(result[TP("t", 0)].error, TopicAuthorizationFailedError)
    assert isinstance(result[TP("gone", 0)].error, UnknownTopicOrPartitionError)
    assert isinstance(result[TP("t", 7)].error, UnknownTopicOrPartitionError)
    assert "has 1 partitions" in str(result[TP("t", 7)].error)
    assert len(cluster.requests("ListOffsetsRequest")) == 1


async def test_a_hung_broker_fails_only_its_own_items_at_the_deadline() -> None:
    DLD = m.DescribeLogDirsResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1, 1: 2, 2: 3})
        if isinstance(request, m.DescribeLogDirsRequest):
            return DLD(results=[DLD.DescribeLogDirsResult(log_dir=f"/data{node}")])
        return list_offsets_answer(request)

    admin = admin_on(FakeCluster(handler, hung={3}))
    tps = [TP("t", 0), TP("t", 1), TP("t", 2)]
    offsets = await admin.list_offsets(dict.fromkeys(tps, -1), timeout_ms=300)
    assert isinstance(offsets[TP("t", 2)].error, KafkaTimeoutError)
    assert [offsets[tp].offset for tp in tps[:2]] == [100, 101]
    assert offsets[TP("t", 0)].error is None and offsets[TP("t", 1)].error is None
    dirs = await admin.describe_log_dirs([1, 2, 3], timeout_ms=300)
    assert isinstance(dirs[3].error, KafkaTimeoutError)
    assert dirs[1].error is None and dirs[1].log_dirs[0].path == "/data1"
    assert dirs[2].error is None and dirs[2].log_dirs[0].path == "/data2"


async def test_list_offsets_and_delete_records_see_partitions_added_since_the_last_refresh() -> (
    None
):
    DR = m.DeleteRecordsResponse
    partitions = 1

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata(dict.fromkeys(range(partitions), 1))
        if isinstance(request, m.DeleteRecordsRequest):
            return DR(
                topics=[
                    DR.DeleteRecordsTopicResult(
                        name=t.name,
                        partitions=[
                            DR.DeleteRecordsPartitionResult(
                                partition_index=p.partition_index, low_watermark=p.offset
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )
        return list_offsets_answer(request)

    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    await admin.start()
    partitions = 3  # another client added partitions
    offsets = await admin.list_offsets({TP("t", 1): -1})
    assert offsets[TP("t", 1)].error is None and offsets[TP("t", 1)].offset == 101
    deleted = await admin.delete_records({TP("t", 2): 5, TP("t", 7): 5})
    assert deleted[TP("t", 2)].error is None and deleted[TP("t", 2)].low_watermark == 5
    assert "has 3 partitions" in str(deleted[TP("t", 7)].error)
    assert len(cluster.requests("MetadataRequest")) == 3  # start, then once per call


async def test_max_timestamp_needs_list_offsets_v7() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1})
        return list_offsets_answer(request)

    cluster = FakeCluster(handler)
    cluster.versions[m.ListOffsetsRequest.API_KEY] = 6
    result = await admin_on(cluster).list_offsets({TP("t", 0): OffsetSpec.MAX_TIMESTAMP})
    assert isinstance(result[TP("t", 0)].error, UnsupportedVersionError)
    assert cluster.requests("ListOffsetsRequest") == []


def find_coordinator(node_for: dict[str, int]) -> Any:
    FC = m.FindCoordinatorResponse
    return FC(
        coordinators=[
            FC.Coordinator(key=g, node_id=n, host=f"b{n}", port=9092, error_code=0)
            for g, n in node_for.items()
        ],
        node_id=next(iter(node_for.values())),
        host="b",
        port=9092,
    )


OF = m.OffsetFetchResponse


async def test_not_coordinator_looks_the_coordinator_up_again() -> None:
    coordinator = 2

    def handler(node: int, request: Any) -> Any:
        nonlocal coordinator
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1})
        if isinstance(request, m.FindCoordinatorRequest):
            assert request.coordinator_keys == ["g"] and request.key_type == 0
            return find_coordinator({"g": coordinator})
        assert isinstance(request, m.OffsetFetchRequest)
        if node == 2:
            coordinator = 3
            return OF(groups=[OF.OffsetFetchResponseGroup(group_id="g", error_code=16)])
        return OF(
            groups=[
                OF.OffsetFetchResponseGroup(
                    group_id="g",
                    topics=[
                        OF.OffsetFetchResponseTopics(
                            name="t",
                            partitions=[
                                OF.OffsetFetchResponsePartitions(
                                    partition_index=0,
                                    committed_offset=42,
                                    metadata="m",
                                    committed_leader_epoch=3,
                                ),
                                OF.OffsetFetchResponsePartitions(
                                    partition_index=1,
                                    committed_offset=-1,
                                    committed_leader_epoch=-1,
                                ),
                            ],
                        )
                    ],
                )
            ]
        )

    cluster = FakeCluster(handler)
    offsets = await admin_on(cluster).list_group_offsets("g")
    assert offsets[TP("t", 0)].offset == 42
    assert offsets[TP("t", 0)].metadata == "m" and offsets[TP("t", 0)].leader_epoch == 3
    assert offsets[TP("t", 1)].offset is None
    assert [n for n, _ in cluster.requests("OffsetFetchRequest")] == [2, 3]
    assert len(cluster.requests("FindCoordinatorRequest")) == 2


async def test_old_offset_fetch_and_find_coordinator_layouts() -> None:
    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.FindCoordinatorRequest):
            assert request.key == "g"
            return m.FindCoordinatorResponse(node_id=5, host="b5", port=9092)
        assert request.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in request.topics] == [("t", [0])]
        return OF(
            topics=[
                OF.OffsetFetchResponseTopic(
                    name="t",
                    partitions=[
                        OF.OffsetFetchResponsePartition(partition_index=0, committed_offset=7)
                    ],
                )
            ]
        )

    cluster = FakeCluster(handler)
    cluster.versions[m.FindCoordinatorRequest.API_KEY] = 3
    cluster.versions[m.OffsetFetchRequest.API_KEY] = 7
    offsets = await admin_on(cluster).list_group_offsets("g", [TP("t", 0)])
    assert offsets[TP("t", 0)].offset == 7
    assert cluster.requests("OffsetFetchRequest")[0][0] == 5
    assert cluster.nodes[5][:2] == ("b5", 9092)  # the coordinator's address is published


async def test_alter_group_offsets_commits_as_an_outsider_with_per_partition_errors() -> None:
    OC = m.OffsetCommitResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.FindCoordinatorRequest):
            return find_coordinator({"g": 1})
        assert request.generation_id_or_member_epoch == -1 and request.member_id == ""
        return OC(
            topics=[
                OC.OffsetCommitResponseTopic(
                    name="t",
                    partitions=[
                        OC.OffsetCommitResponsePartition(partition_index=0, error_code=0),
                        OC.OffsetCommitResponsePartition(partition_index=1, error_code=25),
                    ],
                )
            ]
        )

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).alter_group_offsets("g", {TP("t", 0): 5, TP("t", 1): 6})
    assert result[TP("t", 0)] is None
    assert isinstance(result[TP("t", 1)], UnknownMemberIdError)
    ((_, request),) = cluster.requests("OffsetCommitRequest")
    committed = {(p.partition_index, p.committed_offset) for p in request.topics[0].partitions}
    assert committed == {(0, 5), (1, 6)}


async def test_alter_group_offsets_reports_a_missing_topic_per_partition() -> None:
    OC = m.OffsetCommitResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.FindCoordinatorRequest):
            return find_coordinator({"g": 1})
        return OC(
            topics=[
                OC.OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OC.OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=3 if t.name == "gone" else 0,  # UNKNOWN_TOPIC_OR_PARTITION
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).alter_group_offsets(
        "g", {TP("t", 0): 5, TP("gone", 0): 5}, timeout_ms=500
    )
    assert result[TP("t", 0)] is None
    assert isinstance(result[TP("gone", 0)], UnknownTopicOrPartitionError)
    assert len(cluster.requests("OffsetCommitRequest")) == 1


async def test_describe_groups_decodes_assignments_and_asks_dead_groups_as_consumer_groups() -> (
    None
):
    DG = m.DescribeGroupsResponse
    CG = m.ConsumerGroupDescribeResponse
    assignment = m.ConsumerProtocolAssignment(
        assigned_partitions=[
            m.ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[1, 0])
        ]
    ).encode(0)

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.FindCoordinatorRequest):
            return find_coordinator({"classic": 1, "new": 1})
        if isinstance(request, m.DescribeGroupsRequest):
            return DG(
                groups=[
                    DG.DescribedGroup(
                        group_id="classic",
                        group_state="Stable",
                        protocol_type="consumer",
                        protocol_data="range",
                        members=[
                            DG.DescribedGroupMember(
                                member_id="m1",
                                client_id="c1",
                                client_host="/h",
                                member_assignment=b"\x00\x00" + assignment[2:],
                            )
                        ],
                    ),
                    DG.DescribedGroup(group_id="new", group_state="Dead"),
                ]
            )
        assert request.group_ids == ["new"]
        return CG(
            groups=[
                CG.DescribedGroup(
                    group_id="new",
                    group_state="Stable",
                    group_epoch=4,
                    assignor_name="uniform",
                    members=[
                        CG.Member(
                            member_id="m2",
                            client_id="c2",
                            member_epoch=4,
                            subscribed_topic_names=["t"],
                            assignment=CG.Assignment(
                                topic_partitions=[
                                    CG.TopicPartitions(topic_name="t", partitions=[2])
                                ]
                            ),
                        )
                    ],
                )
            ]
        )

    groups = await admin_on(FakeCluster(handler)).describe_groups(["classic", "new"])
    classic, new = groups["classic"], groups["new"]
    assert classic.state == "Stable" and classic.protocol == "range"
    assert classic.members[0].assignment == (TP("t", 0), TP("t", 1))
    assert new.group_type == "consumer" and new.group_epoch == 4
    assert new.members[0].assignment == (TP("t", 2),) and new.members[0].member_epoch == 4


async def test_describe_configs_routes_broker_resources_and_filters_keys() -> None:
    DC = m.DescribeConfigsResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1})
        assert all(r.configuration_keys is None for r in request.resources)
        return DC(
            results=[
                DC.DescribeConfigsResult(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=0 if r.resource_name != "bad" else 29,
                    configs=[
                        DC.DescribeConfigsResourceResult(name="a", value="1", config_source=1),
                        DC.DescribeConfigsResourceResult(name="b", value="2", config_source=5),
                    ],
                )
                for r in request.resources
            ]
        )

    cluster = FakeCluster(handler)
    resources = [ConfigResource.topic("t"), ConfigResource.broker(2), ConfigResource.topic("bad")]
    result = await admin_on(cluster).describe_configs(resources, keys=["a"])
    assert list(result[ConfigResource.topic("t")].entries) == ["a"]
    assert result[ConfigResource.broker(2)].entries["a"].value == "1"
    assert isinstance(result[ConfigResource.topic("bad")].error, TopicAuthorizationFailedError)
    routed = {
        n: [r.resource_name for r in req.resources]
        for n, req in cluster.requests("DescribeConfigsRequest")
    }
    assert routed == {0: ["t", "bad"], 2: ["2"]}


async def test_config_calls_fail_a_missing_topic_at_once() -> None:
    DC = m.DescribeConfigsResponse
    IAC = m.IncrementalAlterConfigsResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.DescribeConfigsRequest):
            return DC(
                results=[
                    DC.DescribeConfigsResult(
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_code=3 if r.resource_name == "missing" else 0,
                    )
                    for r in request.resources
                ]
            )
        return IAC(
            responses=[
                IAC.AlterConfigsResourceResponse(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=3 if r.resource_name == "missing" else 0,
                )
                for r in request.resources
            ]
        )

    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    t, missing = ConfigResource.topic("t"), ConfigResource.topic("missing")
    described = await admin.describe_configs([t, missing], timeout_ms=500)
    assert described[t].error is None
    assert isinstance(described[missing].error, UnknownTopicOrPartitionError)
    op = [AlterConfigOp("retention.ms", "1000", AlterConfigOpType.SET)]
    altered = await admin.incremental_alter_configs({t: op, missing: op}, timeout_ms=500)
    assert altered[t] is None
    assert isinstance(altered[missing], UnknownTopicOrPartitionError)
    assert len(cluster.requests("DescribeConfigsRequest")) == 1
    assert len(cluster.requests("IncrementalAlterConfigsRequest")) == 1


async def test_list_groups_asks_every_broker_and_checks_filter_versions() -> None:
    LG = m.ListGroupsResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1})
        return LG(
            groups=[
                LG.ListedGroup(
                    group_id=f"g{node}",
                    protocol_type="consumer",
                    group_state="Empty",
                    group_type="classic",
                )
            ]
        )

    cluster = FakeCluster(handler)
    admin = admin_on(cluster)
    groups = await admin.list_groups(states=["Empty"])
    assert [g.group_id for g in groups] == ["g1", "g2", "g3"]
    assert groups[0].state == "Empty" and groups[0].type == "classic"
    assert cluster.requests("ListGroupsRequest")[0][1].states_filter == ["Empty"]
    cluster.versions[m.ListGroupsRequest.API_KEY] = 3
    with pytest.raises(UnsupportedVersionError, match="states needs ListGroups v4"):
        await admin.list_groups(states=["Empty"])


async def test_create_topics_retries_not_controller() -> None:
    CT = m.CreateTopicsResponse
    answers = [41, 0]  # NOT_CONTROLLER, then success

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.MetadataRequest):
            return metadata({0: 1})
        return CT(topics=[CT.CreatableTopicResult(name="n", error_code=answers.pop(0))])

    cluster = FakeCluster(handler)
    result = await admin_on(cluster).create_topics([NewTopic("n", 1, 1)])
    assert result["n"].error is None
    assert [n for n, _ in cluster.requests("CreateTopicsRequest")] == [1, 1]  # the controller


async def test_acls_results_per_binding_and_filter() -> None:
    CA = m.CreateAclsResponse
    DA = m.DeleteAclsResponse

    def handler(node: int, request: Any) -> Any:
        if isinstance(request, m.CreateAclsRequest):
            return CA(
                results=[
                    CA.AclCreationResult(error_code=0),
                    CA.AclCreationResult(error_code=29, error_message="no"),
                ]
            )
        return DA(
            filter_results=[
                DA.DeleteAclsFilterResult(
                    matching_acls=[
                        DA.DeleteAclsMatchingAcl(
                            resource_type=2,
                            resource_name="t",
                            pattern_type=3,
                            principal="User:a",
                            host="*",
                            operation=3,
                            permission_type=3,
                        )
                    ]
                )
            ]
        )

    admin = admin_on(FakeCluster(handler))
    ok = AclBinding(ResourceType.TOPIC, "t", "User:a", AclOperation.READ)
    denied = AclBinding(ResourceType.TOPIC, "u", "User:a", AclOperation.WRITE)
    created = await admin.create_acls([ok, denied])
    assert created[ok] is None and isinstance(created[denied], TopicAuthorizationFailedError)
    deleted = await admin.delete_acls([AclBindingFilter(resource_name="t")])
    assert deleted[AclBindingFilter(resource_name="t")].deleted == (ok,)


async def test_describe_cluster_falls_back_to_metadata() -> None:
    def handler(node: int, request: Any) -> Any:
        assert isinstance(request, m.MetadataRequest)
        return metadata({0: 1})

    cluster = FakeCluster(handler)
    cluster.unsupported.add(m.DescribeClusterRequest.API_KEY)
    described = await admin_on(cluster).describe_cluster()
    assert described.cluster_id == "cluster-a" and described.controller_id == 1
    assert [b.node_id for b in described.brokers] == [1, 2, 3]
