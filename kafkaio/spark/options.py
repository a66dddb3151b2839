"""The options of format("kafkaio"), with the names and rules of Spark's Kafka source/sink.

Sans-I/O: ``SourceOptions.parse`` and ``SinkOptions.parse`` validate and raise
KafkaConfigError naming the option; nothing here talks to a broker.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kafkaio.errors import KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetBound,
    parse_assign,
    parse_bound,
    parse_timestamp,
)
from kafkaio.spark.settings import ClientSettings, client_settings

SOURCE_OPTIONS = frozenset(
    {
        "subscribe",
        "subscribepattern",
        "assign",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "endingtimestamp",
        "startingoffsetsbytimestamp",
        "endingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "maxoffsetspertrigger",
        "failondataloss",
        "includeheaders",
        "kafkaconsumer.polltimeoutms",
        "bootstrap.servers",
        "minpartitions",
        "maxrecordsperpartition",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "fetchoffset.numretries",
        "fetchoffset.retryintervalms",
        "groupidprefix",
    }
)
SINK_OPTIONS = frozenset(
    {"topic", "bootstrap.servers", "deliveryguarantee", "transactionalidprefix"}
)
_DEFAULT_POLL_TIMEOUT_MS = 120_000
_DEFAULT_MAX_TRIGGER_DELAY = "15m"
_TIME_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"


@dataclass(frozen=True, slots=True)
class TopicSelection:
    """Which partitions to read: ``subscribe`` topics, a ``subscribePattern`` regex (full
    match, internal topics excluded) or an ``assign``-ed list of partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: ClientSettings
    selection: TopicSelection
    starting: OffsetBound | None
    ending: OffsetBound | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    timestamp_strategy: str
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {k.lower(): v for k, v in options.items()}
        _check_names(opts, SOURCE_OPTIONS | SINK_OPTIONS)
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise KafkaConfigError(
                f"option startingOffsetsByTimestampStrategy is {strategy!r}; use 'error' or "
                "'latest'"
            )
        max_offsets = opts.get("maxoffsetspertrigger")
        return cls(
            client=client_settings(opts),
            selection=_selection(opts),
            starting=_bound(opts, "starting"),
            ending=_bound(opts, "ending"),
            max_offsets_per_trigger=(
                None if max_offsets is None else _positive(opts, "maxOffsetsPerTrigger")
            ),
            fail_on_data_loss=_boolean(opts, "failOnDataLoss", True),
            include_headers=_boolean(opts, "includeHeaders", False),
            poll_timeout_ms=(
                _positive(opts, "kafkaConsumer.pollTimeoutMs")
                if "kafkaconsumer.polltimeoutms" in opts
                else _DEFAULT_POLL_TIMEOUT_MS
            ),
            timestamp_strategy=strategy,
            min_partitions=_optional_positive(opts, "minPartitions"),
            max_records_per_partition=_optional_positive(opts, "maxRecordsPerPartition"),
            min_offsets_per_trigger=_optional_positive(opts, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=_duration_ms(
                opts, "maxTriggerDelay", opts.get("maxtriggerdelay", _DEFAULT_MAX_TRIGGER_DELAY)
            ),
            fetch_offset_retries=_non_negative(opts, "fetchOffset.numRetries", 3),
            fetch_offset_retry_interval_ms=_non_negative(opts, "fetchOffset.retryIntervalMs", 1000),
        )

    def check_batch(self) -> None:
        """Spark's rules for batch queries: no 'latest' start, no 'earliest' end."""
        start, end = self.starting, self.ending
        if start is not None and (start.kind == "latest" or LATEST in start.partition_map.values()):
            raise KafkaConfigError(
                "option startingOffsets: 'latest' (or -1) is not allowed in a batch query; "
                "use 'earliest' or explicit offsets"
            )
        if end is not None and (end.kind == "earliest" or EARLIEST in end.partition_map.values()):
            raise KafkaConfigError(
                "option endingOffsets: 'earliest' (or -2) is not allowed in a batch query; "
                "use 'latest' or explicit offsets"
            )

    def check_streaming(self) -> None:
        if self.ending is not None:
            raise KafkaConfigError(
                "endingOffsets/endingTimestamp are not allowed in a streaming query (it runs "
                "until stopped); use a batch read (spark.read) for a bounded range"
            )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: ClientSettings
    topic: str | None
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = {k.lower(): v for k, v in options.items()}
        _check_names(opts, SOURCE_OPTIONS | SINK_OPTIONS)
        topic = opts.get("topic")
        guarantee = opts.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower()
        if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
            raise KafkaConfigError(
                f"option deliveryGuarantee is {guarantee!r}; use '{AT_LEAST_ONCE}' (the "
                f"default, as Spark's Kafka sink) or '{EXACTLY_ONCE}' (transactions, for "
                "streaming queries)"
            )
        prefix = opts.get("transactionalidprefix")
        if prefix is not None and guarantee != EXACTLY_ONCE:
            raise KafkaConfigError(
                "option transactionalIdPrefix is only used with deliveryGuarantee=exactly-once"
            )
        return cls(
            client_settings(opts),
            topic.strip() if topic else None,
            guarantee,
            prefix.strip() if prefix else None,
        )


def _check_names(opts: Mapping[str, str], known: frozenset[str]) -> None:
    """Options neither known nor kafka.* are ignored (Spark may add its own, e.g. path),
    unless they look like a misspelt known option."""
    for name in opts:
        if name in known or name.startswith("kafka."):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
        if close:
            raise KafkaConfigError(f"unknown option {name!r}; did you mean {close[0]!r}?")


def _selection(opts: Mapping[str, str]) -> TopicSelection:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if opts.get(name)]
    if len(given) != 1:
        raise KafkaConfigError(
            "exactly one of the options subscribe (topics, comma-separated), "
            'subscribePattern (a regex) or assign (JSON like {"t": [0, 1]}) is required'
            + (f"; got {', '.join(given)}" if given else "")
        )
    name, value = given[0], opts[given[0]]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaConfigError(f"option subscribe is {value!r}: name at least one topic")
        return TopicSelection(topics=topics)
    if name == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise KafkaConfigError(f"option subscribePattern {value!r} is invalid: {exc}") from None
        return TopicSelection(pattern=value)
    return TopicSelection(partitions=parse_assign(value))


def _bound(opts: Mapping[str, str], which: str) -> OffsetBound | None:
    """The most specific of {which}Timestamp, {which}OffsetsByTimestamp, {which}Offsets
    (Spark's precedence), or None when none is given."""
    if f"{which}timestamp" in opts:
        return parse_timestamp(f"{which}Timestamp", opts[f"{which}timestamp"])
    if f"{which}offsetsbytimestamp" in opts:
        name = f"{which}OffsetsByTimestamp"
        return parse_bound(name, opts[f"{which}offsetsbytimestamp"], timestamps=True)
    if f"{which}offsets" in opts:
        return parse_bound(f"{which}Offsets", opts[f"{which}offsets"])
    return None


def _boolean(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise KafkaConfigError(f"option {name} is {value!r}; use true or false")
    return text == "true"


def _optional_positive(opts: Mapping[str, str], name: str) -> int | None:
    return _positive(opts, name) if name.lower() in opts else None


def _non_negative(opts: Mapping[str, str], name: str, default: int) -> int:
    value = opts.get(name.lower())
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise KafkaConfigError(f"option {name} is {value!r}; use an integer >= 0")
    return number


def _duration_ms(opts: Mapping[str, str], name: str, value: str) -> int:
    """A Spark time string ("15m", "30s", "500ms", "1h"; a bare number is milliseconds)."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    unit = found.group(2) if found else None
    if found is None or (unit and unit not in _TIME_UNITS_MS):
        raise KafkaConfigError(
            f"option {name} is {value!r}; use a duration such as 15m, 30s or 500ms"
        )
    return int(found.group(1)) * _TIME_UNITS_MS[unit or "ms"]


def _positive(opts: Mapping[str, str], name: str) -> int:
    value = opts[name.lower()]
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise KafkaConfigError(f"option {name} is {value!r}; use a positive integer")
    return number
