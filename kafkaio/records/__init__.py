"""Kafka record formats: RecordBatch v2 encode/decode, legacy message sets, compression.

Sans-I/O and allocation-light: the producer's and the fetcher's hot path.
"""

from __future__ import annotations

from kafkaio.records.batch import RecordBatch, iter_batches
from kafkaio.records.builder import BatchBuilder
from kafkaio.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    compress,
    decompress,
)
from kafkaio.records.legacy import LegacyRecordBatch
from kafkaio.records.record import (
    ControlRecord,
    ControlRecordType,
    Record,
    parse_control_record,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "BatchBuilder",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "LegacyRecordBatch",
    "Record",
    "RecordBatch",
    "compress",
    "decompress",
    "iter_batches",
    "parse_control_record",
]
