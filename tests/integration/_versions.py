"""The protocol versions kafkaio negotiates with each test broker, stated rather than
computed by the connection's own rule."""

from __future__ import annotations

from kafkaio.protocol import messages as m

VERSIONED = {
    "Produce": m.ProduceRequest,
    "Fetch": m.FetchRequest,
    "ListOffsets": m.ListOffsetsRequest,
    "Metadata": m.MetadataRequest,
}
# What kafkaio negotiates with each test broker: the highest version both speak. kafkaio
# speaks Produce v11, Fetch v17, ListOffsets v10, Metadata v12 at most; Apache Kafka 4.4
# serves 3-13, 4-18, 1-11, 0-13; Tansu 0.6 0-11, 0-17, 0-9, 0-12; the librdkafka 2.16 mock
# 0-10, 0-16, 0-7, 0-13 (docs/testing.md, /work/shared/brokers.md).
NEGOTIATED = {
    "kafka": {"Produce": 11, "Fetch": 17, "ListOffsets": 10, "Metadata": 12},
    "tansu": {"Produce": 11, "Fetch": 17, "ListOffsets": 9, "Metadata": 12},
    "mock": {"Produce": 10, "Fetch": 16, "ListOffsets": 7, "Metadata": 12},
}
