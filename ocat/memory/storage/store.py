"""The episodic store: exchanges and document chunks in ChromaDB, embedded by ocat.

Every write is idempotent (ids are given or derived from content), reads page through
Chroma instead of loading a collection, and vectors are computed here so that the store
records, and enforces, which embedding model built it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, cast

from ocat.errors import StoreError
from ocat.memory.storage.chroma import StoreLocation, collection_names, open_client, open_collection
from ocat.memory.storage.batches import Row, batches, column, unique_by_id
from ocat.memory.storage.derived import DerivedFileError, beside_index, checked, lexical_index_path
from ocat.memory.embedding.embedders import Embedder, has_passages
from ocat.memory.storage.lexical_index import LexicalIndex
from ocat.memory.storage.prompt_vectors import PromptVectors, Sides, other_sides, split_sides
from ocat.memory.storage.scoring import Calibration, calibration_for
from ocat.memory.storage.thread_titles import carry_titles
from ocat.records import RECORD_KINDS, DocumentChunk, Exchange, RecordKind

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Include, Metadata

    from ocat.memory.sharing.owner_lock import StoreLease
    from ocat.memory.storage.reconcile import PassageBackfill

# How many records go to Chroma per call (each write has a cost of its own: writing a
# 700 KB file's 978 chunks 16 at a time took 4x as long as 256 at a time).
WRITE_BATCH = 256
# How many records are embedded per step of a write that reports progress (an add): it
# reports, and can be stopped, after each, about every half second at ~30 chunks/s on two
# cores (docs/PERFORMANCE.md).
EMBED_STEP = 16
READ_PAGE = 1000
# A write of up to this many new exchanges (a chat turn, a small import) embeds their passages
# with them; a bulk write (an import) leaves them to a background thread, so that importing runs
# at the model's rate on the texts and prompts (docs/PERFORMANCE.md, "Passage vectors").
PASSAGES_INLINE = 8
# (id, embedded text, metadata): one record on its way into a collection.
# Told how many records of a write have been handled (stored or found stored) so far.
Progress = Callable[[int], None]


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
        # Set by open_store: this process's hold on the store folder (see ocat.memory.sharing.owner_lock).
        self.lease: StoreLease | None = None
        # Derived files a search found failing since they were opened: rebuilt by `rebuild_derived`.
        self.damaged: dict[str, str] = {}
        self.calibration: Calibration = shipped
        # The passages of an older store's exchanges, made in the background (ocat.memory.storage.reconcile).
        self.backfill: PassageBackfill | None = None
        if not check_derived:
            self.lexical = LexicalIndex(":memory:")
            self.prompts = PromptVectors(":memory:", embedder)
            return
        if lexical is None:
            index = lexical_index_path(location, name)
            checked(index, "lexical index", notify)
            checked(beside_index(index, "prompts"), "prompt vector file", notify)
        self.lexical = lexical if lexical is not None else LexicalIndex(index)
        self.prompts = PromptVectors(beside_index(self.lexical.path, "prompts"), embedder)

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
        from ocat.memory.storage.reconcile import reconcile

        store = cls(client, embedder, name=name, location=location, notify=notify, check_derived=upkeep)
        if upkeep:
            reconcile(store, notify)
        return store

    def derived_failed(self, exc: DerivedFileError) -> None:
        """A derived file failed mid-search: note it, so the next turn rebuilds it."""
        self.damaged[exc.path] = str(exc)

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

    def add_exchanges(self, exchanges: Iterable[Exchange], *, progress: Progress | None = None) -> int:
        """Store exchanges in batches, skipping ids already stored; returns how many were added.

        `progress` is called after each embedded step with how many records have been handled so far.
        """
        return self._add(self.exchanges, ((e.exchange_id, e.text, e.to_metadata()) for e in exchanges), progress)

    def add_chunks(self, chunks: Iterable[DocumentChunk], *, progress: Progress | None = None) -> int:
        """Store document chunks, skipping ids already stored; returns how many were added."""
        return self._add(self.documents, ((c.id, c.text, c.metadata) for c in chunks), progress)

    def _add(self, collection: Collection, rows: Iterable[Row], progress: Progress | None = None) -> int:
        # Rows stream through in batches: an import of any size holds one batch at a time,
        # and only records whose ids are not stored yet are embedded, EMBED_STEP at a time
        # when `progress` listens (told after each step). Each batch is one Chroma write of
        # what was embedded, made even when a step is interrupted (Ctrl+C, or `progress`
        # raising Cancelled): whole records are kept and a rerun adds the rest.
        added = handled = 0
        deferred = False
        step = EMBED_STEP if progress else WRITE_BATCH
        for batch in batches(rows, WRITE_BATCH):
            # Embedded by length, as the embedder orders its input: then steps pad as little as
            # one call for the batch would (unordered steps of 16 embedded 10% slower). Written in
            # the order given, so an export imported again exports byte for byte the same.
            unique = unique_by_id(batch)
            present = set(self.existing_ids(self._kind(collection), [r[0] for r in unique]))
            fresh = [r for r in unique if r[0] not in present]
            by_length = sorted(range(len(fresh)), key=lambda i: len(fresh[i][1]))
            handled += len(batch) - len(fresh)
            vectors: dict[int, Sequence[float]] = {}
            sides: dict[int, Sides] = {}
            # An embedder that reads whole texts has no passages: nothing to leave for later.
            inline = len(fresh) <= PASSAGES_INLINE or not has_passages(self.embedder)
            deferred = deferred or (collection is self.exchanges and not inline)
            try:
                for start in range(0, len(fresh), step):
                    part = by_length[start : start + step]
                    texts = [fresh[i][1] for i in part]
                    if collection is self.exchanges:
                        # An exchange's other sides (its prompt, its passages past the model's
                        # window: ocat.memory.storage.prompt_vectors) are embedded in the same call;
                        # a bulk write leaves the passages to the background (see PASSAGES_INLINE).
                        other = [other_sides(self.embedder, fresh[i][1], fresh[i][2], passages=inline)
                                 for i in part]
                        embedded = self.embedder.embed(texts + [t for side in other for t in side])
                        vectors.update(zip(part, embedded[: len(texts)]))
                        sides.update(zip(part, split_sides(embedded[len(texts) :], other)))
                    else:
                        vectors.update(zip(part, self.embedder.embed(texts)))
                    if progress:
                        progress(handled + len(vectors))
            finally:
                if vectors:
                    done = sorted(vectors)
                    self._write(collection, [fresh[i] for i in done], [vectors[i] for i in done],
                                [sides[i] for i in done if i in sides], passages=inline)
            added += len(fresh)
            handled += len(fresh)
            if not fresh and progress:
                progress(handled)
        if deferred:
            self.start_backfill()
        return added

    def start_backfill(self) -> None:
        """Make the passages still missing in a background thread (ocat.memory.storage.reconcile.PassageBackfill),
        unless one is running."""
        from ocat.memory.storage.reconcile import PassageBackfill

        if self.backfill is None or not self.backfill.thread.is_alive():
            self.backfill = PassageBackfill(self).start()

    def wait_for_passages(self, timeout: float | None = None) -> bool:
        """Wait for a background backfill of passages, if one runs; True when none is left running."""
        return self.backfill is None or self.backfill.wait(timeout)

    def existing_ids(self, kind: RecordKind, ids: Sequence[str]) -> list[str]:
        """Which of `ids` are stored (one read of ids, no texts)."""
        if not ids:
            return []
        try:
            return list(self._collection(kind).get(ids=list(ids), include=[])["ids"])
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc

    def _write(
        self,
        collection: Collection,
        rows: list[Row],
        vectors: list[Sequence[float]],
        sides: list[Sides],
        *,
        passages: bool = True,
    ) -> None:
        if collection is self.exchanges:
            carry_titles(self, rows)
        ids = [row[0] for row in rows]
        texts = [row[1] for row in rows]
        # Chroma refuses an empty metadata dict but takes None (its types do not say so): an
        # imported chunk may have none.
        metadatas = cast("list[Metadata]", [row[2] or None for row in rows])
        try:
            collection.add(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
        except Exception as exc:
            raise StoreError(f"cannot write to the memory store: {exc}") from exc
        # Chroma first: if we die between the writes, the next open sees the counts differ and
        # rebuilds the lexical index, or embeds the missing prompts and passages.
        if sides:
            # Without `passages` the rows are marked for the background to make them.
            self.prompts.write(ids[: len(sides)], [s[0] for s in sides], [s[1] for s in sides] if passages else None)
        self.lexical.add(self._kind(collection), rows)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete exchanges or chunks by id; returns how many existed (none for no ids: Chroma
        refuses an empty list)."""
        if not ids:
            return 0
        removed = 0
        for collection in (self.exchanges, self.documents):
            try:
                found = collection.get(ids=list(ids), include=[])["ids"]
                if found:
                    collection.delete(ids=found)
            except Exception as exc:
                raise StoreError(f"cannot delete from the memory store: {exc}") from exc
            if collection is self.exchanges:
                self.prompts.delete(found)
            self.lexical.delete(self._kind(collection), found)
            removed += len(found)
        return removed

    def delete_documents_where(self, where: dict[str, Any]) -> int:
        """Delete the document chunks matching a metadata filter; returns how many."""
        try:
            found = self.documents.get(where=where, include=[])["ids"]
            if found:
                self.documents.delete(ids=found)
        except Exception as exc:
            raise StoreError(f"cannot delete from the memory store: {exc}") from exc
        self.lexical.delete("document", found)
        return len(found)

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

    def documents_where(self, where: dict[str, Any]) -> list[DocumentChunk]:
        """Document chunks matching a metadata filter (a write-path helper: filters are slow at scale)."""
        return [r for r in self._get(self.documents, where=where) if isinstance(r, DocumentChunk)]

    def iter_records(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[Exchange | DocumentChunk]:
        """Every record of one kind, read page by page (never the whole collection at once)."""
        collection = self._collection(kind)
        for got in self._pages(collection, ["documents", "metadatas"], page):
            rows = zip(got["ids"], got["documents"] or [], got["metadatas"] or [])
            yield from (self._record(collection, i, t, m) for i, t, m in rows)

    def iter_ids(self, kind: RecordKind, *, page: int = 10 * READ_PAGE) -> Iterator[str]:
        """Every record's id, read page by page."""
        for got in self._pages(self._collection(kind), [], page):
            yield from got["ids"]

    def iter_metadata(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record's id and metadata, read page by page without texts or vectors."""
        for got in self._pages(self._collection(kind), ["metadatas"], page):
            ids = list(got["ids"])
            yield from zip(ids, (dict(m or {}) for m in column(got["metadatas"], len(ids))))

    def _pages(self, collection: Collection, include: list[str], page: int) -> Iterator[Any]:
        """A collection read `page` records at a time, with the columns in `include`."""
        offset = 0
        while True:
            try:
                got = collection.get(include=cast("Include", include), limit=page, offset=offset)
            except Exception as exc:
                raise StoreError(f"cannot read the memory store: {exc}") from exc
            yield got
            if len(got["ids"]) < page:
                return
            offset += page

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

    def _collection(self, kind: RecordKind) -> Collection:
        return self.exchanges if kind == "exchange" else self.documents

    def _kind(self, collection: Collection) -> RecordKind:
        return "exchange" if collection is self.exchanges else "document"
