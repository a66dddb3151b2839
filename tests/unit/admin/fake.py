"""A scripted fake cluster for Admin unit tests: connections whose answers come from a
handler function (or never come, from `hung` nodes), and a record of every request each
node received."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from kafkaio.admin import Admin
from kafkaio.errors import KafkaConnectionError, UnsupportedVersionError
from kafkaio.protocol import messages as m

Handler = Callable[[int, Any], Any]


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.in_flight = 0
        self.closed = False

    def version_for(self, request_cls: type) -> int:
        key = request_cls.API_KEY  # type: ignore[attr-defined]
        if key in self.cluster.versions:
            return self.cluster.versions[key]
        if key in self.cluster.unsupported:
            raise UnsupportedVersionError(f"no {request_cls.__name__}", api=request_cls.__name__)
        return int(request_cls.MAX_STABLE_VERSION)  # type: ignore[attr-defined]

    def supports(self, request_cls: type) -> bool:
        try:
            self.version_for(request_cls)
        except UnsupportedVersionError:
            return False
        return True

    async def send(
        self, request: Any, *, version: int | None = None, timeout: float | None = None
    ) -> Any:
        version = self.version_for(type(request)) if version is None else version
        self.cluster.sent.append((self.node_id, type(request).__name__, version, request))
        if self.node_id in self.cluster.hung and not isinstance(request, m.MetadataRequest):
            await anyio.sleep_forever()  # a broker that never answers (but Metadata)
        return self.cluster.handler(self.node_id, request)


class FakeCluster:
    """Stands in for the ConnectionManager: every node answers through `handler`."""

    def __init__(
        self, handler: Handler, *, down: set[int] | None = None, hung: set[int] | None = None
    ) -> None:
        self.handler = handler
        self.hung = hung or set()
        self.sent: list[tuple[int, str, int, Any]] = []
        self.versions: dict[int, int] = {}
        self.unsupported: set[int] = set()
        self.down = down or set()
        self.nodes: dict[int, tuple[str, int, str | None]] = {}

    async def get(self, node_id: int) -> FakeConnection:
        if node_id in self.down:
            raise KafkaConnectionError(f"node {node_id} is down")
        return FakeConnection(self, node_id)

    async def least_loaded(self) -> FakeConnection:
        return FakeConnection(self, 0)  # 0: "any broker" in these tests

    def update_nodes(self, nodes: dict[int, Any]) -> None:
        self.nodes = {n: (a[0], a[1], None) for n, a in nodes.items()}

    async def close(self) -> None:
        pass

    def requests(self, name: str) -> list[tuple[int, Any]]:
        return [(node, req) for node, n, _v, req in self.sent if n == name]


def admin_on(cluster: FakeCluster, **options: Any) -> Admin:
    options.setdefault("retry_backoff_ms", 1)
    options.setdefault("retry_backoff_max_ms", 5)
    options.setdefault("default_api_timeout_ms", 2000)
    admin = Admin("fake:9092", **options)
    admin._connections = cluster  # type: ignore[assignment]
    return admin
