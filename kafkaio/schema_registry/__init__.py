"""Confluent Schema Registry: an async client and Avro, JSON Schema and Protobuf serdes in the
Confluent wire format (interoperable with confluent-kafka's and the Java serializers).

``pip install 'kafkaio[avro]'`` (or ``[json-schema]``, ``[protobuf]``, ``[schema-registry]``
for the client alone). See docs/schema-registry.md.
"""

from kafkaio.schema_registry.avro import AvroDeserializer, AvroSerializer
from kafkaio.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkaio.schema_registry.json_schema import JsonSchemaDeserializer, JsonSchemaSerializer
from kafkaio.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from kafkaio.schema_registry.strategies import (
    SubjectNameStrategy,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "JsonSchemaDeserializer",
    "JsonSchemaSerializer",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SubjectNameStrategy",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]
