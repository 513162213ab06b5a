"""The episodic store: exchanges and document chunks in ChromaDB, embedded by ocat.

Every write is idempotent (ids are given or derived from content), reads page through
Chroma instead of loading a collection, and vectors are computed here so that the store
records, and enforces, which embedding model built it. The store is its parts
(ocat.memory.storage.parts: the collections, the derived files) and what is done with them:
opening and reconciling, writing, deleting, reading whole records, closing; the functions that
do it are given the parts, never the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from ocat.errors import StoreError
from ocat.memory.storage.chroma import open_client
from ocat.memory.storage.client_holds import let_go
from ocat.memory.storage.batches import Row, column, pages
from ocat.memory.storage.parts import READ_PAGE, StoreParts
from ocat.memory.storage.passages import finish_passages, start_backfill
from ocat.memory.storage.primary import refuse_missing_primary
from ocat.memory.storage.writes import add_rows, EMBED_STEP, mark_documents, PASSAGES_INLINE, Progress, WRITE_BATCH
from ocat.records import RECORD_KINDS, DocumentChunk, Exchange, RecordKind, searched_text
from ocat.memory.storage.deletes import delete_ids, delete_where, mark_shortened
from ocat.memory.storage.reconcile import reconcile
from ocat.memory.storage.remote_sync import keep_current

# Re-exported: callers size their own batches and steps by the store's.
__all__ = ["EMBED_STEP", "PASSAGES_INLINE", "READ_PAGE", "WRITE_BATCH", "MemoryStore", "Progress"]

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from ocat.memory.embedding.embedders import Embedder
    from ocat.memory.storage.location import StoreLocation


class Lease(Protocol):
    """This process's hold on a store's folder, as the store keeps it (an
    ocat.memory.sharing.owner_lock.StoreLease: sharing is above storage, so it is named, not imported)."""

    @property
    def role(self) -> str:
        """"owner", "serving owner" or "client"."""

    def release(self) -> None:
        """Give the hold up."""


class MemoryStore(StoreParts):
    """One named store: an exchanges collection and a documents collection (its `StoreParts`),
    and what is done with them."""

    # Set by open_store: this process's hold on the store folder (see ocat.memory.sharing.owner_lock).
    lease: Lease | None = None
    # Whether close() has let go of the Chroma client.
    _let_go: bool = False

    @classmethod
    def open(
        cls,
        location: StoreLocation,
        embedder: Embedder,
        *,
        name: str = "default",
        notify: Callable[[str], None] | None = None,
        upkeep: bool = True,
    ) -> MemoryStore:
        """Open (creating if needed) the store `name` at a location and bring its derived data
        level with Chroma (ocat.memory.storage.reconcile); `notify` hears of long upgrades and
        of derived files rebuilt. `upkeep=False` opens Chroma alone (see __init__)."""
        if location.path is not None and not location.host:
            # Before Chroma makes a new, empty file where its records were (ocat.memory.storage.primary).
            refuse_missing_primary(location.path)
        client = open_client(location)
        try:
            return cls.reconciled(client, embedder, name=name, location=location, notify=notify, upkeep=upkeep)
        except BaseException:
            let_go(client)  # a store that could not open gives its client back
            raise

    @classmethod
    def reconciled(
        cls,
        client: ClientAPI,
        embedder: Embedder,
        *,
        name: str,
        location: StoreLocation,
        notify: Callable[[str], None] | None = None,
        upkeep: bool = True,
    ) -> MemoryStore:
        """The store `name` on an open Chroma client, its derived data brought level (unless `upkeep` is False)."""
        store = cls(client, embedder, name=name, location=location, notify=notify, check_derived=upkeep)
        if upkeep:
            reconcile(store, notify)
        return store

    def close(self) -> None:
        """Give the store up: stop serving it, release the owner lock, if held, and let go of its
        Chroma client (closed once no other store holds it: ocat.memory.storage.client_holds).
        A second call does nothing more."""
        if self.backfill is not None:
            self.backfill.stop()
        if self.lease is not None:
            self.lease.release()
        if not self._let_go:
            self._let_go = True
            let_go(self.client)

    # -- writing ---------------------------------------------------------------

    def add_exchange(self, exchange: Exchange) -> bool:
        """Store one exchange; False if an exchange with its id was already stored."""
        return self.add_exchanges([exchange]) == 1

    def add_exchanges(
        self,
        exchanges: Iterable[Exchange],
        *,
        progress: Progress | None = None,
        titles: Mapping[str, str] | None = None,
    ) -> int:
        """Store exchanges in batches, skipping ids already stored; returns how many were added.

        `progress` is called after each embedded step with how many records have been handled so far.
        `titles` (thread id -> title) names threads that have no title yet, in the same write as
        their exchanges (an import: a stop between two writes then never leaves a thread unnamed).
        """
        # The exchange itself is its metadata (prompt and answer whole); the document Chroma keeps
        # beside it is what is searched and quoted, bounded (ocat.records.SEARCHED_CHARS).
        rows = ((e.exchange_id, searched_text(e.text), e.to_metadata()) for e in exchanges)
        return add_rows(self, "exchange", rows, progress, titles)

    def add_chunks(self, chunks: Iterable[DocumentChunk], *, progress: Progress | None = None) -> int:
        """Store document chunks, skipping ids already stored; returns how many were added."""
        return add_rows(self, "document", ((c.id, c.text, c.metadata) for c in chunks), progress)

    def start_backfill(self) -> None:
        """Make the passages still missing in a background thread (ocat.memory.storage.passages),
        unless one is running."""
        start_backfill(self)

    def keep_current(self) -> bool:
        """Take what other machines wrote to a server since the last look (ocat.memory.storage.remote_sync):
        each search runs it first."""
        return keep_current(self)

    def wait_for_passages(self, timeout: float | None = None) -> bool:
        """Wait for a background backfill of passages, if one runs; True when none is left running.
        Without a timeout the caller makes what is left itself (ocat.memory.storage.passages.finish_passages)."""
        return finish_passages(self, timeout)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete exchanges or chunks by id; returns how many existed. A document left with some of
        its chunks is marked shortened (ocat.memory.storage.deletes)."""
        return delete_ids(self, ids)

    def delete_documents_where(self, where: dict[str, Any]) -> int:
        """Delete the document chunks matching a metadata filter; returns how many."""
        return delete_where(self, where)

    def mark_documents(self, documents: Iterable[str], marks: Mapping[str, Any]) -> int:
        """Set metadata on every chunk of these documents (a note replaced by a newer one); how many."""
        return mark_documents(self, documents, marks)

    def mark_shortened(self, documents: Iterable[str], why: str) -> int:
        """Mark every chunk left of these documents shortened (SHORTENED_KEY, `why`): whole as they
        are, never finished or removed by a repair. Returns how many chunks were marked."""
        return mark_shortened(self, documents, why)

    # -- reading ---------------------------------------------------------------

    def get(self, record_id: str) -> Exchange | DocumentChunk | None:
        """An exchange or a chunk by its id, or None."""
        for kind in RECORD_KINDS:
            rows = self._get(self.collection(kind), ids=[record_id])
            if rows:
                return rows[0]
        return None

    def get_thread(self, thread_id: str) -> list[Exchange]:
        """Every exchange of a thread, oldest first."""
        return self._exchanges_where({"thread_id": thread_id})

    def ids_starting(self, prefix: str) -> list[str]:
        """Ids of exchanges and document chunks starting with `prefix`; at most two of each kind,
        enough to tell unique from ambiguous."""
        return self.lexical.resolve_prefix("exchange", prefix) + self.lexical.resolve_prefix("document", prefix)

    def chunk_ids(self, short: str) -> list[str]:
        """The document chunks a chunk's short form (`doc-HEAD-N`: the start of its document's key
        and its index) stands for; at most two, [] when `short` is not of that form."""
        return self.lexical.resolve_chunk(short)

    def get_session(self, session_id: str) -> list[Exchange]:
        """Every exchange of a session, oldest first."""
        return self._exchanges_where({"session_id": session_id})

    def _exchanges_where(self, where: dict[str, Any]) -> list[Exchange]:
        rows = [r for r in self._get(self.exchanges, where=where) if isinstance(r, Exchange)]
        return sorted(rows, key=lambda e: (e.timestamp, e.exchange_id))

    def _get(self, collection: Collection, **query: Any) -> list[Exchange | DocumentChunk]:
        try:
            result = collection.get(include=["documents", "metadatas"], **query)
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        rows = zip(result["ids"], result["documents"] or [], result["metadatas"] or [])
        return [self._record(collection, i, t, m) for i, t, m in rows]

    def _record(
        self, collection: Collection, record_id: str, text: str | None, metadata: Mapping[str, Any] | None
    ) -> Exchange | DocumentChunk:
        if collection is self.exchanges:
            return Exchange.from_metadata(metadata or {})
        return DocumentChunk(id=record_id, text=text or "", metadata=dict(metadata or {}))

    def exchanges_where(self, where: dict[str, Any]) -> list[Exchange]:
        """Exchanges matching a metadata filter, oldest first (a thread's forks: filters are slow at scale)."""
        return self._exchanges_where(where)

    def documents_where(self, where: dict[str, Any]) -> list[DocumentChunk]:
        """Document chunks matching a metadata filter (a write-path helper: filters are slow at scale)."""
        return [r for r in self._get(self.documents, where=where) if isinstance(r, DocumentChunk)]

    def iter_records(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[Exchange | DocumentChunk]:
        """Every record of one kind, read page by page (never the whole collection at once)."""
        collection = self.collection(kind)
        for got in pages(collection, ["documents", "metadatas"], page):
            rows = zip(got["ids"], got["documents"] or [], got["metadatas"] or [])
            yield from (self._record(collection, i, t, m) for i, t, m in rows)

    def iter_rows(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[Row]:
        """Every record of one kind as stored: id, text and metadata whole (keys ocat does not know too)."""
        for got in pages(self.collection(kind), ["documents", "metadatas"], page):
            ids = list(got["ids"])
            rows = zip(ids, column(got["documents"], len(ids)), column(got["metadatas"], len(ids)))
            yield from ((i, t or "", dict(m or {})) for i, t, m in rows)
