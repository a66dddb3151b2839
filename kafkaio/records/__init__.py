"""Kafka record formats: RecordBatch v2 encode/decode, legacy message sets, compression.

Sans-I/O and allocation-light: the producer's and the fetcher's hot path.
"""

from __future__ import annotations

from kafkaio.records import batch as _batch
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
    Header,
    Record,
    RecordTuple,
    parse_control_record,
)

#: True when the optional mypyc-compiled codec is in use (built by ``KAFKAIO_COMPILE=1``,
#: see setup.py); False for the pure-Python modules. Both decode and encode identically.
COMPILED: bool = not (_batch.__file__ or "").endswith(".py")

__all__ = [
    "COMPILED",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "BatchBuilder",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyRecordBatch",
    "Record",
    "RecordBatch",
    "RecordTuple",
    "compress",
    "decompress",
    "iter_batches",
    "parse_control_record",
]
