"""The episodic store: exchanges and document chunks in ChromaDB, embedded by ocat.

Every write is idempotent (ids are given or derived from content), reads page through
Chroma instead of loading a collection, and vectors are computed here so that the store
records, and enforces, which embedding model built it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from ocat.errors import StoreError
from ocat.memory.storage.chroma import StoreLocation, collection_names, open_client, open_collection
from ocat.memory.storage.batches import Row, column, pages
from ocat.memory.storage.derived import DerivedFileError, beside_index, checked, lexical_index_path
from ocat.memory.storage.foreground import Foreground
from ocat.memory.embedding.embedders import Embedder
from ocat.memory.storage.lexical_index import LexicalIndex
from ocat.memory.storage.primary import refuse_missing_primary
from ocat.memory.storage.prompt_vectors import PromptVectors
from ocat.memory.storage.scoring import Calibration, calibration_for
from ocat.memory.storage.writes import add_rows, EMBED_STEP, mark_documents, PASSAGES_INLINE, Progress, WRITE_BATCH
from ocat.records import RECORD_KINDS, DocumentChunk, Exchange, RecordKind, searched_text
from ocat.memory.storage.deletes import delete_ids, delete_where, mark_shortened
from ocat.memory.storage.reconcile import PassageBackfill, reconcile
from ocat.memory.storage.change_log import ChangeLog
from ocat.memory.storage.remote_sync import keep_current
from ocat.memory.storage.shared_sides import SharedSides

_Derived = TypeVar("_Derived", LexicalIndex, PromptVectors)

# Re-exported: callers size their own batches and steps by the store's.
__all__ = ["EMBED_STEP", "PASSAGES_INLINE", "READ_PAGE", "WRITE_BATCH", "MemoryStore", "Progress"]
READ_PAGE = 1000

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Include

    from ocat.memory.sharing.owner_lock import StoreLease
    from ocat.memory.storage.thread_catalogue import ThreadCatalogue

class MemoryStore:
    """One named store: an exchanges collection and a documents collection."""

    def __init__(
        self,
        client: ClientAPI,
        embedder: Embedder,
        *,
        name: str,
        location: StoreLocation,
        lexical: LexicalIndex | None = None,
        notify: Callable[[str], None] | None = None,
        check_derived: bool = True,
    ) -> None:
        """Open the store's collections and its derived files, as they are (`open` also brings
        them level with Chroma). `check_derived=False` opens Chroma alone, for `ocat
        --check-store` and `--repair-store`: the derived files are neither checked nor opened
        (in-memory stand-ins)."""
        self.client = client
        self.notify = notify
        self.embedder = embedder
        self.name = name
        self.location = location
        described = location.describe()
        exchanges_name, documents_name = collection_names(name)
        shipped = calibration_for(embedder.name)
        self.exchanges, self.documents = (
            open_collection(
                client,
                collection_name,
                model=embedder.name,
                dimensions=embedder.dimensions,
                location=described,
                extra=shipped.to_metadata(),
            )
            for collection_name in (exchanges_name, documents_name)
        )
        # What a write takes out of what it stores, and whether it links what it may update
        # (memory.secrets: ocat.memory.storage.redaction; memory.link_versions; set by open_store).
        self.secrets: str = "redact"
        self.link_versions = True
        # Set by open_store: this process's hold on the store folder (see ocat.memory.sharing.owner_lock).
        self.lease: StoreLease | None = None
        # Derived files a search found failing since they were opened: rebuilt by `rebuild_derived`.
        self.damaged: dict[str, str] = {}
        self.calibration: Calibration = shipped
        # The passages of an older store's exchanges, made in the background (ocat.memory.storage.reconcile).
        self.backfill: PassageBackfill | None = None
        # The searches running on it: each first takes what other machines wrote (a server's store),
        # and the backfill steps aside for them (ocat.memory.storage.foreground).
        self.foreground = Foreground(before=self.keep_current)
        # Derived files that cannot be written (read-only, a full disk): they catch up later (`derived_failed`).
        self.lagging: dict[str, str] = {}
        # A store on a server shares its derived vectors and logs its changes for the other
        # machines that use it (ocat.memory.storage.shared_sides, change_log, remote_sync).
        on_server = location.path is None and check_derived
        self.sides = SharedSides.open(client, name, embedder) if on_server else None
        self.changes = ChangeLog.open(client, name) if on_server else None
        if not check_derived:
            self.lexical = LexicalIndex(":memory:")
            self.prompts = PromptVectors(":memory:", embedder)
            return
        if lexical is None:
            index = lexical_index_path(location, name)
            checked(index, "lexical index", notify)
            checked(beside_index(index, "prompts"), "prompt vector file", notify)
            lexical = self._derived(LexicalIndex, index)
        self.lexical = lexical
        prompts = beside_index(self.lexical.path, "prompts")
        self.prompts = self._derived(lambda path: PromptVectors(path, embedder), prompts)

    def _derived(self, make: Callable[[str], _Derived], path: Path | str) -> _Derived:
        """A derived file, opened; one that cannot be opened here (another user's, a folder that
        cannot be written) is replaced by one in memory for this process, and the user told once."""
        try:
            return make(str(path))
        except DerivedFileError as exc:
            self.derived_failed(exc)
            return make(":memory:")

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
        return cls.reconciled(open_client(location), embedder, name=name, location=location, notify=notify,
                              upkeep=upkeep)

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

    def derived_failed(self, exc: DerivedFileError) -> None:
        """A derived file failed: a damaged one is noted for the next turn to rebuild; one that
        cannot be written is left to catch up later, and the user is told once, naming it."""
        if exc.damage:
            self.damaged[exc.path] = str(exc)
            return
        if exc.path not in self.lagging and self.notify is not None:
            self.notify(f"{exc}; what is stored goes to the store itself, and this file catches up once it can "
                        "be written (check its owner and permissions)")
        self.lagging[exc.path] = str(exc)

    def close(self) -> None:
        """Give the store up: stop serving it and release the owner lock, if held."""
        if self.backfill is not None:
            self.backfill.stop()
        if self.lease is not None:
            self.lease.release()

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
        """Make the passages still missing in a background thread (ocat.memory.storage.reconcile.PassageBackfill),
        unless one is running."""
        if self.backfill is None or not self.backfill.thread.is_alive():
            self.backfill = PassageBackfill(self).start()

    def keep_current(self) -> bool:
        """Take what other machines wrote to a server since the last look (ocat.memory.storage.remote_sync)."""
        return keep_current(self)

    def wait_for_passages(self, timeout: float | None = None) -> bool:
        """Wait for a background backfill of passages, if one runs; True when none is left running."""
        return self.backfill is None or self.backfill.wait(timeout)

    def existing_ids(self, kind: RecordKind, ids: Sequence[str]) -> list[str]:
        """Which of `ids` are stored (one read of ids, no texts; an id asked twice is asked once,
        as Chroma refuses a list that repeats one)."""
        if not ids:
            return []
        try:
            return list(self._collection(kind).get(ids=list(dict.fromkeys(ids)), include=[])["ids"])
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc

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

    def nearest(
        self, kind: RecordKind, vectors: Sequence[Sequence[float]], k: int, *, where: dict[str, Any] | None = None
    ) -> list[dict[str, float]]:
        """For each query vector, the ids of the k nearest records with their cosine similarity, nearest first.

        One Chroma call for all the vectors, and ids only: reading texts and metadata is
        most of a query's cost, so retrieval reads them for the few records it keeps.
        """
        if k <= 0 or not vectors:
            return [{} for _ in vectors]
        queries: list[Sequence[float]] = [list(v) for v in vectors]
        try:
            result = self._collection(kind).query(
                query_embeddings=queries, n_results=k, where=where or None, include=["distances"]
            )
        except Exception as exc:
            raise StoreError(f"cannot search the memory store: {exc}") from exc
        # Cosine distance is 1 - similarity; negative similarity means unrelated.
        return [
            {i: min(1.0, max(0.0, 1.0 - float(d))) for i, d in zip(ids, distances)}
            for ids, distances in zip(result["ids"], result["distances"] or [])
        ]

    def get(self, record_id: str) -> Exchange | DocumentChunk | None:
        """An exchange or a chunk by its id, or None."""
        for kind in RECORD_KINDS:
            rows = self._get(self._collection(kind), ids=[record_id])
            if rows:
                return rows[0]
        return None

    def get_thread(self, thread_id: str) -> list[Exchange]:
        """Every exchange of a thread, oldest first."""
        return self._exchanges_where({"thread_id": thread_id})

    @property
    def threads(self) -> ThreadCatalogue:
        """The thread catalogue: each exchange's place in its thread, and threads' titles."""
        return self.lexical.threads

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
        collection = self._collection(kind)
        for got in pages(collection, ["documents", "metadatas"], page):
            rows = zip(got["ids"], got["documents"] or [], got["metadatas"] or [])
            yield from (self._record(collection, i, t, m) for i, t, m in rows)

    def iter_rows(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[Row]:
        """Every record of one kind as stored: id, text and metadata whole (keys ocat does not know too)."""
        for got in pages(self._collection(kind), ["documents", "metadatas"], page):
            ids = list(got["ids"])
            rows = zip(ids, column(got["documents"], len(ids)), column(got["metadatas"], len(ids)))
            yield from ((i, t or "", dict(m or {})) for i, t, m in rows)

    def iter_ids(self, kind: RecordKind, *, page: int = 10 * READ_PAGE) -> Iterator[str]:
        """Every record's id, read page by page."""
        for got in pages(self._collection(kind), [], page):
            yield from got["ids"]

    def iter_metadata(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record's id and metadata, read page by page without texts or vectors."""
        for got in pages(self._collection(kind), ["metadatas"], page):
            ids = list(got["ids"])
            yield from zip(ids, (dict(m or {}) for m in column(got["metadatas"], len(ids))))

    def count(self, kind: RecordKind) -> int:
        """How many records of one kind the store holds."""
        try:
            return int(self._collection(kind).count())
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc

    def fetch(
        self,
        kind: RecordKind,
        ids: Sequence[str],
        *,
        where: dict[str, Any] | None = None,
        vectors: bool = True,
        texts: bool = True,
    ) -> dict[str, Any]:
        """Texts and metadata (unless `texts` is False) and vectors (unless `vectors` is False) of
        records by id, optionally matching `where`."""
        if not ids:
            return {"ids": [], "embeddings": [], "documents": [], "metadatas": []}
        include: Include = ["embeddings"] if vectors else []
        if texts:
            include += ["documents", "metadatas"]
        try:
            got = self._collection(kind).get(ids=list(ids), where=where or None, include=include)
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        found = list(got["ids"])
        return {
            "ids": found,
            "embeddings": column(got["embeddings"], len(found)),
            "documents": column(got["documents"], len(found)),
            "metadatas": column(got["metadatas"], len(found)),
        }

    def collection(self, kind: RecordKind) -> Collection:
        """The Chroma collection that holds one kind of record."""
        return self._collection(kind)

    def _collection(self, kind: RecordKind) -> Collection:
        return self.exchanges if kind == "exchange" else self.documents

    def _kind(self, collection: Collection) -> RecordKind:
        return "exchange" if collection is self.exchanges else "document"
