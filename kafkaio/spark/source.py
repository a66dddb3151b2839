"""KafkaioDataSource: the PySpark data source named "kafkaio" (Spark's Kafka source and
sink options and schema, on kafkaio's clients).

Register it with ``kafkaio.spark.register(spark)`` (or spark.dataSource.register).
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kafkaio.spark.options import SourceOptions
from kafkaio.spark.reader import KafkaioBatchReader, KafkaioStreamReader
from kafkaio.spark.rows import source_schema
from kafkaio.spark.writer import KafkaioBatchWriter, KafkaioStreamWriter


class KafkaioDataSource(DataSource):
    """format("kafkaio"): read (batch and streaming) and write Kafka topics.

    Output columns: key, value (binary), topic, partition, offset, timestamp,
    timestampType, and headers with includeHeaders=true. See docs/spark.md for options.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkaio"

    def schema(self) -> StructType:
        return source_schema(SourceOptions.parse(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaioBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaioStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaioBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaioStreamWriter(self.options, schema)


def register(spark: SparkSession) -> None:
    """Make format("kafkaio") available in `spark`."""
    spark.dataSource.register(KafkaioDataSource)
