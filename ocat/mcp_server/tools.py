"""The memory tools `ocat mcp` offers: search, save, forget, stats, over the operations layer.

Protocol-free: each checks its arguments, calls `ocat.operations`, and returns a JSON-ready
dict; it raises UsageError for bad input (or another OcatError when the store fails), which
the server turns into an error result. One store is read and written; several (`--store a,b`)
are only read.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from ocat.errors import StoreError, UsageError
from ocat.text.limits import INT64_MAX, INT64_MIN
from ocat.memory import DOCUMENT_KEYS, FilterSpec
from ocat.records import EXCHANGE_FIELDS, PINNED_KEY, SHORTENED_KEY, SUPERSEDED_KEY
from ocat.operations.search import hit_record, search, SearchResult

from ocat.operations.lookup import as_hit, delete_records, get_record, Record
from ocat import memory
from ocat.operations.add import add_note, AddSummary
from ocat.operations.stats import stats, StatsResult
from ocat.operations.wake import build_wake, pin, pins, unpin

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import MemoryStore

log = logging.getLogger("ocat.mcp")
T = TypeVar("T")
MAX_RESULTS = 50
MAX_CONTENT_CHARS = 1_000_000
MAX_METADATA_KEYS = 32
MAX_METADATA_VALUE_CHARS = 2000
CONFIRM = "CONFIRM"
DEFAULT_SOURCE = "mcp"
_LABEL = re.compile(r"[\w .:/@+-]{1,100}")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
# Fields ocat sets itself; a caller's metadata may not reuse them (nor "date", a filter alias),
# nor the marks that are the user's decisions: a pin, a note replaced by a newer one, a shortened document.
RESERVED_KEYS = DOCUMENT_KEYS | set(EXCHANGE_FIELDS) | {"date", PINNED_KEY, SUPERSEDED_KEY, SHORTENED_KEY}


class MemoryTools:
    """The four operations over the stores `open_stores` gives (opened once, on first use)."""

    def __init__(self, settings: Settings, open_stores: Callable[[], list[MemoryStore]]) -> None:
        self.settings = settings
        self._open_stores = open_stores
        self._stores: list[MemoryStore] | None = None
        # One operation at a time: the store's clients and the ONNX session are shared.
        self._lock = threading.RLock()

    def stores(self) -> list[MemoryStore]:
        """The open stores, opening them if this is the first use (a failed open is retried next time)."""
        with self._lock:
            if self._stores is None:
                self._stores = self._open_stores()
            return self._stores

    def close(self) -> None:
        """Give the stores up (their owner lock and server, if held)."""
        with self._lock:
            for store in self._stores or []:
                store.close()
            self._stores = None

    def _using(self, operation: Callable[[list[MemoryStore]], T]) -> T:
        """Run an operation on the stores, one at a time.

        A store reached through another process's server (a chat window that owned it) fails
        once that process exits; then the stores are opened again (this server may become the
        owner) and the operation is retried once. Every write is idempotent, so a retry is safe.
        """
        with self._lock:
            stores = self.stores()
            try:
                return operation(stores)
            except StoreError:
                if not any(getattr(s.lease, "role", None) == "client" for s in stores):
                    raise
                log.warning("the store's owner went away; opening the store again")
                self.close()
                return operation(self.stores())

    @staticmethod
    def _writable(stores: list[MemoryStore]) -> MemoryStore:
        if len(stores) > 1:
            names = ", ".join(s.name for s in stores)
            raise UsageError(
                f"this server reads several stores ({names}); it writes to one only: start it with one --store"
            )
        return stores[0]

    # -- the tools -----------------------------------------------------------------------------

    def search(self, query: str, k: int = 5, spec: FilterSpec | None = None,
               project: str | None = None) -> dict[str, Any]:
        """The k most relevant memories for `query`, optionally filtered (`project`: only that
        project's exchanges), with score and metadata."""
        query = _required_text("query", query)
        if not 1 <= k <= MAX_RESULTS:
            raise UsageError(f"k must be between 1 and {MAX_RESULTS}, got {k}")
        filters = (spec or FilterSpec()).to_filters()
        scope = memory.ProjectScope(memory.project_of(project), "only") if project and project.strip() else None

        def run(stores: list[MemoryStore]) -> SearchResult:
            return search(stores, query, self.settings.vector_store, count=k, filters=filters, project=scope)

        found = self._using(run)
        return {
            "query": query,
            "stores": found.stores,
            "results": [hit_record(f.hit, why=f.why, store=f.store, compact=True) for f in found.found],
        }

    def save(
        self, content: str, source: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Remember a text, chunked like `/vadd`; the same text saved twice is stored once."""
        content = _required_text("content", content)
        if len(content) > MAX_CONTENT_CHARS:
            raise UsageError(f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}")
        label = DEFAULT_SOURCE if source is None else source.strip()
        if not _LABEL.fullmatch(label):
            raise UsageError("source must be 1-100 letters, digits, spaces or . : / @ + - _")
        if label == "chat":
            raise UsageError('source "chat" is reserved for chat exchanges')
        extra = checked_metadata(metadata or {})

        def save(stores: list[MemoryStore]) -> tuple[str, AddSummary]:
            store = self._writable(stores)
            return store.name, add_note(store, content, self.settings.chunking, source=label, extra=extra)

        name, outcome = self._using(save)
        return {
            "store": name,
            "ids": list(outcome.ids),
            "added_chunks": outcome.added_chunks,
            "total_chunks": outcome.total_chunks,
            "already_stored": outcome.added_chunks == 0,
        }

    def forget(
        self, query: str | None = None, id: str | None = None, confirm: str | None = None, k: int = 3
    ) -> dict[str, Any]:
        """Delete memories by id (a unique prefix will do) or the admitted hits of a query.

        Without `confirm="CONFIRM"` nothing is deleted: the result lists what would be.
        """
        if (query is None) == (id is None):
            raise UsageError("give either query or id (not both)")
        if confirm is not None and confirm != CONFIRM:
            raise UsageError(f'confirm must be exactly "{CONFIRM}" to delete; leave it out to preview')
        if not 1 <= k <= MAX_RESULTS:
            raise UsageError(f"k must be between 1 and {MAX_RESULTS}, got {k}")

        def forget(stores: list[MemoryStore]) -> tuple[list[dict[str, Any]], int]:
            store = self._writable(stores)
            if id is not None:
                targets = [_record_item(get_record(store, _required_text("id", id)))]
            else:
                targets = self._matches(store, _required_text("query", query or ""), k)
            if confirm != CONFIRM or not targets:
                return targets, 0
            return targets, delete_records(store, [t["id"] for t in targets])

        targets, removed = self._using(forget)
        if confirm != CONFIRM:
            message = f'nothing deleted; call again with confirm: "{CONFIRM}" to delete these'
            return {"deleted": False, "would_delete": targets,
                    "message": message if targets else "nothing matches; nothing to delete"}
        return {"deleted": True, "deleted_ids": [t["id"] for t in targets], "count": removed}

    def _matches(self, store: MemoryStore, query: str, k: int) -> list[dict[str, Any]]:
        """The hits of a query relevant enough to be given to a model: only those may be forgotten."""
        found = search([store], query, self.settings.vector_store, count=k)
        return [hit_record(h, compact=True, brief=True) for h in found.hits if h.admitted]

    def stats(self) -> dict[str, Any]:
        """Each open store's location and counts, and the names of the stores that exist."""
        def describe(stores: list[MemoryStore]) -> StatsResult:
            return stats(stores, self.settings)

        described = self._using(describe)
        return {
            "stores": [asdict(s) for s in described.selected],
            "writable": len(described.selected) == 1,
            "available_stores": described.available,
            "similarity_threshold": self.settings.vector_store.similarity_threshold,
            "memory_threshold": self.settings.vector_store.memory_threshold,
        }


    def wake(self) -> dict[str, Any]:
        """The wake block: what the model gets at the start of every thread in ocat's chat."""
        # Several stores give their pins and threads together: what a chat on any of them would know.
        return self._using(lambda stores: build_wake(self.settings, stores)).to_dict()

    def pin(self, id: str, pinned: bool) -> dict[str, Any]:
        """Pin (or unpin) the memory with this id or unique prefix."""
        change = pin if pinned else unpin
        record_id = self._using(lambda stores: change(self._writable(stores), _required_text("id", id)))
        return {"id": record_id, "pinned": pinned}

    def pins(self) -> dict[str, Any]:
        """The pinned memories, the latest pinned first."""
        # A read: every store's pins (pinning and unpinning write, to one store only).
        found = self._using(lambda stores: [(s.name, i, line, len(stores) > 1) for s in stores for i, line in pins(s)])
        return {"pins": [{"id": i, "line": line} | ({"store": name} if several else {})
                         for name, i, line, several in found]}


def _required_text(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{name} must be a non-empty string")
    return value.strip()


def checked_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata a caller gave, checked: names ocat does not set itself, values Chroma stores exactly."""
    if len(metadata) > MAX_METADATA_KEYS:
        raise UsageError(f"metadata has {len(metadata)} keys; the limit is {MAX_METADATA_KEYS}")
    checked: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise UsageError(
                f"metadata key {key!r}: use letters, digits, '_', '.' or '-', starting with a letter or '_'"
            )
        if key in RESERVED_KEYS:
            raise UsageError(f"metadata key {key!r} is set by ocat itself; pick another name")
        if not isinstance(value, (str, int, float, bool)):
            raise UsageError(f"metadata {key!r}: values must be strings, numbers or booleans")
        if isinstance(value, str) and len(value) > MAX_METADATA_VALUE_CHARS:
            raise UsageError(f"metadata {key!r} is longer than {MAX_METADATA_VALUE_CHARS} characters")
        # Chroma would store a larger whole number as an inexact float, and infinity or NaN as
        # nothing at all: refuse them rather than keep something other than what was given.
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"metadata {key!r}: {value} is not a number that can be stored")
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            raise UsageError(f"metadata {key!r}: whole numbers go from {INT64_MIN} to {INT64_MAX}")
        checked[key] = value
    return checked


def _record_item(record: Record) -> dict[str, Any]:
    """A record named by id, as a forget preview lists it: no score (it was not searched for)."""
    item = hit_record(as_hit(record), compact=True, brief=True)
    del item["score"], item["admitted"]
    return item
