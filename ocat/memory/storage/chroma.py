"""Opening ChromaDB: an embedded store on disk or a Chroma server, behind one interface.

Both clients expose the same collection API, so everything above this module works the
same on either. chromadb is imported here, lazily, and nowhere else.
"""

from __future__ import annotations

import ssl
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
import sqlite3

from ocat.errors import StoreError
from ocat.memory.storage.client_holds import opened
from ocat.memory.storage.location import StoreLocation
from ocat.memory.storage.server_access import (
    ServerNotAnswering,
    absence,
    check_answer,
    expanded_headers,
    problem_in,
    refuse_clear_text,
    server_of,
    tls_context,
    untrusted_certificate,
)
from ocat.text.redact import redact

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


def open_client(location: StoreLocation, *, timeout: float = REQUEST_SECONDS) -> ClientAPI:
    """A ChromaDB client for the location, with telemetry off (this machine has no network).

    A server is refused before any lookup when it would take plain HTTP off this machine
    (`vector_store.insecure`); its headers are read from the environment now. Each request gets
    `timeout` seconds (connecting: at most CONNECT_SECONDS); one that gets no answer in time
    raises ServerNotAnswering, a refusal (401, 403) ServerRefused: StoreErrors naming the server.
    """
    if location.host:
        refuse_clear_text(location)
        headers = expanded_headers(location)
        context = tls_context(location.ca_file) if location.ca_file else None
    try:
        import chromadb
    except ImportError as exc:  # pragma: no cover - chromadb is a hard dependency
        raise StoreError(f"chromadb is not installed: {exc}") from exc
    chroma_settings = _chroma_settings()
    try:
        if location.host:
            if location.scheme != "https":
                # No TLS is spoken to a plain-HTTP server, but httpx builds a context that trusts
                # the system's CAs for every client all the same (~0.05-0.14 s of CPU; a chat's
                # store makes two). Off: the traffic is clear text either way (a proxy named in
                # the environment is the only TLS left, and what it carries is clear text too).
                chroma_settings.chroma_server_ssl_verify = False
            _limit_http_requests()
            token = _session_options.set(_SessionOptions(timeout, context))
            try:
                # The whole URL as the host: chromadb then keeps its path (a proxy's prefix), and an IPv6 address.
                return opened(chromadb.HttpClient(
                    host=location.server_url(), port=location.port, ssl=location.scheme == "https", headers=headers,
                    settings=chroma_settings,
                    **{key: value for key, value in (("tenant", location.tenant), ("database", location.database))
                       if value},
                ))
            finally:
                _session_options.reset(token)
        assert location.path is not None
        location.path.mkdir(parents=True, exist_ok=True)
        return opened(chromadb.PersistentClient(path=str(location.path), settings=chroma_settings))
    except Exception as exc:
        # chromadb's constructor turns errors of its first requests into ValueErrors, some
        # with a message of their own; a timeout, a refused connection or a refusal says more.
        problem = problem_in(exc)
        if isinstance(problem, ServerNotAnswering):
            raise ServerNotAnswering(f"cannot open the memory store at {location.describe()}: {problem}") from exc
        if problem is not None:
            raise problem from exc
        raise StoreError(f"cannot open the memory store at {location.describe()}: {redact(str(exc))}") from exc


_read_settings: Any = None


def _chroma_settings() -> Any:
    """Chroma's settings with telemetry off, for one client: read once per process and copied.

    Reading them (pydantic-settings going through the environment and a `.env` file for each of
    some 80 fields) took 8 ms of CPU, more than the rest of opening an empty store's client; a
    copy takes microseconds. Each client gets its own copy because chromadb writes into the
    settings it is given (PersistentClient sets its path on them)."""
    global _read_settings
    if _read_settings is None:
        from chromadb.config import Settings as ChromaSettings

        _read_settings = ChromaSettings(anonymized_telemetry=False)
    return _read_settings.model_copy(deep=True)


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


@dataclass(frozen=True)
class _SessionOptions:
    """What the HTTP clients being made in this context are given beyond chromadb's own (see open_client)."""

    seconds: float = REQUEST_SECONDS
    tls: ssl.SSLContext | None = None  # trusts `vector_store.ca_file`; None: chromadb's (the system's)


_session_options: ContextVar[_SessionOptions] = ContextVar("ocat_chroma_session", default=_SessionOptions())
_limiting = threading.Lock()


def _limit_http_requests() -> None:
    """Give chromadb's HTTP client a time limit on every request, the CA it is told to trust, and
    a check of every answer (a refusal, a proxy's 'server away'); name the server when it fails.

    chromadb 1.5.9 builds its httpx client with `timeout=None`, has no setting for a time limit
    or a TLS context, and sends its first requests from inside the HttpClient constructor; so
    they are set where that httpx client is made, once per process, for every HTTP client after it.
    """
    import httpx
    from chromadb.api.fastapi import FastAPI

    with _limiting:
        if getattr(FastAPI, "_ocat_limited", False):
            return
        make, send = FastAPI.__init__, FastAPI._make_request

        def __init__(self: Any, system: Any) -> None:
            make(self, system)
            options = _session_options.get()
            timeout = httpx.Timeout(options.seconds, connect=min(CONNECT_SECONDS, options.seconds))
            if options.tls is not None:
                # chromadb's own verify= takes a path only through a deprecated httpx argument.
                headers = self._session.headers
                self._session.close()
                self._session = httpx.Client(limits=self.http_limits, verify=options.tls, headers=headers)
            self._session.timeout = timeout
            self._session.event_hooks = {"request": [], "response": [check_answer]}

        def _make_request(self: Any, method: str, path: str, **kwargs: Any) -> Any:
            try:
                return send(self, method, path, **kwargs)
            except httpx.TimeoutException as exc:
                limit = self._session.timeout
                seconds = limit.connect if isinstance(exc, httpx.ConnectTimeout) else limit.read
                raise ServerNotAnswering(
                    f"the memory server at {server_of(self._api_url)} did not answer within {seconds:g} s; "
                    "its process may be stopped (Ctrl+Z: resume it with fg) or stuck"
                ) from exc
            except httpx.ConnectError as exc:
                untrusted = untrusted_certificate(exc, server_of(self._api_url))
                if untrusted is not None:
                    raise untrusted from exc
                raise ServerNotAnswering(
                    f"the memory server at {server_of(self._api_url)} {absence(exc)} ({redact(str(exc))})"
                ) from exc

        FastAPI.__init__ = __init__  # type: ignore[method-assign]
        FastAPI._make_request = _make_request  # type: ignore[method-assign]
        FastAPI._ocat_limited = True  # type: ignore[attr-defined]


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
        problem = problem_in(exc)
        if problem is not None:
            raise problem from exc  # its one line names the server and what went wrong
        raise StoreError(f"cannot open collection {name!r} at {location}: {redact(str(exc))}") from exc
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
