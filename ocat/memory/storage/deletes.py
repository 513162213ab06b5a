"""Deleting records: the derived files first, then Chroma, and what is left of a document marked.

The order keeps one rule true through any crash: a derived file never lists a record Chroma does
not hold (ocat.memory.storage.primary). A document that loses some of its chunks (a user's
`/vdelete doc-KEY-2`) is marked shortened on the chunks left: whole as it is, never taken for an
add that was cut short, so no repair ever finishes or removes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

from ocat.errors import StoreError
from ocat.memory.storage.batches import column
from ocat.memory.storage.link_records import forget_links
from ocat.memory.storage.remote_sync import log_change
from ocat.memory.storage.writes import mark_documents
from ocat.records import RECORD_KINDS, SHORTENED_BY_DELETE, SHORTENED_KEY, SUPERSEDED_KEY, RecordKind

if TYPE_CHECKING:
    from chromadb.api.types import Metadata, Where

    from ocat.memory.storage.parts import StoreParts


def delete_ids(store: StoreParts, ids: Sequence[str]) -> int:
    """Delete exchanges or chunks by id; returns how many existed (none for no ids: Chroma
    refuses an empty list)."""
    if not ids:
        return 0
    removed = 0
    for kind in RECORD_KINDS:
        collection = store.collection(kind)
        try:
            got = collection.get(ids=list(dict.fromkeys(ids)), include=["metadatas"])
        except Exception as exc:
            raise StoreError(f"cannot delete from the memory store: {exc}") from exc
        found = list(got["ids"])
        if not found:
            continue
        _forget_derived(store, kind, found)
        try:
            collection.delete(ids=found)
        except Exception as exc:
            raise StoreError(f"cannot delete from the memory store: {exc}") from exc
        log_change(store, "delete", kind, found)  # for the other machines of a server (ocat.memory.storage.remote_sync)
        if kind == "document":
            metadatas = column(got["metadatas"], len(found))
            documents = [str((m or {}).get("document_id") or "") for m in metadatas]
            mark_shortened(store, documents, SHORTENED_BY_DELETE)
            _given_again(store, found)
            # A note whose last chunk went no longer updates anything: its older versions stand again.
            forget_links(store, kind, [d or i for d, i in zip(documents, found)])
        else:
            forget_links(store, kind, found)
        removed += len(found)
    return removed


def delete_where(store: StoreParts, where: dict[str, Any]) -> int:
    """Delete the document chunks matching a metadata filter (a file's earlier version, a
    folder's file that is gone: whole documents); returns how many."""
    try:
        got = store.documents.get(where=cast("Where", where), include=["metadatas"])
    except Exception as exc:
        raise StoreError(f"cannot delete from the memory store: {exc}") from exc
    found = list(got["ids"])
    if found:
        _forget_derived(store, "document", found)
        try:
            store.documents.delete(ids=found)
        except Exception as exc:
            raise StoreError(f"cannot delete from the memory store: {exc}") from exc
        log_change(store, "delete", "document", found)
        metadatas = column(got["metadatas"], len(found))
        forget_links(store, "document", [str((m or {}).get("document_id") or i) for m, i in zip(metadatas, found)])
    return len(found)


def mark_shortened(store: StoreParts, documents: Iterable[str], why: str) -> int:
    """Mark every chunk left of these documents shortened (SHORTENED_KEY, `why`); how many."""
    return mark_documents(store, documents, {SHORTENED_KEY: why})


def _given_again(store: StoreParts, gone: list[str]) -> None:
    """Clear the replaced mark of the notes these deleted chunks had replaced (the model's
    `remember` with `replaces`): deleting the newer note undoes the replace, and a pin the older
    one kept is shown again, never left on a note nobody is given."""
    try:
        older = store.documents.get(where=cast("Where", {SUPERSEDED_KEY: {"$in": gone}}), include=[])["ids"]
        if older:
            cleared = cast("list[Metadata]", [{SUPERSEDED_KEY: None} for _ in older])  # None removes the key
            store.documents.update(ids=list(older), metadatas=cleared)
    except Exception as exc:
        raise StoreError(f"cannot mark a note in the memory store: {exc}") from exc


def _forget_derived(store: StoreParts, kind: RecordKind, ids: list[str]) -> None:
    """Drop records from the derived files before Chroma deletes them: a crash between the two
    then leaves Chroma holding more than its derived files (mended on the next open), never
    less, which is how a damaged or emptied primary store looks."""
    try:
        if kind == "exchange":
            store.prompts.delete(ids)
            if store.sides is not None:
                store.sides.delete(ids)
        store.lexical.delete(kind, ids)
    except StoreError as exc:
        raise StoreError(f"nothing was deleted: {exc}") from exc
