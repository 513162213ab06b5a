"""ocat's episodic memory, usable from scripts: open a store from a config, add, search, get, delete.

    from ocat.config import load_settings
    from ocat.memory import open_store, retrieve, RetrievalLimits

    settings = load_settings()
    store = open_store(settings)
    hits = retrieve(store, "what did we decide about X", RetrievalLimits.from_settings(settings.vector_store))

Nothing heavy is imported until a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ocat.errors import StoreError
from ocat.memory.backend import StoreLocation
from ocat.memory.derived import DerivedFileError
from ocat.memory.embeddings import Embedder, embedder_for
from ocat.memory.ingest import add_path, add_text, partial_documents
from ocat.memory.model_files import find_model, uses_local_model
from ocat.memory.owner import acquire
from ocat.memory.retrieval import RetrievalLimits, admitted, retrieve
from ocat.memory.store import MemoryStore
from ocat.models import StoreStats

if TYPE_CHECKING:
    from ocat.config import Settings

__all__ = [
    "MemoryStore",
    "RetrievalLimits",
    "StoreLocation",
    "add_path",
    "add_text",
    "admitted",
    "location_for",
    "open_store",
    "partial_documents",
    "retrieve",
    "store_stats",
]


def location_for(settings: Settings) -> StoreLocation:
    """Where the configured store lives: a Chroma server if `vector_store.host` is set, else a folder."""
    vector_store = settings.vector_store
    if vector_store.host:
        return StoreLocation(host=vector_store.host, port=vector_store.port)
    return StoreLocation(path=settings.store_path)


def open_store(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    serve: bool = False,
    notify: Callable[[str], None] | None = None,
    wait_seconds: float = 600.0,
    upkeep: bool = True,
) -> MemoryStore:
    """Open the configured store (creating it if new); raises StoreError if memory is disabled.

    A local store is opened as its one owner, or through its owner's server (see
    `ocat.memory.owner`); `serve=True` (long-lived processes) shares it with the others.
    An owner that does not share it is waited for up to `wait_seconds`. `upkeep=False` opens
    Chroma alone, leaving the derived files untouched (`ocat --check-store`, `--repair-store`).
    """
    if not settings.vector_store.enabled:
        raise StoreError("memory is disabled (vector_store.enabled is false, or --no-vector-store)")
    chosen = embedder if embedder is not None else embedder_for(settings.embedding)
    location = location_for(settings)
    if location.host:
        return MemoryStore.open(location, chosen, name=settings.vector_store.collection, notify=notify, upkeep=upkeep)
    assert location.path is not None
    lease = acquire(location.path, serve=serve, notify=notify, wait_seconds=wait_seconds)
    try:
        store = MemoryStore.open(
            lease.location, chosen, name=settings.vector_store.collection, notify=notify, upkeep=upkeep
        )
    except BaseException:
        lease.release()
        raise
    store.lease = lease
    return store


def store_stats(store: MemoryStore, settings: Settings) -> StoreStats:
    """Counts and identity of an open store, as `--vector-store-stats` reports them."""
    return StoreStats(
        path=str(store.location.path) if store.location.path is not None else store.location.describe(),
        collection=store.name,
        exchanges=store.count("exchange"),
        documents=store.count("document"),
        embedding_model=store.embedder.name,
        dimensions=store.embedder.dimensions,
        similarity_threshold=settings.vector_store.similarity_threshold,
        partial_documents=len(partial_documents(store)),
        model_path=_local_model_path(settings),
        **_floor_of(store),
    )


def _floor_of(store: MemoryStore) -> dict[str, Any]:
    """The store's floor for stats, or none: it is derived data (kept in the prompt vector
    file), and stats never fail for a derived file."""
    try:
        known = store.floor.current()
        return {"floor": round(known.median, 3) if known else None, "floor_raise": round(store.floor.known_shift(), 3)}
    except DerivedFileError as exc:
        store.derived_failed(exc)
        return {"floor": None, "floor_raise": 0.0}


def _local_model_path(settings: Settings) -> str | None:
    if not uses_local_model(settings.embedding):
        return None
    folder = find_model(settings.embedding)
    return str(folder) if folder is not None else None
