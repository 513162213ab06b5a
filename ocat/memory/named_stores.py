"""Named stores: `--store NAME` picks one, `--store a,b` reads several, `stats` lists them.

A store is a pair of collections named after it (see `ocat.memory.storage.chroma`), so two stores
never share a collection: work and personal memory stay apart at the storage level. By
default each store has its own folder (`vector_stores/<name>`); with `vector_store.path`
set they share that folder, and one process holds the folder once for all of them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Callable, Sequence

from ocat.errors import UsageError
from ocat.memory.storage.chroma import DOCUMENTS_SUFFIX, EXCHANGES_SUFFIX
from ocat.memory.storage.store import MemoryStore
from ocat.settings import COLLECTION_NAME

if TYPE_CHECKING:
    from ocat.config import Settings
    from ocat.memory.embedding.embedders import Embedder

_LEXICAL_FILE = re.compile(r"ocat-lexical-(.+)\.sqlite3")


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
    from ocat.memory import location_for, open_store

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
            stores.append(store)
    except BaseException:
        for store in opened.values():
            store.close()
        raise
    return stores


def store_names(settings: Settings, store: MemoryStore) -> list[str]:
    """The stores that exist beside `store`: in its folder or server, and (default layout) in
    the sibling folders under `$XDG_DATA_HOME/ocat/vector_stores`."""
    from ocat import locations

    names = {store.name}
    try:
        collections = store.client.list_collections()
    except Exception:  # listing is a nicety; the store itself was opened fine
        collections = []
    for collection in collections:
        name = getattr(collection, "name", collection)
        for suffix in (EXCHANGES_SUFFIX, DOCUMENTS_SUFFIX):
            if isinstance(name, str) and name.endswith("-" + suffix):
                names.add(name[: -len(suffix) - 1])
    if settings.vector_store.path is None and not settings.vector_store.host:
        # Other stores' folders are owned by other processes maybe: read only their file names.
        root = locations.default_store_path("x").parent
        if root.is_dir():
            for folder in root.iterdir():
                for entry in folder.glob("ocat-lexical-*.sqlite3") if folder.is_dir() else ():
                    match = _LEXICAL_FILE.fullmatch(entry.name)
                    if match:
                        names.add(match.group(1))
    return sorted(names)
