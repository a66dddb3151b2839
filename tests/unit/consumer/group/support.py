"""Helpers for the group manager tests: wire round trips, a cluster, a coordinator in hand.

Responses are the generated dataclasses, sent through encode/decode so real bytes are used.
"""

from __future__ import annotations

from typing import Any, TypeVar

from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.metadata.cluster import BrokerNode, ClusterMetadata, PartitionInfo, TopicInfo
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

T = TypeVar("T")


def wire(message: T, version: int) -> T:
    """``message`` after a trip through the wire format of ``version``."""
    return type(message).decode(message.encode(version), version)  # type: ignore[attr-defined,no-any-return]


def check_encodes(request: Any) -> None:
    """The request encodes at every version the driver might pick."""
    cls = type(request)
    for version in range(cls.MIN_VERSION, cls.MAX_STABLE_VERSION + 1):
        cls.decode(request.encode(version), version)


def cluster(partitions: dict[str, int], version: int = 1) -> ClusterMetadata:
    topics = {
        name: TopicInfo(
            name,
            None,
            False,
            tuple(PartitionInfo(name, p, 1, 0, (1,), (1,)) for p in range(count)),
        )
        for name, count in partitions.items()
    }
    brokers = {i: BrokerNode(i, f"b{i}", 9092) for i in (1, 2, 3)}
    return ClusterMetadata(brokers=brokers, topics=topics, version=version)


def answer(request: UnsentRequest, now: float, response: Any, version: int) -> None:
    check_encodes(request.request)
    request.handler(now, wire(response, version), None)


def fail(request: UnsentRequest, now: float, error: BaseException) -> None:
    request.handler(now, None, error)


def discover(coordinator: CoordinatorManager, now: float, node_id: int = 1) -> None:
    """Run one coordinator lookup to completion (FindCoordinator v4 response)."""
    (req,) = coordinator.poll(now).requests
    assert isinstance(req.request, m.FindCoordinatorRequest)
    response = m.FindCoordinatorResponse(
        coordinators=[
            m.FindCoordinatorResponse.Coordinator(
                coordinator.group_id, node_id, f"b{node_id}", 9092, 0, None
            )
        ]
    )
    answer(req, now, response, 4)
    assert coordinator.coordinator is not None
    assert coordinator.coordinator.node_id == node_id


def only(requests: list[UnsentRequest], cls: type) -> UnsentRequest:
    matching = [r for r in requests if isinstance(r.request, cls)]
    assert len(matching) == 1, (
        f"expected one {cls.__name__} in {[type(r.request).__name__ for r in requests]}"
    )
    return matching[0]


def kinds(requests: list[UnsentRequest]) -> list[str]:
    return [type(r.request).__name__ for r in requests]
