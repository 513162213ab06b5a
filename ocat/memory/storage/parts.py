"""What the store's functions are given: its two Chroma collections, its derived files, the sides a
server shares, how it writes, and the reads by id those functions need.

`MemoryStore` (ocat.memory.storage.store) is these parts and what is done with them: opening and
reconciling, writing, deleting, closing. The functions below it (writes, deletes, reconcile,
passages, primary, thread_titles, remote_sync, link_records, versions) are given a `StoreParts`,
never the store itself, so none can call back into it: the files form layers, each importing
only those under it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from ocat.errors import StoreError
from ocat.memory.storage.batches import column, pages
from ocat.memory.storage.change_log import ChangeLog
from ocat.memory.storage.chroma import collection_names, open_collection
from ocat.memory.storage.client_holds import hold
from ocat.memory.storage.derived import DerivedFileError, beside_index, checked, lexical_index_path
from ocat.memory.storage.foreground import Foreground
from ocat.memory.storage.lexical_index import LexicalIndex
from ocat.memory.storage.prompt_vectors import PromptVectors
from ocat.memory.storage.scoring import Calibration, calibration_for
from ocat.memory.storage.shared_sides import SharedSides
from ocat.records import RecordKind

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Include

    from ocat.memory.embedding.embedders import Embedder
    from ocat.memory.storage.foreground import PassageBackfill
    from ocat.memory.storage.location import StoreLocation
    from ocat.memory.storage.thread_catalogue import ThreadCatalogue

_Derived = TypeVar("_Derived", LexicalIndex, PromptVectors)
# Records read from Chroma per request when a whole collection is walked.
READ_PAGE = 1000


class StoreParts:
    """One named store's parts: an exchanges collection and a documents collection, the derived
    files beside them, and what its writes keep to."""

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
        """Open the store's collections and its derived files, as they are (`MemoryStore.open`
        also brings them level with Chroma). `check_derived=False` opens Chroma alone, for `ocat
        --check-store` and `--repair-store`: the derived files are neither checked nor opened
        (in-memory stand-ins). `keep_current` runs as each search begins (`foreground`)."""
        self.client = client
        # The client stays open while this store is (ocat.memory.storage.client_holds): MemoryStore.close lets go.
        hold(client)
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
        # Derived files a search found failing since they were opened: rebuilt by `rebuild_derived`.
        self.damaged: dict[str, str] = {}
        self.calibration: Calibration = shipped
        # The passages of an older store's exchanges, made in the background (ocat.memory.storage.passages).
        self.backfill: PassageBackfill | None = None
        # The searches running on it: each first runs `keep_current` (a server's store takes what
        # other machines wrote), and the backfill steps aside for them (ocat.memory.storage.foreground).
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


    def keep_current(self) -> bool:
        """What each search runs first: nothing for the parts alone (the store takes what other
        machines wrote to a server: MemoryStore.keep_current)."""
        return False
    def _derived(self, make: Callable[[str], _Derived], path: Path | str) -> _Derived:
        """A derived file, opened; one that cannot be opened here (another user's, a folder that
        cannot be written) is replaced by one in memory for this process, and the user told once."""
        try:
            return make(str(path))
        except DerivedFileError as exc:
            self.derived_failed(exc)
            return make(":memory:")

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

    @property
    def threads(self) -> ThreadCatalogue:
        """The thread catalogue: each exchange's place in its thread, and threads' titles."""
        return self.lexical.threads

    def existing_ids(self, kind: RecordKind, ids: Sequence[str]) -> list[str]:
        """Which of `ids` are stored (one read of ids, no texts; an id asked twice is asked once,
        as Chroma refuses a list that repeats one)."""
        if not ids:
            return []
        try:
            return list(self.collection(kind).get(ids=list(dict.fromkeys(ids)), include=[])["ids"])
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc

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
            result = self.collection(kind).query(
                query_embeddings=queries, n_results=k, where=where or None, include=["distances"]
            )
        except Exception as exc:
            raise StoreError(f"cannot search the memory store: {exc}") from exc
        # Cosine distance is 1 - similarity; negative similarity means unrelated.
        return [
            {i: min(1.0, max(0.0, 1.0 - float(d))) for i, d in zip(ids, distances)}
            for ids, distances in zip(result["ids"], result["distances"] or [])
        ]

    def count(self, kind: RecordKind) -> int:
        """How many records of one kind the store holds."""
        try:
            return int(self.collection(kind).count())
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
            got = self.collection(kind).get(ids=list(ids), where=where or None, include=include)
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        found = list(got["ids"])
        return {
            "ids": found,
            "embeddings": column(got["embeddings"], len(found)),
            "documents": column(got["documents"], len(found)),
            "metadatas": column(got["metadatas"], len(found)),
        }

    def iter_ids(self, kind: RecordKind, *, page: int = 10 * READ_PAGE) -> Iterator[str]:
        """Every record's id, read page by page."""
        for got in pages(self.collection(kind), [], page):
            yield from got["ids"]

    def iter_metadata(self, kind: RecordKind, *, page: int = READ_PAGE) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record's id and metadata, read page by page without texts or vectors."""
        for got in pages(self.collection(kind), ["metadatas"], page):
            ids = list(got["ids"])
            yield from zip(ids, (dict(m or {}) for m in column(got["metadatas"], len(ids))))

    def collection(self, kind: RecordKind) -> Collection:
        """The Chroma collection that holds one kind of record."""
        return self.exchanges if kind == "exchange" else self.documents
