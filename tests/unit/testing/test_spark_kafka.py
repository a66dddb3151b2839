"""kafkaio.testing.spark_kafka without Maven or a network: jar names, the skip reasons and
``fetch-spark-kafka --if-possible``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaio.testing import __main__ as cli
from kafkaio.testing import spark_kafka
from kafkaio.testing.errors import BrokerStartError


def test_artifact_names_drop_the_version() -> None:
    names = {
        "kafka-clients-3.9.2.jar": "kafka-clients",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar": "spark-sql-kafka-0-10_2.13",
        "commons-pool2-2.13.1.jar": "commons-pool2",
        "zstd-jni-1.5.7-7.jar": "zstd-jni",
        "jsr305-3.0.0.jar": "jsr305",
    }
    for jar, artifact in names.items():
        assert spark_kafka._artifact(Path(jar)) == artifact


def test_without_maven_it_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKAIO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spark_kafka, "find_maven", lambda: None)
    monkeypatch.setattr("kafkaio.testing.apache.find_maven", lambda: None)
    reason = spark_kafka.unavailable_reason("9.9.9")
    assert reason is not None and "Maven (mvn) not found" in reason
    with pytest.raises(BrokerStartError, match="Pin PySpark"):
        spark_kafka.fetch_connector("9.9.9")


def test_fetch_if_possible_exits_0_when_maven_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(spark_kafka, "unavailable_reason", lambda: None)

    def fail() -> list[Path]:
        raise BrokerStartError("Maven could not fetch org.apache.spark:spark-sql-kafka")

    monkeypatch.setattr(spark_kafka, "connector_jars", fail)
    assert cli.main(["fetch-spark-kafka", "--if-possible"]) == 0
    assert cli.main(["fetch-spark-kafka"]) == 1
    assert "not fetched: Maven could not fetch" in capsys.readouterr().err
