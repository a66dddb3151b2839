"""The modules the optional mypyc build compiles: the one list every consumer reads.

- setup.py (the wheel build, and ``make accel``'s ``setup.py build_ext --inplace``) runs
  this file with `runpy` (it cannot import kafkaio: the build runs before kafkaio's
  dependencies are installed) and compiles `source_paths()`;
- the Makefile's ``ACCEL_SRC`` (what makes ``make accel`` rebuild) is the output of
  ``python3 kafkaio/_accel_modules.py``;
- tests/unit/records/test_records_accel.py imports `COMPILED_MODULES`: it checks these are
  the extensions loaded and reruns chosen unit suites on their .py sources.

To compile one more module, add its name here (and, in that test's ``PURE_SUITES``, the
unit tests that exercise it), then ``make accel``. The module must type-check under mypy
strict (mypyc compiles from its annotations); its .py source stays the fallback.

This file imports nothing and is valid on every supported Python, so it also runs as a
script without kafkaio's dependencies.
"""

# The hot path: varints, Record, RecordBatch decoding and BatchBuilder, ConsumerRecord, the
# step of `async for record in consumer`, the producer's per-record path (appender,
# accumulator, batches, futures, memory, sticky partitioner) and its per-request path (the
# Sender, idempotence, the request metrics, frame encoding and reading). compression.py and
# legacy.py stay interpreted (their time is spent in codec libraries or is rare); so do the
# driver and connections (compiling them as well measured no gain).
COMPILED_MODULES: tuple[str, ...] = (
    "kafkaio.records.varint",
    "kafkaio.records.record",
    "kafkaio.records.batch",
    "kafkaio.records.builder",
    "kafkaio.consumer.record",
    "kafkaio.consumer.iteration",
    "kafkaio.producer.murmur2",
    "kafkaio.producer.future",
    "kafkaio.producer.batch",
    "kafkaio.producer.memory",
    "kafkaio.producer.partitioner",
    "kafkaio.producer.accumulator",
    "kafkaio.producer.appender",
    "kafkaio.producer.sender",
    "kafkaio.producer.idempotence",
    "kafkaio.metrics.sensor",
    "kafkaio.metrics.producer",
    "kafkaio.metrics.timing",
    "kafkaio.protocol.frames",
    "kafkaio.net.framing",
)


def source_paths() -> list[str]:
    """The modules' sources, relative to the directory holding ``kafkaio/``, with ``/``."""
    return [name.replace(".", "/") + ".py" for name in COMPILED_MODULES]


if __name__ == "__main__":
    print("\n".join(source_paths()))
