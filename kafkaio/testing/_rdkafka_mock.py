"""ctypes bindings to librdkafka's mock cluster (``rd_kafka_mock_*``), in-process.

Used only inside the mock-cluster helper process; the library is the one bundled in the
confluent-kafka wheel (``confluent_kafka.libs/librdkafka-*.so*``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafkaio.testing.errors import MockClusterError

_P = ctypes.c_void_p
_STR = ctypes.c_char_p
_I16 = ctypes.c_int16
_I32 = ctypes.c_int32
_INT = ctypes.c_int
_SIZE = ctypes.c_size_t
_RD_KAFKA_PRODUCER = 0

# name: (restype, argtypes). Only fixed arguments for variadic functions.
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_version_str": (_STR, []),
    "rd_kafka_err2str": (_STR, [_INT]),
    "rd_kafka_err2name": (_STR, [_INT]),
    "rd_kafka_conf_new": (_P, []),
    "rd_kafka_conf_set": (_INT, [_P, _STR, _STR, _STR, _SIZE]),
    "rd_kafka_new": (_P, [_INT, _P, _STR, _SIZE]),
    "rd_kafka_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_new": (_P, [_P, _INT]),
    "rd_kafka_mock_cluster_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_bootstraps": (_STR, [_P]),
    "rd_kafka_mock_topic_create": (_INT, [_P, _STR, _INT, _INT]),
    "rd_kafka_mock_topic_set_error": (None, [_P, _STR, _INT]),
    "rd_kafka_mock_partition_set_leader": (_INT, [_P, _STR, _I32, _I32]),
    "rd_kafka_mock_partition_set_follower": (_INT, [_P, _STR, _I32, _I32]),
    "rd_kafka_mock_partition_set_follower_wmarks": (
        _INT,
        [_P, _STR, _I32, ctypes.c_int64, ctypes.c_int64],
    ),
    "rd_kafka_mock_partition_push_leader_response": (_INT, [_P, _STR, _INT, _I32, _I32]),
    "rd_kafka_mock_broker_set_down": (_INT, [_P, _I32]),
    "rd_kafka_mock_broker_set_up": (_INT, [_P, _I32]),
    "rd_kafka_mock_broker_set_rtt": (_INT, [_P, _I32, _INT]),
    "rd_kafka_mock_broker_set_rack": (_INT, [_P, _I32, _STR]),
    "rd_kafka_mock_broker_decommission": (_INT, [_P, _I32]),
    "rd_kafka_mock_broker_add": (_INT, [_P, _I32]),
    "rd_kafka_mock_coordinator_set": (_INT, [_P, _STR, _STR, _I32]),
    "rd_kafka_mock_set_apiversion": (_INT, [_P, _I16, _I16, _I16]),
    "rd_kafka_mock_clear_request_errors": (None, [_P, _I16]),
    "rd_kafka_mock_push_request_errors_array": (None, [_P, _I16, _SIZE, ctypes.POINTER(_INT)]),
    "rd_kafka_mock_broker_push_request_error_rtts": (_INT, [_P, _I32, _I16, _SIZE]),
    "rd_kafka_mock_broker_error_stack_cnt": (_INT, [_P, _I32, _I16, ctypes.POINTER(_SIZE)]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_P, _I32]),
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [_P, _INT]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [_P, _INT]),
    "rd_kafka_mock_start_request_tracking": (None, [_P]),
    "rd_kafka_mock_stop_request_tracking": (None, [_P]),
    "rd_kafka_mock_clear_requests": (None, [_P]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_P), [_P, ctypes.POINTER(_SIZE)]),
    "rd_kafka_mock_request_id": (_I32, [_P]),
    "rd_kafka_mock_request_api_key": (_I16, [_P]),
    "rd_kafka_mock_request_timestamp": (ctypes.c_int64, [_P]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_P), _SIZE]),
}


def find_librdkafka() -> str:
    """Path of the librdkafka bundled with confluent-kafka, or of a system librdkafka.

    ``KAFKAIO_LIBRDKAFKA`` overrides the search with an explicit path.
    """
    explicit = os.environ.get("KAFKAIO_LIBRDKAFKA")
    if explicit:
        return explicit
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is not None and spec.origin is not None:
        libs = Path(spec.origin).parent.parent / "confluent_kafka.libs"
        found = sorted(libs.glob("librdkafka*.so*")) + sorted(libs.glob("librdkafka*.dylib"))
        if found:
            return str(found[0])
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise MockClusterError(
        "librdkafka not found: install the confluent-kafka wheel (`pip install "
        "confluent-kafka==2.16.1`) or set KAFKAIO_LIBRDKAFKA to a librdkafka.so path"
    )


def load_librdkafka(path: str | None = None) -> ctypes.CDLL:
    """Load librdkafka and declare the signatures of the functions it exports."""
    lib = ctypes.CDLL(path or find_librdkafka())
    for name, (restype, argtypes) in _SIGNATURES.items():
        if hasattr(lib, name):
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
    if not hasattr(lib, "rd_kafka_mock_cluster_new"):
        raise MockClusterError(f"{lib._name} has no mock cluster (rd_kafka_mock_cluster_new)")
    return lib


class RdKafkaMockCluster:
    """A standalone librdkafka mock cluster living in this process (broker ids 1..N)."""

    def __init__(self, num_brokers: int = 3, library: str | None = None) -> None:
        if num_brokers < 1:
            raise MockClusterError(f"num_brokers must be at least 1, got {num_brokers}")
        self._lib = load_librdkafka(library)
        errbuf = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # The handle only does the cluster's book-keeping; keep its warnings quiet.
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"3", errbuf, len(errbuf))
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errbuf, len(errbuf))
        if not self._rk:
            raise MockClusterError(f"rd_kafka_new failed: {errbuf.value.decode()}")
        self._mc = self._lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not self._mc:
            self._lib.rd_kafka_destroy(self._rk)
            raise MockClusterError(f"rd_kafka_mock_cluster_new({num_brokers}) failed")
        self.num_brokers = num_brokers
        self.broker_ids = list(range(1, num_brokers + 1))

    @property
    def version(self) -> str:
        return str(self._lib.rd_kafka_version_str().decode())

    @property
    def bootstrap(self) -> str:
        return str(self._lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode())

    def destroy(self) -> None:
        if self._mc:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    # -- helpers --------------------------------------------------------------------------

    def _function(self, name: str) -> Any:
        if not hasattr(self._lib, name):
            raise MockClusterError(f"{name} is not exported by librdkafka {self.version}")
        if not self._mc:
            raise MockClusterError("the mock cluster was destroyed")
        return getattr(self._lib, name)

    def _check(self, name: str, err: int, what: str) -> None:
        if err:
            label = self._lib.rd_kafka_err2name(err).decode()
            text = self._lib.rd_kafka_err2str(err).decode()
            raise MockClusterError(f"{what}: {name} returned {label} ({err}): {text}")

    def _call(self, name: str, what: str, *args: Any) -> None:
        self._check(name, self._function(name)(self._mc, *args), what)

    # -- topics and partitions ------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        what = f"create topic {topic!r} ({partitions} partitions, rf {replication_factor})"
        self._call(
            "rd_kafka_mock_topic_create", what, topic.encode(), partitions, replication_factor
        )

    def set_topic_error(self, topic: str, error: int) -> None:
        self._function("rd_kafka_mock_topic_set_error")(self._mc, topic.encode(), error)

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        what = f"set leader of {topic}[{partition}] to broker {broker_id}"
        self._call("rd_kafka_mock_partition_set_leader", what, topic.encode(), partition, broker_id)

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        what = f"set preferred follower of {topic}[{partition}] to broker {broker_id}"
        self._call(
            "rd_kafka_mock_partition_set_follower", what, topic.encode(), partition, broker_id
        )

    def set_partition_follower_watermarks(
        self, topic: str, partition: int, low: int, high: int
    ) -> None:
        what = f"set follower watermarks of {topic}[{partition}] to {low}..{high}"
        self._call(
            "rd_kafka_mock_partition_set_follower_wmarks",
            what,
            topic.encode(),
            partition,
            low,
            high,
        )

    def push_leader_response(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int
    ) -> None:
        what = f"push leader response {leader_id}/epoch {leader_epoch} for {topic}[{partition}]"
        self._call(
            "rd_kafka_mock_partition_push_leader_response",
            what,
            topic.encode(),
            partition,
            leader_id,
            leader_epoch,
        )

    # -- brokers --------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        self._call("rd_kafka_mock_broker_set_down", f"take broker {broker_id} down", broker_id)

    def broker_up(self, broker_id: int) -> None:
        self._call("rd_kafka_mock_broker_set_up", f"bring broker {broker_id} up", broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        what = f"set rtt of broker {broker_id} to {rtt_ms} ms"
        self._call("rd_kafka_mock_broker_set_rtt", what, broker_id, rtt_ms)

    def set_rack(self, broker_id: int, rack: str) -> None:
        what = f"set rack of broker {broker_id} to {rack!r}"
        self._call("rd_kafka_mock_broker_set_rack", what, broker_id, rack.encode())

    def decommission_broker(self, broker_id: int) -> None:
        what = f"decommission broker {broker_id}"
        self._call("rd_kafka_mock_broker_decommission", what, broker_id)
        self.broker_ids = [b for b in self.broker_ids if b != broker_id]

    def add_broker(self, broker_id: int) -> None:
        self._call("rd_kafka_mock_broker_add", f"add broker {broker_id}", broker_id)
        self.broker_ids = sorted({*self.broker_ids, broker_id})

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        what = f"set {key_type} coordinator of {key!r} to broker {broker_id}"
        self._call(
            "rd_kafka_mock_coordinator_set", what, key_type.encode(), key.encode(), broker_id
        )

    # -- protocol behaviour ---------------------------------------------------------------

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        what = f"set ApiVersions of api {api_key} to {min_version}..{max_version}"
        self._call("rd_kafka_mock_set_apiversion", what, api_key, min_version, max_version)

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        array = (_INT * len(errors))(*errors)
        self._function("rd_kafka_mock_push_request_errors_array")(
            self._mc, api_key, len(errors), array
        )

    def clear_request_errors(self, api_key: int) -> None:
        self._function("rd_kafka_mock_clear_request_errors")(self._mc, api_key)

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors: Sequence[tuple[int, int]]
    ) -> None:
        variadic: list[Any] = []
        for error, rtt_ms in errors:
            variadic += [_INT(error), _INT(rtt_ms)]
        what = f"push {len(errors)} errors for api {api_key} on broker {broker_id}"
        self._call(
            "rd_kafka_mock_broker_push_request_error_rtts",
            what,
            broker_id,
            api_key,
            len(errors),
            *variadic,
        )

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        count = _SIZE(0)
        what = f"count pushed errors for api {api_key} on broker {broker_id}"
        self._call(
            "rd_kafka_mock_broker_error_stack_cnt", what, broker_id, api_key, ctypes.byref(count)
        )
        return int(count.value)

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        self._function("rd_kafka_mock_group_initial_rebalance_delay_ms")(self._mc, delay_ms)

    def set_group_consumer_session_timeout_ms(self, timeout_ms: int) -> None:
        name = "rd_kafka_mock_set_group_consumer_session_timeout_ms"
        self._function(name)(self._mc, timeout_ms)

    def set_group_consumer_heartbeat_interval_ms(self, interval_ms: int) -> None:
        name = "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms"
        self._function(name)(self._mc, interval_ms)

    # -- request tracking -----------------------------------------------------------------

    def start_request_tracking(self) -> None:
        self._function("rd_kafka_mock_start_request_tracking")(self._mc)

    def stop_request_tracking(self) -> None:
        self._function("rd_kafka_mock_stop_request_tracking")(self._mc)

    def clear_requests(self) -> None:
        self._function("rd_kafka_mock_clear_requests")(self._mc)

    def get_requests(self) -> list[tuple[int, int, int]]:
        """Tracked requests as (broker_id, api_key, timestamp_us), oldest first."""
        count = _SIZE(0)
        array = self._function("rd_kafka_mock_get_requests")(self._mc, ctypes.byref(count))
        if not array:
            return []
        lib = self._lib
        try:
            return [
                (
                    int(lib.rd_kafka_mock_request_id(array[i])),
                    int(lib.rd_kafka_mock_request_api_key(array[i])),
                    int(lib.rd_kafka_mock_request_timestamp(array[i])),
                )
                for i in range(count.value)
            ]
        finally:
            lib.rd_kafka_mock_request_destroy_array(array, count.value)
