"""New, empty stores for in-process tests, copied from one made once per test process.

Opening a store in a folder that does not exist yet makes Chroma's database (its migrations, the
collections) and ocat's two derived files from nothing: ~46 ms of CPU and ~100 ms on a busy
machine, and the quick loop opened 434 of them. An empty store is three small files; a copy of
them opens in about half of that (measured: 46 -> 25 ms of CPU). The copy is the store as a
first open leaves it (the same collections, metadata and derived files), closed, so a test
starts where it did; a folder that exists is opened as it is, as `MemoryStore.open` would.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ocat.memory import MemoryStore, StoreLocation
from tests.support.fakes import FakeEmbedder


class EmptyStores:
    """One empty store per store name and embedder (the collections record its name and size),
    made on first use under `folder()` (the run's temporary folder: tests/conftest.py)."""

    def __init__(self) -> None:
        self.folder: Callable[[], Path] = lambda: Path(tempfile.mkdtemp(prefix="ocat-empty-stores-"))
        self._made: dict[tuple[str, str, int], Path] = {}
        self._root: Path | None = None

    def open(self, path: Path, embedder: Any = None, *, name: str = "test", **options: Any) -> MemoryStore:
        """The store `name` at `path`; made from the empty template when `path` does not exist."""
        embedder = embedder if embedder is not None else FakeEmbedder()
        if not path.exists():
            shutil.copytree(self._template(embedder, name), path)
        return MemoryStore.open(StoreLocation(path=path), embedder, name=name, **options)

    def _template(self, embedder: Any, name: str) -> Path:
        key = (name, embedder.name, embedder.dimensions)
        if key not in self._made:
            if self._root is None:
                self._root = self.folder()
            template = self._root / f"{len(self._made)}"
            # Made by the embedder's name and size alone: opening an empty store embeds nothing.
            store = MemoryStore.open(StoreLocation(path=template), embedder, name=name)
            store.close()
            store.lexical.close()
            store.prompts.close()
            self._made[key] = template
        return self._made[key]


EMPTY_STORES = EmptyStores()


def open_store(path: Path, embedder: Any = None, *, name: str = "test", **options: Any) -> MemoryStore:
    """`MemoryStore.open` on a local folder, a new one copied from an empty store (see above)."""
    return EMPTY_STORES.open(path, embedder, name=name, **options)
