"""Links between versions as Chroma holds them: read from and written to the older records' metadata.

ocat.memory.storage.versions makes, undoes and follows links through these; `--check-store`
counts them here, and a delete clears the links that named what it deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence, cast

from ocat.errors import StoreError
from ocat.memory.storage.batches import column
from ocat.records import RECORD_KINDS, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, UPDATED_BY_KEY, RecordKind, UpdateHow

if TYPE_CHECKING:
    from chromadb.api.types import Metadata, Where

    from ocat.memory.storage.parts import StoreParts

# Every way a link is made, found ones first (ocat.records.UpdateHow).
HOWS: tuple[UpdateHow, ...] = ("found", "model", "user")
# Ids per Chroma filter (`$in`): SQLite caps a query's parameters.
_IDS_PER_READ = 500
_PAGE = 1000


@dataclass(frozen=True)
class Version:
    """One version of a fact: the id a link names (an exchange's id, a note's document id), the
    record shown for it (the exchange, the note's first chunk), its date and text, and the link
    to its newer version, if any."""

    key: str
    record_id: str
    kind: RecordKind
    date: float | None
    text: str
    updated_by: str | None = None
    evidence: str = ""
    how: str | None = None


@dataclass(frozen=True)
class LinkCounts:
    """How many links a store holds, by how they were made, and the dangling ones (whose newer
    version is gone), as (kind, older key) to clear."""

    found: int = 0
    model: int = 0
    user: int = 0
    dangling: tuple[tuple[RecordKind, str], ...] = ()

    @property
    def total(self) -> int:
        """Every link."""
        return self.found + self.model + self.user


def link_marks(newer: str | None, how: str | None = None, evidence: str = "") -> dict[str, Any]:
    """The metadata a link sets on its older record (None everywhere removes it)."""
    if newer is None:
        return {UPDATED_BY_KEY: None, UPDATE_EVIDENCE_KEY: None, UPDATE_HOW_KEY: None}
    return {UPDATED_BY_KEY: newer, UPDATE_EVIDENCE_KEY: evidence, UPDATE_HOW_KEY: how}


def link_of(metadata: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """A record's link as (newer, evidence, how), or None: read from its metadata (a stored odd
    value reads as no link)."""
    newer = metadata.get(UPDATED_BY_KEY)
    if not isinstance(newer, str) or not newer:
        return None
    evidence, how = metadata.get(UPDATE_EVIDENCE_KEY), metadata.get(UPDATE_HOW_KEY)
    return newer, evidence if isinstance(evidence, str) else "", how if isinstance(how, str) else ""


def version_key(kind: RecordKind, record_id: str, metadata: Mapping[str, Any]) -> str:
    """The id a link names for a record: an exchange's own id, a chunk's document id."""
    if kind == "exchange":
        return record_id
    return str(metadata.get("document_id") or record_id)


def count_links(store: StoreParts) -> LinkCounts:
    """The store's links by how they were made (a note's counted once, not per chunk), and the
    dangling ones: a link to a version no longer stored."""
    counts = {how: 0 for how in HOWS}
    dangling: list[tuple[RecordKind, str]] = []
    for kind in RECORD_KINDS:
        links: dict[str, tuple[str, str, str]] = {}
        for record_id, metadata in _linked(store, kind):
            found = link_of(metadata)
            if found is not None:
                links.setdefault(version_key(kind, record_id, metadata), found)
        for _, _, how in links.values():
            if how in counts:
                counts[how] += 1
        stored = stored_keys(store, kind, sorted({newer for newer, _, _ in links.values()}))
        dangling += [(kind, old) for old, (newer, _, _) in sorted(links.items()) if newer not in stored]
    return LinkCounts(counts["found"], counts["model"], counts["user"], tuple(dangling))


def clear_links(store: StoreParts, kind: RecordKind, olders: Sequence[str]) -> int:
    """Remove the links of these older versions (their keys); how many records were changed."""
    return mark_versions(store, kind, {key: link_marks(None) for key in olders})


def forget_links(store: StoreParts, kind: RecordKind, gone: Sequence[str]) -> int:
    """After records were deleted: clear the links that named them as the newer version (a note
    only once no chunk of it is left), so no version points at nothing; how many records changed."""
    keys = list(dict.fromkeys(gone))
    if kind == "document":
        keys = [k for k in keys if k not in stored_keys(store, kind, keys)]
    return clear_links(store, kind, named_by(store, kind, keys)) if keys else 0


def read_rows(store: StoreParts, kind: RecordKind, *, ids: Sequence[str] | None = None,
              where: dict[str, Any] | None = None, limit: int | None = None,
              texts: bool = False) -> list[tuple[str, dict[str, Any], str]]:
    """(id, metadata, text) of the records with these ids or matching `where`."""
    include: Any = ["metadatas", "documents"] if texts else ["metadatas"]
    try:
        got = store.collection(kind).get(ids=list(ids) if ids is not None else None,
                                         where=cast("Where", where) if where else None, limit=limit, include=include)
    except Exception as exc:
        raise StoreError(f"cannot read the memory store: {exc}") from exc
    found = list(got["ids"])
    metadatas = column(got["metadatas"], len(found))
    documents = column(got.get("documents"), len(found)) if texts else [""] * len(found)
    return [(i, dict(m or {}), t or "") for i, m, t in zip(found, metadatas, documents)]


def id_parts(items: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _IDS_PER_READ):
        yield list(items[start : start + _IDS_PER_READ])


def stored_keys(store: StoreParts, kind: RecordKind, keys: Sequence[str]) -> set[str]:
    """Which of these version keys the store holds a record of."""
    found: set[str] = set()
    for part in id_parts(list(keys)):
        if kind == "exchange":
            found.update(store.existing_ids(kind, part))
        else:
            rows = read_rows(store, kind, where={"document_id": {"$in": part}})
            found.update(str(m.get("document_id")) for _, m, _ in rows)
    return found


def links_of(store: StoreParts, kind: RecordKind, keys: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    """The links these versions hold now, by key."""
    found: dict[str, tuple[str, str, str]] = {}
    for part in id_parts(list(dict.fromkeys(keys))):  # Chroma refuses a read that names an id twice
        rows = (read_rows(store, kind, ids=part) if kind == "exchange"
                else read_rows(store, kind, where={"document_id": {"$in": part}}))
        for record_id, metadata, _ in rows:
            link = link_of(metadata)
            if link is not None:
                found.setdefault(version_key(kind, record_id, metadata), link)
    return found


def named_by(store: StoreParts, kind: RecordKind, keys: Sequence[str]) -> list[str]:
    """The versions whose link names one of `keys` as their newer version."""
    found: dict[str, None] = {}
    for part in id_parts(list(keys)):
        for record_id, metadata, _ in read_rows(store, kind, where={UPDATED_BY_KEY: {"$in": part}}):
            found[version_key(kind, record_id, metadata)] = None
    return list(found)


def _linked(store: StoreParts, kind: RecordKind) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every record of a kind that holds a link, page by page."""
    offset = 0
    while True:
        try:
            got = store.collection(kind).get(where=cast("Where", {UPDATE_HOW_KEY: {"$in": list(HOWS)}}),
                                             limit=_PAGE, offset=offset, include=["metadatas"])
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        ids = list(got["ids"])
        yield from zip(ids, (dict(m or {}) for m in column(got["metadatas"], len(ids))))
        if len(ids) < _PAGE:
            return
        offset += _PAGE


def read_versions(store: StoreParts, kind: RecordKind, keys: Sequence[str]) -> dict[str, Version]:
    """The versions with these keys, as shown: a note by its first chunk."""
    shown: dict[str, Version] = {}
    for part in id_parts(list(dict.fromkeys(keys))):
        rows = (read_rows(store, kind, ids=part, texts=True) if kind == "exchange"
                else read_rows(store, kind, where={"document_id": {"$in": part}}, texts=True))
        for record_id, metadata, text in sorted(rows, key=lambda r: chunk_index(r[1])):
            key = version_key(kind, record_id, metadata)
            if key in shown:
                continue
            date = metadata.get("timestamp", metadata.get("date_added"))
            link = link_of(metadata)
            shown[key] = Version(
                key=key, record_id=record_id, kind=kind, text=text,
                date=float(date) if isinstance(date, (int, float)) and not isinstance(date, bool) else None,
                updated_by=link[0] if link else None, evidence=link[1] if link else "", how=link[2] if link else None)
    return shown


def chunk_index(metadata: Mapping[str, Any]) -> int:
    index = metadata.get("chunk_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


def mark_versions(store: StoreParts, kind: RecordKind, marks: Mapping[str, Mapping[str, Any]]) -> int:
    """Set each version's marks (key -> metadata) on its record, or every chunk of its note, in
    one Chroma update; how many records were changed."""
    if not marks:
        return 0
    if kind == "exchange":
        ids = store.existing_ids(kind, list(marks))
        metadatas = [dict(marks[i]) for i in ids]
    else:
        rows = [(i, str(m.get("document_id") or i)) for part in id_parts(list(marks))
                for i, m, _ in read_rows(store, kind, where={"document_id": {"$in": part}})]
        ids, metadatas = [i for i, _ in rows], [dict(marks[key]) for _, key in rows]
    if not ids:
        return 0
    try:
        # Chroma merges an update into the stored metadata; None removes a key.
        store.collection(kind).update(ids=ids, metadatas=cast("list[Metadata]", metadatas))
    except Exception as exc:
        raise StoreError(f"cannot record a link between versions in the memory store: {exc}") from exc
    return len(ids)


def linked_keys(store: StoreParts, kind: RecordKind, keys: Sequence[str]) -> tuple[set[str], set[str]]:
    """Which of these versions hold a link to a newer one, and which a link names (two reads per
    part, whatever the number of keys: a thread's exchanges at once)."""
    older = set(links_of(store, kind, keys))
    named: set[str] = set()
    for part in id_parts(list(keys)):
        for _, metadata, _ in read_rows(store, kind, where={UPDATED_BY_KEY: {"$in": part}}):
            named.add(str(metadata.get(UPDATED_BY_KEY)))
    return older, named
