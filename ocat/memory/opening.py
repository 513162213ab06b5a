"""Opening a store: where the configured one lives, its lease (one owner per folder, shared with
the others through its server), the store itself with its derived data brought level.

The gate (the store's floor) is built on first search by ocat.memory.retrieval; nothing
here is imported until a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ocat.errors import StoreError
from ocat.memory.embedding.embedders import Embedder, embedder_for
from ocat.memory.sharing.owner_lock import acquire
from ocat.memory.storage.location import StoreLocation, server_location
from ocat.memory.storage.store import MemoryStore

if TYPE_CHECKING:
    from ocat.config.loading import Settings


def location_for(settings: Settings) -> StoreLocation:
    """Where the configured store lives: a Chroma server if `vector_store.url` or `host` is set, else a folder.

    Nothing is looked up or read here (a header's `${VAR}` waits for the client's opening)."""
    vs = settings.vector_store
    if vs.url or vs.host:
        return server_location(vs.url, vs.host, vs.port, ssl=vs.ssl, headers=vs.headers, tenant=vs.tenant,
                               database=vs.database, insecure=vs.insecure, ca_file=vs.ca_file)
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
    `ocat.memory.sharing.owner_lock`); `serve=True` (long-lived processes) shares it with the others.
    An owner that does not share it is waited for up to `wait_seconds`. `upkeep=False` opens
    Chroma alone, leaving the derived files untouched (`ocat --check-store`, `--repair-store`).
    """
    if not settings.vector_store.enabled:
        raise StoreError("memory is disabled (vector_store.enabled is false, or --no-vector-store)")
    chosen = embedder if embedder is not None else embedder_for(settings.embedding)
    location = location_for(settings)
    if location.host:
        store = MemoryStore.open(location, chosen, name=settings.vector_store.collection, notify=notify, upkeep=upkeep)
        store.link_versions = settings.memory.link_versions
        store.secrets = settings.memory.secrets
        return store
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
    store.link_versions = settings.memory.link_versions
    store.secrets = settings.memory.secrets
    return store
