"""`ocat --check-store`: what is wrong with a store, changing nothing.

In the spirit of `git fsck`: the check reads Chroma (the record: its file's pages too, with
`PRAGMA quick_check`) and each derived file (read-only), and reports counts per side,
orphans, damage, a primary store that holds less than its derived files, and documents whose
add was cut short. `ocat --repair-store` (ocat.memory.store_repair) acts on what it finds.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ocat.memory.ingest.documents import PartialDocument, partial_documents
from ocat.memory.storage.derived import beside_index, lexical_index_path, sqlite_problem
from ocat.memory.storage.location import StoreLocation
from ocat.memory.storage.primary import SHRUNK_ADVICE, StoreShrunk, lost_records, primary_problem
from ocat.memory.storage.link_records import count_links, LinkCounts
from ocat.memory.storage.store import MemoryStore
from ocat.memory.store_secrets import SecretsInStore, secrets_in_store
from ocat.records import RECORD_KINDS, RecordKind
from ocat.text.terminal import count_of

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
    records: dict[RecordKind, int] | None = None
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
    # What `PRAGMA quick_check` found wrong with chroma.sqlite3 (None: sound, or a server's store).
    primary_damaged: str | None = None
    # Where a derived file holds more records than Chroma: Chroma lost them (ocat.memory.storage.primary).
    shrunk: list[str] = field(default_factory=list)
    # The embedding model's cached graph, in words (ocat.memory.embedding.lean_cache.CacheCheck.line):
    # checked and, when damaged, made again from the model; None when not looked at.
    model_graph: str | None = None
    # The links between versions of a fact, by how they were made, and the dangling ones (None: not read).
    links: LinkCounts | None = None
    # The records that hold a secret, by kind (ocat.memory.store_secrets): never the secrets
    # themselves. Not a problem a repair mends: `ocat --redact-secrets` takes them out.
    secrets: SecretsInStore | None = None
    # Why Chroma could not be read (a damaged page it needed): the counts above are then unknown (0).
    unreadable: str | None = None

    @property
    def healthy(self) -> bool:
        """Nothing for `--repair-store` to do."""
        return (all(d.healthy for d in self.derived) and not self.partial_documents
                and self.primary_damaged is None and not self.shrunk and not (self.links and self.links.dangling))

    def lines(self) -> list[str]:
        """The report in words, one finding a line."""
        held = (f"Chroma cannot be read ({self.unreadable})" if self.unreadable else
                f"{count_of(self.exchanges, 'exchange')}, {count_of(self.documents, 'document chunk')}")
        lines = [f"store: {self.path} ({self.collection}): {held}"]
        if self.primary_damaged:
            lines.append(f"primary store: DAMAGED: {self.primary_damaged}: restore chroma.sqlite3 from a backup "
                         "(export what can still be read first: `ocat --export-memory FILE`)")
        for finding in self.shrunk:
            lines.append(f"primary store: DAMAGED: {finding}")
        if self.model_graph is not None:
            lines.append(self.model_graph)
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
        if self.links is not None:
            links = self.links
            line = (f"links between versions: {links.found} found, {links.model} by the model, {links.user} by you")
            if links.dangling:
                line += (f"; {len(links.dangling)} dangling (the newer version is gone: "
                         "`ocat --repair-store` clears them, keeping every memory)")
            lines.append(line)
        if self.secrets is not None:
            lines.append(self.secrets.line())
        for p in self.partial_documents:
            lines.append(f"partial document: {p.label}: {p.stored_chunks} of {p.total_chunks} chunks "
                         "(its add was cut short)")
        if self.healthy:
            lines.append("healthy")
        elif self.shrunk:
            lines.append(f"the store holds less than its derived files: {SHRUNK_ADVICE}")
        elif self.primary_damaged:
            lines.append("problems found: the primary store is damaged, which `ocat --repair-store` cannot mend")
        else:
            lines.append("problems found: `ocat --repair-store` rebuilds and finishes (it deletes no memory)")
        return lines


def derived_files(location: StoreLocation, name: str) -> dict[str, Path]:
    """Each derived file of a store, by what it is."""
    index = lexical_index_path(location, name)
    return {"lexical index": index, "prompt vector file": beside_index(index, "prompts")}


def check_store(store: MemoryStore) -> StoreHealth:
    """Inspect a store opened with `upkeep=False` (so nothing was repaired on the way in)."""
    chroma = {kind: set(store.iter_ids(kind)) for kind in RECORD_KINDS}
    derived = [_check_file(what, path, chroma) for what, path in derived_files(store.location, store.name).items()]
    local = store.location.path if store.location.path is not None and not store.location.host else None
    return StoreHealth(
        path=store_path(store.location),
        collection=store.name,
        exchanges=len(chroma["exchange"]),
        documents=len(chroma["document"]),
        derived=derived,
        partial_documents=partial_documents(store),
        primary_damaged=primary_problem(local) if local is not None else None,
        shrunk=_shrunk(derived, {kind: len(ids) for kind, ids in chroma.items()}),
        links=count_links(store),
        secrets=secrets_in_store(store),
    )


def unopened_health(location: StoreLocation, name: str, refused: StoreShrunk) -> StoreHealth:
    """The findings for a store whose primary file is missing or empty (opening it refused, so
    that no new, empty one is made over the traces): its derived files, as they are."""
    empty: dict[RecordKind, set[str]] = {kind: set() for kind in RECORD_KINDS}
    derived = [_check_file(what, path, empty) for what, path in derived_files(location, name).items()]
    return StoreHealth(path=store_path(location), collection=name, exchanges=0, documents=0, derived=derived,
                       primary_damaged=None, shrunk=refused.findings)


def unreadable_health(location: StoreLocation, name: str, failure: Exception) -> StoreHealth | None:
    """The findings for a store on this machine whose Chroma failed as it was read, when
    `PRAGMA quick_check` finds its chroma.sqlite3 damaged: that damage (a page Chroma needed),
    and each derived file as it is, compared with nothing. None when the file is sound: the
    failure is something else, and is reported as it is."""
    if location.path is None or location.host:
        return None
    problem = primary_problem(location.path)
    if problem is None:
        return None
    derived = [_check_file(what, path, None) for what, path in derived_files(location, name).items()]
    return StoreHealth(path=store_path(location), collection=name, exchanges=0, documents=0, derived=derived,
                       primary_damaged=problem, unreadable=str(failure))


def _shrunk(derived: list[DerivedHealth], stored: dict[RecordKind, int]) -> list[str]:
    """Where a derived file lists more records of a kind than Chroma holds, in words."""
    return [f"Chroma holds {count_of(stored[kind], kind)} but the {d.what} {d.path} lists {d.records[kind]:,}"
            for d in derived if d.records for kind in RECORD_KINDS
            if lost_records(stored[kind], d.records.get(kind, 0))]


def store_path(location: StoreLocation) -> str:
    """A store's place as the reports show it."""
    return str(location.path) if location.path is not None else location.describe()


def _check_file(what: str, path: Path, chroma: dict[RecordKind, set[str]] | None) -> DerivedHealth:
    """One derived file's damage and records, compared with Chroma's ids (unless `chroma` is None: unread)."""
    if not path.exists():
        return DerivedHealth(what, str(path), exists=False)
    problem = sqlite_problem(path)
    if problem is not None:
        return DerivedHealth(what, str(path), exists=True, damaged=problem)
    records: dict[RecordKind, int] = {}
    orphans = missing = 0
    try:
        for kind, sql in _ID_TABLES[what].items():
            held = set(_read_ids(path, sql))
            records[kind] = len(held)
            if chroma is not None:
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
