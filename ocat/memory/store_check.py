"""`ocat --check-store` and `--repair-store`: what is wrong with a store, and making it whole.

In the spirit of `git fsck` and `sqlite3 .recover`: the check reads Chroma (the record) and
each derived file (read-only) and reports counts per side, orphans, damage and partial
documents, changing nothing; the repair moves every derived file aside, builds it again from
Chroma, and finishes (or removes) the documents whose add was cut short.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ocat.memory.storage.derived import SIDE_FILES, move_aside, sqlite_problem
from ocat.memory.ingest.documents import PartialDocument, partial_documents
from ocat.memory.storage.derived import beside_index, lexical_index_path
from ocat.memory.storage.store import MemoryStore
from ocat.records import RECORD_KINDS, RecordKind
from ocat.text import count_of

# The tables of record ids in each derived file, by the kind of record they follow.
_ID_TABLES: dict[str, dict[RecordKind, str]] = {
    "lexical index": {
        "exchange": "SELECT record_id FROM ids_exchange", "document": "SELECT record_id FROM ids_document"
    },
    "prompt vector file": {"exchange": "SELECT record_id FROM prompt_vectors"},
}


@dataclass(frozen=True)
class DerivedHealth:
    """One derived file: its damage, and how its records compare with Chroma's."""

    what: str
    path: str
    exists: bool
    damaged: str | None = None
    # Records the file holds, per kind (None when it cannot be read).
    records: dict[str, int] | None = None
    # Records the file holds that Chroma does not, and Chroma's records the file lacks.
    orphans: int = 0
    missing: int = 0

    @property
    def healthy(self) -> bool:
        """Sound and level with Chroma (a missing file is built on the next open: not a problem)."""
        return self.damaged is None and not self.orphans and not self.missing


@dataclass(frozen=True)
class StoreHealth:
    """What `--check-store` found."""

    path: str
    collection: str
    exchanges: int
    documents: int
    derived: list[DerivedHealth] = field(default_factory=list)
    partial_documents: list[PartialDocument] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Nothing for `--repair-store` to do."""
        return all(d.healthy for d in self.derived) and not self.partial_documents

    def lines(self) -> list[str]:
        """The report in words, one finding a line."""
        lines = [f"store: {self.path} ({self.collection}): "
                 f"{count_of(self.exchanges, 'exchange')}, {count_of(self.documents, 'document chunk')}"]
        for d in self.derived:
            if not d.exists:
                state = "absent (built on the next open)"
            elif d.damaged:
                state = f"DAMAGED: {d.damaged}"
            else:
                held = ", ".join(count_of(n, kind) for kind, n in (d.records or {}).items())
                state = f"sound; holds {held}"
                if d.orphans or d.missing:
                    state += f"; {d.orphans} orphaned, {d.missing} missing"
            lines.append(f"{d.what}: {d.path}: {state}")
        for p in self.partial_documents:
            lines.append(f"partial document: {p.source or p.document_id}: {p.stored_chunks} of {p.total_chunks} chunks")
        lines.append("healthy" if self.healthy else "problems found: `ocat --repair-store` rebuilds and finishes")
        return lines


def derived_files(store: MemoryStore) -> dict[str, Path]:
    """Each derived file of a store, by what it is."""
    index = lexical_index_path(store.location, store.name)
    return {"lexical index": index, "prompt vector file": beside_index(index, "prompts")}


def check_store(store: MemoryStore) -> StoreHealth:
    """Inspect a store opened with `upkeep=False` (so nothing was repaired on the way in)."""
    chroma = {kind: set(store.iter_ids(kind)) for kind in RECORD_KINDS}
    derived = [_check_file(what, path, chroma) for what, path in derived_files(store).items()]
    return StoreHealth(
        path=str(store.location.path) if store.location.path is not None else store.location.describe(),
        collection=store.name,
        exchanges=len(chroma["exchange"]),
        documents=len(chroma["document"]),
        derived=derived,
        partial_documents=partial_documents(store),
    )


def _check_file(what: str, path: Path, chroma: dict[RecordKind, set[str]]) -> DerivedHealth:
    if not path.exists():
        return DerivedHealth(what, str(path), exists=False)
    problem = sqlite_problem(path)
    if problem is not None:
        return DerivedHealth(what, str(path), exists=True, damaged=problem)
    records: dict[str, int] = {}
    orphans = missing = 0
    try:
        for kind, sql in _ID_TABLES[what].items():
            held = set(_read_ids(path, sql))
            records[kind] = len(held)
            orphans += len(held - chroma[kind])
            missing += len(chroma[kind] - held)
    except sqlite3.Error as exc:  # a table missing, or damage quick_check did not see
        return DerivedHealth(what, str(path), exists=True, damaged=str(exc))
    return DerivedHealth(what, str(path), exists=True, records=records, orphans=orphans, missing=missing)


def _read_ids(path: Path, sql: str) -> Iterator[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield from (str(row[0]) for row in db.execute(sql))
    finally:
        db.close()


@dataclass(frozen=True)
class RepairResult:
    """What `--repair-store` did."""

    rebuilt: list[str]
    finished_documents: list[str]
    removed_documents: list[str]
    before: StoreHealth
    after: StoreHealth

    def lines(self) -> list[str]:
        """What was done, in words."""
        lines = [f"rebuilt {what}" for what in self.rebuilt]
        lines += [f"finished the partial document {name}" for name in self.finished_documents]
        lines += [f"removed the partial document {name} (its file is gone)" for name in self.removed_documents]
        lines.append("healthy" if self.after.healthy else "still not healthy: " + "; ".join(self.after.lines()[1:]))
        return lines


def repair_store(
    store: MemoryStore,
    finish: Callable[[MemoryStore, Path], None],
    *,
    notify: Callable[[str], None] | None = None,
) -> RepairResult:
    """Rebuild every derived file of a store opened with `upkeep=False`, then finish each partial
    document whose file is still there (`finish` adds it again) and remove the others' chunks.
    Returns the repaired store's findings too."""
    before = check_store(store)
    rebuilt = []
    for d in before.derived:
        path = Path(d.path)
        if d.exists:
            if d.damaged:
                move_aside(path)
            else:  # derived and sound: nothing in it that the rebuild will not make again
                for suffix in ("", *SIDE_FILES):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
        rebuilt.append(f"the {d.what} {d.path}" + (f" (it was damaged: {d.damaged})" if d.damaged else ""))
    whole = MemoryStore.reconciled(
        store.client, store.embedder, name=store.name, location=store.location, notify=notify
    )
    whole.lease, store.lease = store.lease, None
    finished, removed = [], []
    for partial in before.partial_documents:
        name = partial.source or partial.document_id
        source = Path(partial.source) if partial.source else None
        if source is not None and source.is_file():
            finish(whole, source)
            finished.append(name)
        else:
            whole.delete_documents_where({"document_id": partial.document_id})
            removed.append(name)
    after = check_store(whole)
    whole.close()
    return RepairResult(rebuilt, finished, removed, before, after)
