"""Loopback brokers that never answer: a black hole, or one that answers only discovery.

``SilentBroker(answer_discovery=True)`` answers ApiVersions, Metadata (topic "t", 2
partitions led by itself) and FindCoordinator (itself), and reads and drops every other
request, so each client call reaches its own request and must end on its deadline.
``answer_discovery=False`` accepts connections and never writes a byte.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import anyio
import anyio.abc

from kafkaio.protocol import messages as m
from tests.unit.net._fake_broker import FakeClient, LoopbackServer, api_versions_response

TOPIC = "t"
PARTITIONS = 2
TOPIC_ID = uuid.UUID(int=0x1234)
APIS: dict[int, tuple[int, int]] = {
    0: (0, 9),
    1: (0, 12),
    2: (0, 7),
    3: (0, 12),
    8: (0, 8),
    9: (0, 7),
    10: (0, 4),
    11: (0, 7),
    12: (0, 4),
    13: (0, 4),
    14: (0, 5),
    15: (0, 5),
    16: (0, 4),
    18: (0, 3),
    19: (0, 7),
    20: (0, 6),
    21: (0, 2),
    22: (0, 4),
    24: (0, 3),
    25: (0, 3),
    26: (0, 3),
    28: (0, 3),
    35: (0, 4),
    29: (0, 3),
    30: (0, 3),
    31: (0, 3),
    32: (0, 4),
    37: (0, 3),
    42: (0, 2),
    44: (0, 1),
    47: (0, 0),
    60: (0, 1),
}


def _metadata(port: int, names: list[str] | None) -> Any:
    r = m.MetadataResponse
    wanted = [TOPIC] if names is None else names
    return r(
        cluster_id="silent",
        controller_id=1,
        brokers=[r.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port)],
        topics=[
            r.MetadataResponseTopic(
                name=name,
                topic_id=TOPIC_ID if name == TOPIC else uuid.UUID(int=0),
                error_code=0 if name == TOPIC else 3,  # UNKNOWN_TOPIC_OR_PARTITION
                partitions=[
                    r.MetadataResponsePartition(
                        partition_index=p, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                    for p in range(PARTITIONS if name == TOPIC else 0)
                ],
            )
            for name in wanted
        ],
    )


def _coordinator(port: int, version: int, keys: list[str]) -> Any:
    r = m.FindCoordinatorResponse
    if version < 4:
        return r(node_id=1, host="127.0.0.1", port=port)
    return r(
        coordinators=[r.Coordinator(key=k, node_id=1, host="127.0.0.1", port=port) for k in keys]
    )


class SilentBroker(LoopbackServer):
    """A loopback listener; see the module docstring. ``dropped`` counts ignored requests."""

    def __init__(self, *, answer_discovery: bool = True) -> None:
        super().__init__()
        self.answer_discovery = answer_discovery
        self.accepted = 0
        self.dropped: list[int] = []  # api keys of the requests left unanswered

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        self.accepted += 1
        client = FakeClient(stream)
        try:
            while True:
                if not self.answer_discovery:
                    await client.stream.receive()
                    continue
                received = await client.read_request()
                key = received.api_key
                if key == 18:
                    await client.respond(received, api_versions_response(APIS))
                elif key == 3:
                    topics = received.request.topics
                    names = None if topics is None else [t.name for t in topics]
                    await client.respond(received, _metadata(self.port, names))
                elif key == 10:
                    request = received.request
                    keys = (
                        list(request.coordinator_keys) if received.version >= 4 else [request.key]
                    )
                    await client.respond(received, _coordinator(self.port, received.version, keys))
                else:
                    self.dropped.append(key)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await anyio.aclose_forcefully(stream)


def open_sockets() -> set[str]:
    """Sockets this process has open now, by inode (from /proc/self/fd)."""
    sockets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            sockets.add(target)
    return sockets
