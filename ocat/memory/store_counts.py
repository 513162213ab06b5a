"""A store's counts and identity, as `--vector-store-stats`, `/vstats` and MCP's `memory_stats` report them.

Stats read the primary store only (and the floor, if known): a damaged derived file never fails them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocat.memory.embedding.model_files import find_model, uses_local_model
from ocat.memory.ingest.documents import document_census
from ocat.memory.retrieval.store_floor import floor_of
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.store import MemoryStore
from ocat.records import StoreStats

if TYPE_CHECKING:
    from ocat.config.loading import Settings


def store_stats(store: MemoryStore, settings: Settings) -> StoreStats:
    """Counts and identity of an open store, as `--vector-store-stats` reports them."""
    census = document_census(store)
    return StoreStats(
        path=str(store.location.path) if store.location.path is not None else store.location.describe(),
        collection=store.name,
        exchanges=store.count("exchange"),
        documents=census.documents,
        document_chunks=store.count("document"),
        embedding_model=store.embedder.name,
        dimensions=store.embedder.dimensions,
        similarity_threshold=settings.vector_store.similarity_threshold,
        partial_documents=len(census.partial),
        model_path=_local_model_path(settings),
        **_floor_of(store),
    )


def _floor_of(store: MemoryStore) -> dict[str, Any]:
    """The store's floor for stats, or none: it is derived data (kept in the prompt vector
    file), and stats never fail for a derived file."""
    try:
        floor = floor_of(store)
        known = floor.current()
        return {"floor": round(known.median, 3) if known else None, "floor_raise": round(floor.known_shift(), 3)}
    except DerivedFileError as exc:
        store.derived_failed(exc)
        return {"floor": None, "floor_raise": 0.0}


def _local_model_path(settings: Settings) -> str | None:
    if not uses_local_model(settings.embedding):
        return None
    folder = find_model(settings.embedding)
    return str(folder) if folder is not None else None
