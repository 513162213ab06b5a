"""Opening ChromaDB: an embedded store on disk or a Chroma server, behind one interface.

Both clients expose the same collection API, so everything above this module works the
same on either. chromadb is imported here, lazily, and nowhere else.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
import sqlite3

from ocat.errors import StoreError

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

SCHEMA_VERSION = 1
EXCHANGES_SUFFIX = "exchanges"
DOCUMENTS_SUFFIX = "documents"

# Every request to a Chroma server has a time limit: chromadb 1.5's HttpClient sets none, so a
# server that accepts connections but never answers (a stopped process: Ctrl+Z stops an MCP
# host's whole process group) would hang its clients forever. Connecting on loopback takes
# well under a millisecond. The slowest calls ocat makes are one batch write and one delete:
# on 2 cores kept busy by two other processes (chromadb 1.5.9, 384-d vectors, ~1.5 KB texts),
# adding 256 records took 0.7 s (median) and 2.2 s (worst) with up to 51,200 stored, and
# deleting 30,720 ids in one call took 11 s (Chroma refuses 32,767 ids or more in one call).
# The limit is for a call that gets no answer, so it leaves a wide margin over those.
REQUEST_SECONDS = 120.0
CONNECT_SECONDS = 5.0
# A live server answers its heartbeat in milliseconds: 0.2 s at worst while it deleted 20,480 ids.
HEARTBEAT_SECONDS = 3.0
HEARTBEAT_PATH = "/api/v2/heartbeat"


class ServerNotAnswering(StoreError):
    """A Chroma server did not answer a request in time, or refused the connection."""


@dataclass(frozen=True)
class StoreLocation:
    """Where a store lives: a folder for the embedded client, or a server address (or both:
    a folder whose owning process serves it, reached through that server)."""

    path: Path | None = None
    host: str | None = None
    port: int = 8000

    def describe(self) -> str:
        """The location as a user reads it: a path, `http://host:port`, or a path reached through its owner."""
        if self.host and self.path is not None:
            return f"{self.path} (through its owner at http://{self.host}:{self.port})"
        if self.host:
            return f"http://{self.host}:{self.port}"
        return str(self.path)


def open_client(location: StoreLocation, *, timeout: float = REQUEST_SECONDS) -> ClientAPI:
    """A ChromaDB client for the location, with telemetry off (this machine has no network).

    Each request to a server gets `timeout` seconds (connecting: at most CONNECT_SECONDS);
    one that gets no answer in time raises ServerNotAnswering (a StoreError) naming the server.
    """
    try:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
    except ImportError as exc:  # pragma: no cover - chromadb is a hard dependency
        raise StoreError(f"chromadb is not installed: {exc}") from exc
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if location.host:
            _limit_http_requests()
            token = _request_seconds.set(timeout)
            try:
                return chromadb.HttpClient(host=location.host, port=location.port, settings=chroma_settings)
            finally:
                _request_seconds.reset(token)
        assert location.path is not None
        location.path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(location.path), settings=chroma_settings)
    except Exception as exc:
        # chromadb's constructor turns errors of its first requests into ValueErrors, some
        # with a message of their own; a timeout or a refused connection says more.
        cause = _unanswered(exc)
        if cause is not None:
            raise ServerNotAnswering(f"cannot open the memory store at {location.describe()}: {cause}") from exc
        raise StoreError(f"cannot open the memory store at {location.describe()}: {exc}") from exc


def server_answers(host: str, port: int, timeout: float = HEARTBEAT_SECONDS) -> bool:
    """True if a Chroma server at host:port answers its heartbeat within `timeout` seconds.

    A stopped server's socket still accepts connections (the kernel completes them), so
    only an answer tells a live server from a stopped one.
    """
    import http.client

    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", HEARTBEAT_PATH)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


# The limit for the HTTP clients being made in this context (see open_client).
_request_seconds: ContextVar[float] = ContextVar("ocat_chroma_request_seconds", default=REQUEST_SECONDS)
_limiting = threading.Lock()


def _limit_http_requests() -> None:
    """Give chromadb's HTTP client a time limit on every request, and name the server when it runs out.

    chromadb 1.5.9 builds its httpx client with `timeout=None`, has no setting for it, and
    sends its first requests from inside the HttpClient constructor; so the limit is set
    where that httpx client is made, once per process, for every HTTP client after it.
    """
    import httpx
    from chromadb.api.fastapi import FastAPI

    with _limiting:
        if getattr(FastAPI, "_ocat_limited", False):
            return
        make, send = FastAPI.__init__, FastAPI._make_request

        def __init__(self: Any, system: Any) -> None:
            make(self, system)
            seconds = _request_seconds.get()
            self._session.timeout = httpx.Timeout(seconds, connect=min(CONNECT_SECONDS, seconds))

        def _make_request(self: Any, method: str, path: str, **kwargs: Any) -> Any:
            try:
                return send(self, method, path, **kwargs)
            except httpx.TimeoutException as exc:
                limit = self._session.timeout
                seconds = limit.connect if isinstance(exc, httpx.ConnectTimeout) else limit.read
                raise ServerNotAnswering(
                    f"the memory server at {_server_url(self._api_url)} did not answer within {seconds:g} s; "
                    "its process may be stopped (Ctrl+Z: resume it with fg) or stuck"
                ) from exc
            except httpx.ConnectError as exc:
                raise ServerNotAnswering(
                    f"the memory server at {_server_url(self._api_url)} is not running ({exc})"
                ) from exc

        FastAPI.__init__ = __init__  # type: ignore[method-assign]
        FastAPI._make_request = _make_request  # type: ignore[method-assign]
        FastAPI._ocat_limited = True  # type: ignore[attr-defined]


def _server_url(api_url: str) -> str:
    parts = urlsplit(api_url)
    return f"{parts.scheme}://{parts.netloc}"


def _unanswered(exc: BaseException) -> ServerNotAnswering | None:
    """The ServerNotAnswering behind an exception, if any (chromadb re-raises some as ValueError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ServerNotAnswering):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# The file an embedded Chroma store keeps its catalogue in (collections, their metadata).
CHROMA_FILE = "chroma.sqlite3"


def collections_in_folder(path: Path) -> set[str] | None:
    """The collection names of the embedded store in folder `path`, read without opening it
    (an empty set when there is no store there; None when its catalogue cannot be read).

    Read-only and lock-free: another process may own the folder (ocat.memory.sharing), and
    asking whether a store exists must neither wait for it nor create anything. It reads
    Chroma's own catalogue table, which Chroma has kept under this name since 0.4.
    """
    catalogue = path / CHROMA_FILE
    if not catalogue.is_file():
        return set()
    try:
        connection = sqlite3.connect(f"{catalogue.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            return {str(row[0]) for row in connection.execute("SELECT name FROM collections")}
        finally:
            connection.close()
    except sqlite3.Error:
        return None


def collection_names(store: str) -> tuple[str, str]:
    """The two Chroma collections of a named store: exchanges, and documents.

    Separate collections keep counts O(1) and let exchange and document searches run
    without a metadata `where` filter, which is slow at scale.
    """
    return f"{store}-{EXCHANGES_SUFFIX}", f"{store}-{DOCUMENTS_SUFFIX}"


def open_collection(
    client: ClientAPI, name: str, *, model: str, dimensions: int, location: str, extra: dict[str, Any] | None = None
) -> Collection:
    """Get or create a cosine-space collection and check it was built with this embedding model.

    `extra` metadata (the model's calibration) is recorded only when the collection is created.
    """
    metadata = {"embedding_model": model, "dimensions": dimensions, "ocat_schema": SCHEMA_VERSION, **(extra or {})}
    try:
        collection = client.get_or_create_collection(
            name,
            embedding_function=None,
            metadata=metadata,
            # Chroma's default space is L2; relevance scores here are cosine similarities.
            configuration={"hnsw": {"space": "cosine"}},
        )
    except Exception as exc:
        raise StoreError(f"cannot open collection {name!r} at {location}: {exc}") from exc
    existing = collection.metadata or {}
    stored_model = existing.get("embedding_model")
    stored_dims = existing.get("dimensions")
    if stored_model is not None and (stored_model != model or int(stored_dims or 0) != dimensions):
        raise StoreError(
            f"the store at {location} was built with embedding model {stored_model} ({stored_dims}-d), "
            f"but the config says {model} ({dimensions}-d). Use the store's model, or move the memory "
            "to the new model with --export-memory and --import-memory into a new store."
        )
    space = _space_of(collection)
    if space not in (None, "cosine"):
        raise StoreError(f"collection {name!r} at {location} uses {space} distance; ocat needs cosine")
    return collection


def _space_of(collection: Collection) -> str | None:
    configuration = getattr(collection, "configuration_json", None) or {}
    hnsw = configuration.get("hnsw") or {}
    space = hnsw.get("space")
    if space is None:
        space = (collection.metadata or {}).get("hnsw:space")
    return space
