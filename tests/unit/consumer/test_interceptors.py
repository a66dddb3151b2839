"""Consumer interceptors (Java's ConsumerInterceptor): on_consume sees and may change what a
poll returns, on_commit hears of successful commits, close() at the end; errors are logged,
never raised into consuming."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafkaio import Consumer
from kafkaio.consumer.interceptors import ConsumerInterceptor, ConsumerInterceptors
from kafkaio.consumer.record import ConsumerRecord
from kafkaio.errors import KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata

A = TopicPartition("t", 0)


def record(offset: int, value: bytes) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("t", 0, offset, 0, 0, None, value, (), 3, -1, 1)


class DropOdd(ConsumerInterceptor):
    def __init__(self) -> None:
        self.seen: list[list[int]] = []

    def on_consume(self, records: dict[TopicPartition, list[Any]]) -> dict[Any, Any]:
        self.seen.append([r.offset for r in records.get(A, [])])
        return {tp: [r for r in batch if r.offset % 2 == 0] for tp, batch in records.items()}


class Broken(ConsumerInterceptor):
    def on_consume(self, records: dict[TopicPartition, list[Any]]) -> None:
        raise RuntimeError("interceptor bug")

    def on_commit(self, offsets: Any) -> None:
        raise RuntimeError("interceptor bug")


def test_interceptors_run_in_order_each_on_what_the_previous_returned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = DropOdd(), DropOdd()
    chain = ConsumerInterceptors([first, Broken(), second])
    with caplog.at_level(logging.ERROR, logger="kafkaio.consumer"):
        out = chain.on_consume({A: [record(i, b"v") for i in range(5)]})
    assert first.seen == [[0, 1, 2, 3, 4]] and second.seen == [[0, 2, 4]]
    assert [r.offset for r in out[A]] == [0, 2, 4]
    assert "failed in on_consume" in caplog.text  # logged, not raised


def test_on_commit_and_close_reach_every_interceptor_that_has_them() -> None:
    heard: list[Any] = []

    class Watch(ConsumerInterceptor):
        def on_commit(self, offsets: Any) -> None:
            heard.append(offsets)

        def close(self) -> None:
            heard.append("closed")

    chain = ConsumerInterceptors([Watch(), Broken(), Watch()])
    assert chain.watches_commits
    chain.on_commit({A: OffsetAndMetadata(7)})
    chain.close()
    assert heard == [{A: OffsetAndMetadata(7)}, {A: OffsetAndMetadata(7)}, "closed", "closed"]


def test_an_object_without_any_hook_is_refused_at_construction() -> None:
    with pytest.raises(KafkaConfigError, match="none of on_consume"):
        Consumer(bootstrap_servers="localhost:1", interceptors=[object()])
    with pytest.raises(KafkaConfigError, match="list of interceptor"):
        Consumer(bootstrap_servers="localhost:1", interceptors=DropOdd())  # type: ignore[arg-type]
