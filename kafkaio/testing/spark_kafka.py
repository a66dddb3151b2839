"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) for comparisons.

``fetch_connector()`` resolves ``spark_kafka/pom.xml`` for the installed PySpark's version
with Maven into ``~/.cache/kafkaio/spark-sql-kafka-VERSION/jars`` once (from Maven Central
or its mirror; offline afterwards); ``connector_jars()`` lists the jars to put in
``spark.jars``: the connector and the dependencies PySpark does not ship (kafka-clients,
commons-pool2, the token provider).

Command line: ``python -m kafkaio.testing fetch-spark-kafka`` (what ``make spark-jars`` runs).
"""

from __future__ import annotations

import re
from pathlib import Path

from kafkaio.testing.apache import (
    cache_root,
    fetch_once,
    find_java,
    find_maven,
    java_major_version,
    maven_copy_dependencies,
)
from kafkaio.testing.errors import BrokerStartError

__all__ = [
    "connector_jars",
    "connector_home",
    "fetch_connector",
    "pyspark_version",
    "unavailable_reason",
]

POM = Path(__file__).resolve().parent / "spark_kafka" / "pom.xml"
_STAMP = "jars.complete"
# name-VERSION.jar, the version digits and dots (a build number may follow: zstd-jni-1.5.7-7)
_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-\d[\w.]*(?:-\d+)?\.jar$")


def pyspark_version() -> str | None:
    """The installed PySpark's version (its jars' version), or None without PySpark."""
    try:
        import pyspark
    except ImportError:
        return None
    return str(pyspark.__version__)


def connector_home(version: str) -> Path:
    return cache_root() / f"spark-sql-kafka-{version}"


def _stamp_text(version: str) -> str:
    import hashlib

    return f"{version} {hashlib.sha256(POM.read_bytes()).hexdigest()}\n"


def _cached(version: str) -> bool:
    try:
        return (connector_home(version) / _STAMP).read_text() == _stamp_text(version)
    except OSError:
        return False


def unavailable_reason(version: str | None = None) -> str | None:
    """None when Spark's Kafka connector can be loaded here, else why not (a skip reason)."""
    version = version or pyspark_version()
    if version is None:
        return "PySpark is not installed (pip install 'kafkaio[spark]')"
    java = find_java()
    if java is None or (java_major_version(java) or 0) < 17:
        return "Spark needs Java 17+ (java on PATH or JAVA_HOME)"
    if not _cached(version) and find_maven() is None:
        return (
            f"Maven (mvn) not found and spark-sql-kafka-0-10 {version} is not cached in "
            f"{connector_home(version)}: install Maven (it fetches it from Maven Central)"
        )
    return None


def fetch_connector(version: str | None = None, *, timeout: float = 600.0) -> Path:
    """Resolve spark-sql-kafka-0-10_2.13 ``version`` (default: PySpark's) with its runtime
    dependencies into the cache; return the jars directory. Idempotent and quick when cached.

    Raises BrokerStartError with Maven's output when Maven is missing or the artifact is not
    served (Maven Central publishes the connector a while after PySpark reaches PyPI).
    """
    version = version or pyspark_version()
    if version is None:
        raise BrokerStartError("PySpark is not installed: pip install 'kafkaio[spark]'")
    home = connector_home(version)
    jars = home / "jars"

    def fetch() -> None:
        assert version is not None
        try:
            maven_copy_dependencies(
                POM,
                jars,
                {"spark.version": version},
                expect=f"spark-sql-kafka-0-10_2.13-{version}.jar",
                what=f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
                timeout=timeout,
            )
        except BrokerStartError as exc:
            raise BrokerStartError(
                f"{exc}\nIs that version on Maven Central? Pin PySpark to a version whose "
                "Kafka connector is published (Maven Central gets it a while after PyPI)."
            ) from exc
        (home / _STAMP).write_text(_stamp_text(version))

    fetch_once(home, lambda: _cached(version), fetch)
    return jars


def _artifact(jar: Path) -> str:
    found = _VERSIONED_JAR.match(jar.name)
    return found.group("name") if found else jar.stem


def connector_jars(version: str | None = None) -> list[Path]:
    """The jars for ``spark.jars``: the connector's, minus artifacts PySpark already ships
    (two versions of one library on the classpath is asking for trouble)."""
    directory = fetch_connector(version)
    import pyspark

    shipped = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(j for j in directory.glob("*.jar") if _artifact(j) not in shipped)
