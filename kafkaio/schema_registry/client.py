"""An async client for the Confluent Schema Registry REST API (httpx), with caches.

Schemas are immutable once registered, so ``id -> schema`` and ``(subject, schema) -> id``
are cached for the client's life (bounded, least recently used first out); concurrent
look-ups of the same key make one request. Works with Confluent Schema Registry and with
registries that serve its API (Apicurio Registry's ``/apis/ccompat/v7``, Redpanda, Karapace).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import anyio

from kafkaio.errors import KafkaConfigError, KafkaError

log = logging.getLogger("kafkaio.schema_registry")

K = TypeVar("K")
V = TypeVar("V")
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(KafkaError):
    """The registry answered with an error (``http_status``, ``error_code``) or did not
    answer at all (``http_status`` -1). 40401: subject not found, 40403: schema not found,
    409: incompatible schema, 42201: invalid schema."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(f"Schema Registry error {http_status}/{error_code}: {message}")
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named reference from one schema to another subject's version (imports, named types)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Schema:
    """A schema as the registry stores it: its text, type (AVRO, JSON, PROTOBUF) and references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version}
                for r in self.references
            ]
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Schema:
        refs = tuple(
            SchemaReference(r["name"], r["subject"], int(r["version"]))
            for r in body.get("references") or ()
        )
        return cls(body["schema"], body.get("schemaType") or "AVRO", refs)


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema registered under a subject: its global ``schema_id`` and ``version``."""

    schema_id: int
    schema: Schema
    subject: str
    version: int


class _LRU(Generic[K, V]):
    """A bounded cache with one look-up in flight per key."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()
        self._locks: dict[K, anyio.Lock] = {}

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        value = self.get(key)
        if value is not None:
            return value
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                value = self.get(key)
                if value is None:
                    value = await load()
                    self.put(key, value)
                return value
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._locks.pop(key, None)

    def clear(self) -> None:
        self._data.clear()


class SchemaRegistryClient:
    """``async with SchemaRegistryClient("http://localhost:8081") as registry: ...``

    ``url`` may be a list (or comma-separated): when one does not answer the next is tried.
    ``auth`` is (user, password) for HTTP basic auth (Confluent Cloud: API key and secret);
    ``headers`` are added to every request; ``verify`` is httpx's TLS setting (a path to a
    CA bundle, an ``ssl.SSLContext``, or False). ``cache_capacity`` bounds each cache.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        auth: tuple[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        verify: Any = True,
        cache_capacity: int = 1000,
        transport: Any = None,
    ) -> None:
        urls = [u.strip() for u in (url.split(",") if isinstance(url, str) else url)]
        urls = [u.rstrip("/") for u in urls if u]
        if not urls:
            raise KafkaConfigError("SchemaRegistryClient needs at least one URL")
        for u in urls:
            if not u.startswith(("http://", "https://")):
                raise KafkaConfigError(
                    f"Schema Registry URL {u!r} must start with http:// or https://"
                )
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise KafkaConfigError(
                "the Schema Registry client needs httpx: pip install 'kafkaio[schema-registry]'"
            ) from exc
        self.urls = urls
        self._httpx = httpx
        self._options: dict[str, Any] = {
            "auth": auth,
            "headers": {"Accept": _CONTENT_TYPE, **(headers or {})},
            "timeout": timeout,
            "verify": verify,
        }
        if transport is not None:
            self._options["transport"] = transport
        self._http: Any = None
        self._ids: _LRU[int, Schema] = _LRU(cache_capacity)
        self._registered: _LRU[tuple[str, Schema, bool], int] = _LRU(cache_capacity)
        self._looked_up: _LRU[tuple[str, Schema, bool], RegisteredSchema] = _LRU(cache_capacity)
        self._versions: _LRU[tuple[str, int], RegisteredSchema] = _LRU(cache_capacity)

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections (the caches stay)."""
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    # -- requests ---------------------------------------------------------------------------

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        if self._http is None:
            self._http = self._httpx.AsyncClient(**self._options)
        content = None if body is None else json.dumps(body)
        headers = None if body is None else {"Content-Type": _CONTENT_TYPE}
        last: Exception | None = None
        for base in self.urls:
            try:
                response = await self._http.request(
                    method, base + path, content=content, headers=headers
                )
            except self._httpx.TransportError as exc:
                log.warning("Schema Registry %s did not answer: %s", base, exc)
                last = exc
                continue
            if response.status_code >= 400:
                try:
                    error = response.json()
                    code = int(error.get("error_code", response.status_code))
                    message = str(error.get("message", response.text))
                except (ValueError, AttributeError):
                    code, message = response.status_code, response.text or response.reason_phrase
                raise SchemaRegistryError(response.status_code, code, f"{method} {path}: {message}")
            return response.json()
        raise SchemaRegistryError(
            -1, -1, f"no Schema Registry answered at {', '.join(self.urls)}: {last}"
        )

    @staticmethod
    def _subject(subject: str) -> str:
        return quote(subject, safe="")

    # -- schemas ----------------------------------------------------------------------------

    async def _post_schema(self, path: str, schema: Schema, normalize: bool) -> dict[str, Any]:
        query = "?normalize=true" if normalize else ""
        body: dict[str, Any] = await self._request("POST", path + query, schema.to_json())
        return body

    def _found(self, body: Mapping[str, Any], subject: str) -> RegisteredSchema:
        """A registry answer with id, schema and version (its id and schema cached)."""
        found = RegisteredSchema(
            int(body["id"]),
            Schema.from_json(body),
            body.get("subject", subject),
            int(body["version"]),
        )
        self._ids.put(found.schema_id, found.schema)
        return found

    async def register_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> int:
        """Register ``schema`` under ``subject`` (or find it there) and return its id."""

        async def load() -> int:
            path = f"/subjects/{self._subject(subject)}/versions"
            schema_id = int((await self._post_schema(path, schema, normalize))["id"])
            self._ids.put(schema_id, schema)
            return schema_id

        return await self._registered.get_or_load((subject, schema, normalize), load)

    async def lookup_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> RegisteredSchema:
        """The id and version of ``schema`` under ``subject`` (40403 if it is not there)."""

        async def load() -> RegisteredSchema:
            path = f"/subjects/{self._subject(subject)}"
            body = await self._post_schema(path, schema, normalize)
            return self._found({**schema.to_json(), **body}, subject)

        return await self._looked_up.get_or_load((subject, schema, normalize), load)

    async def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (cached: ids never change)."""

        async def load() -> Schema:
            return Schema.from_json(await self._request("GET", f"/schemas/ids/{schema_id}"))

        return await self._ids.get_or_load(schema_id, load)

    async def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        """One version of ``subject`` ("latest" is looked up every time, numbers are cached)."""

        async def load() -> RegisteredSchema:
            body = await self._request(
                "GET", f"/subjects/{self._subject(subject)}/versions/{version}"
            )
            return self._found(body, subject)

        if isinstance(version, int):
            return await self._versions.get_or_load((subject, version), load)
        return await load()

    async def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The latest version of ``subject``."""
        return await self.get_version(subject, "latest")

    async def get_subjects(self) -> list[str]:
        """Every subject."""
        return list(await self._request("GET", "/subjects"))

    async def get_versions(self, subject: str) -> list[int]:
        """The versions of ``subject``."""
        return [
            int(v)
            for v in await self._request("GET", f"/subjects/{self._subject(subject)}/versions")
        ]

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Delete ``subject`` (soft; ``permanent=True`` then removes it for good)."""
        path = f"/subjects/{self._subject(subject)}"
        versions = await self._request("DELETE", path)
        if permanent:
            versions = await self._request("DELETE", path + "?permanent=true")
        self._registered.clear()
        self._looked_up.clear()
        self._versions.clear()
        return [int(v) for v in versions]

    async def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (None: the global one)."""
        path = "/config" if subject is None else f"/config/{self._subject(subject)}"
        body = await self._request("GET", path)
        return str(body.get("compatibilityLevel") or body.get("compatibility"))

    async def set_compatibility(self, level: str, subject: str | None = None) -> str:
        """Set the compatibility level (BACKWARD, FORWARD, FULL, NONE, ..._TRANSITIVE)."""
        path = "/config" if subject is None else f"/config/{self._subject(subject)}"
        body = await self._request("PUT", path, {"compatibility": level.upper()})
        return str(body.get("compatibility") or body.get("compatibilityLevel"))

    async def test_compatibility(
        self, subject: str, schema: Schema, version: int | str = "latest"
    ) -> bool:
        """Whether ``schema`` is compatible with ``version`` of ``subject``."""
        body = await self._request(
            "POST",
            f"/compatibility/subjects/{self._subject(subject)}/versions/{version}",
            schema.to_json(),
        )
        return bool(body.get("is_compatible"))
