"""Named stores: `--store NAME` picks one, `--store a,b` reads several, `stats` lists them.

A store is a pair of collections named after it (see `ocat.memory.storage.chroma`), so two stores
never share a collection: work and personal memory stay apart at the storage level. By
default each store has its own folder (`vector_stores/<name>`); with `vector_store.path`
set they share that folder, and one process holds the folder once for all of them. Whether a
store exists is told without opening it (`store_exists`): reading a store that was never made
is an error (ocat.operations.stores), not a new, empty store.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ocat.errors import StoreError, UsageError
from ocat.memory.storage.chroma import (
    DOCUMENTS_SUFFIX,
    EXCHANGES_SUFFIX,
    collection_names,
    collections_in_folder,
    open_client,
)
from ocat.memory.storage.client_holds import let_go
from ocat.memory.storage.store import MemoryStore
from ocat.config.settings import COLLECTION_NAME
from ocat.config import locations
from ocat.memory.opening import location_for, open_store

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory.embedding.embedders import Embedder

def parse_store_names(text: str) -> list[str]:
    """`a,b` -> ["a", "b"]; UsageError for an empty or malformed name (names are collection names)."""
    pattern, wording = COLLECTION_NAME
    names = [part.strip() for part in text.split(",")]
    for name in names:
        if not pattern.fullmatch(name):
            raise UsageError(f"--store: {name!r} is not a store name ({wording})")
    return list(dict.fromkeys(names))


def with_store(settings: Settings, name: str) -> Settings:
    """The same settings, pointing at the store `name`."""
    return dataclasses.replace(settings, vector_store=dataclasses.replace(settings.vector_store, collection=name))


def open_stores(
    settings: Settings,
    names: Sequence[str],
    *,
    embedder: Embedder | None = None,
    serve: bool = False,
    notify: Callable[[str], None] | None = None,
) -> list[MemoryStore]:
    """Open several named stores (for reading); stores that share a folder share its one lease."""
    opened: dict[object, MemoryStore] = {}
    stores: list[MemoryStore] = []
    try:
        for name in names:
            named = with_store(settings, name)
            where = location_for(named)
            first = opened.get(where)
            if first is None:
                store = open_store(named, embedder=embedder, serve=serve, notify=notify)
                opened[where] = store
            else:
                # Same folder: a second lock on it would wait for ourselves; reuse the first client.
                store = MemoryStore.reconciled(first.client, first.embedder, name=name, location=first.location)
                store.lease = first.lease
                store.secrets = first.secrets
            stores.append(store)
    except BaseException:
        for store in opened.values():
            store.close()
        raise
    return stores


def store_names(settings: Settings, store: MemoryStore) -> list[str]:
    """The stores that exist beside `store`: in its folder or server, and (default layout) in
    the sibling folders under `$XDG_DATA_HOME/ocat/vector_stores`."""
    try:
        collections = {str(getattr(c, "name", c)) for c in store.client.list_collections()}
    except Exception:  # listing is a nicety; the store itself was opened fine
        collections = set()
    return sorted({store.name} | _stores_in(collections) | _sibling_stores(settings))


def store_exists(settings: Settings) -> bool:
    """Whether the configured store (`vector_store.collection`) has been made: its collections
    are in its folder, or on its server.

    Nothing is created or taken: a folder's catalogue is read as a file (another process may
    own the folder), a server is asked for its collections. When that cannot be told, the store
    is taken to exist, and opening it says what is wrong.
    """
    exchanges, _ = collection_names(settings.vector_store.collection)
    found = _collections(settings)
    return found is None or exchanges in found


def existing_stores(settings: Settings) -> list[str]:
    """The stores that exist where the configured one would be (its folder or server) and, in
    the default layout, in the sibling folders; none is opened or created."""
    return sorted(_stores_in(_collections(settings) or set()) | _sibling_stores(settings))


def missing_store(settings: Settings) -> StoreError:
    """The error for reading a store that was never made: it names the stores that exist and
    how a store is made."""
    name = settings.vector_store.collection
    others = existing_stores(settings)
    listed = f"the stores are: {', '.join(others)}" if others else "there are no stores yet"
    return StoreError(
        f"no store named {name!r}; {listed}. A store is made by its first write "
        f"(ocat --store {name} --add-to-vector-store PATH, --import-memory, --import-history or --ask) "
        "or by naming it in your config (vector_store.collection)"
    )


def _collections(settings: Settings) -> set[str] | None:
    """The collection names where the configured store lives, or None when they cannot be read."""
    location = location_for(settings)
    if location.host:
        try:
            client = open_client(location)
        except Exception:  # the open that follows names the server and what failed
            return None
        try:
            return {str(getattr(c, "name", c)) for c in client.list_collections()}
        except Exception:
            return None
        finally:
            let_go(client)  # no store holds it: closed at once
    return collections_in_folder(settings.store_path)


def _stores_in(collections: Iterable[str]) -> set[str]:
    """The store names behind collection names (`work-exchanges` -> `work`)."""
    names = set()
    for name in collections:
        for suffix in (EXCHANGES_SUFFIX, DOCUMENTS_SUFFIX):
            if name.endswith("-" + suffix):
                names.add(name[: -len(suffix) - 1])
    return names


def _sibling_stores(settings: Settings) -> set[str]:
    """In the default layout (a folder per store), the stores of the other folders."""
    if settings.vector_store.path is not None or location_for(settings).host:
        return set()
    root = locations.default_store_path("x").parent
    names: set[str] = set()
    if root.is_dir():
        for folder in root.iterdir():
            if folder.is_dir():
                names |= _stores_in(collections_in_folder(folder) or set())
    return names
