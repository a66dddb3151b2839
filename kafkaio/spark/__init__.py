"""kafkaio.spark: a PySpark data source, format("kafkaio"), reading and writing Kafka with
kafkaio's clients (Spark's Kafka source options and schema). Needs ``kafkaio[spark]``.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"kafkaio.spark needs pyspark (>= 4.2) and pyarrow ({exc}); install them with "
        "pip install 'kafkaio[spark]'"
    ) from exc

from kafkaio.spark.errors import DataLossError, OffsetLookupError
from kafkaio.spark.offsets import OffsetRange
from kafkaio.spark.reader import KafkaioBatchReader, KafkaioStreamReader, offsets_json
from kafkaio.spark.source import KafkaioDataSource, register
from kafkaio.spark.writer import KafkaioBatchWriter, KafkaioCommitMessage, KafkaioStreamWriter

__all__ = [
    "DataLossError",
    "KafkaioBatchReader",
    "KafkaioBatchWriter",
    "KafkaioCommitMessage",
    "KafkaioDataSource",
    "KafkaioStreamReader",
    "KafkaioStreamWriter",
    "OffsetLookupError",
    "OffsetRange",
    "offsets_json",
    "register",
]
