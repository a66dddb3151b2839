"""A one-node fake cluster on loopback whose metadata and SASL answers a test can make hostile.

It answers ApiVersions, SaslHandshake/SaslAuthenticate (PLAIN, OAUTHBEARER: any credentials;
SCRAM: a server-first message asking for ``scram_iterations``, then a refusal), Metadata
(topic "t", one partition led by node 1 at ``node_address``, by default this listener) and
ListOffsets (offset ``OFFSET`` for every partition); other requests are read and dropped.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio
import anyio.abc

from kafkaio.protocol import messages as m
from tests.leaks._silent_broker import APIS, TOPIC, TOPIC_ID
from tests.unit.net._fake_broker import FakeClient, LoopbackServer, api_versions_response

OFFSET = 42
SASL_APIS = {**APIS, 17: (0, 1), 36: (0, 2)}


class FakeCluster(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.node_address: tuple[Any, Any] | None = None  # None: this listener
        self.scram_iterations = 4096
        self.authenticated = 0  # SASL exchanges completed

    def _metadata(self) -> Any:
        r = m.MetadataResponse
        host, port = self.node_address or (self.host, self.port)
        return r(
            cluster_id="fake",
            controller_id=1,
            brokers=[r.MetadataResponseBroker(node_id=1, host=host, port=port)],
            topics=[
                r.MetadataResponseTopic(
                    name=TOPIC,
                    topic_id=TOPIC_ID,
                    partitions=[
                        r.MetadataResponsePartition(
                            partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                        )
                    ],
                )
            ],
        )

    @staticmethod
    def _list_offsets(request: Any) -> Any:
        r = m.ListOffsetsResponse
        return r(
            topics=[
                r.ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=[
                        r.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, offset=OFFSET, timestamp=-1
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    async def _authenticate(self, client: FakeClient, received: Any) -> None:
        data = bytes(received.request.auth_bytes)
        reply = m.SaslAuthenticateResponse(error_code=0, auth_bytes=b"", session_lifetime_ms=0)
        if data.startswith(b"n,,n="):  # SCRAM client-first
            nonce = data.split(b",r=", 1)[1] + b"server"
            salt = base64.b64encode(b"salt")
            reply.auth_bytes = b"r=%s,s=%s,i=%d" % (nonce, salt, self.scram_iterations)
        elif data.startswith(b"c=biws"):  # SCRAM client-final: this fake knows no password
            reply.error_code, reply.error_message = 58, "no such user"
        else:
            self.authenticated += 1
        await client.respond(received, reply)

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        client = FakeClient(stream)
        try:
            while True:
                received = await client.read_request()
                key = received.api_key
                if key == 18:
                    await client.respond(received, api_versions_response(SASL_APIS))
                elif key == 17:
                    mechanism = received.request.mechanism
                    await client.respond(
                        received, m.SaslHandshakeResponse(error_code=0, mechanisms=[mechanism])
                    )
                elif key == 36:
                    await self._authenticate(client, received)
                elif key == 3:
                    await client.respond(received, self._metadata())
                elif key == 2:
                    await client.respond(received, self._list_offsets(received.request))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await anyio.aclose_forcefully(stream)
