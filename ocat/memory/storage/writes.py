"""Writing records: embedding them a step at a time and storing each batch in Chroma, then in
the derived files.

Every write is idempotent: ids already stored are skipped, so a write cut short (Ctrl+C, a
crash, `progress` raising Cancelled) is completed by running it again. Chroma is written first
and the derived files after it, so they never hold what Chroma does not
(ocat.memory.storage.primary).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, cast

from ocat.errors import StoreError
from ocat.memory.embedding.embedders import has_passages
from ocat.memory.storage.batches import Row, batches, unique_by_id
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.passages import start_backfill
from ocat.memory.storage.prompt_vectors import Sides, other_sides, split_sides
from ocat.memory.storage.redaction import kept_rows, kept_titles
from ocat.memory.storage.remote_sync import log_change, share
from ocat.memory.storage.thread_titles import carry_titles
from ocat.memory.storage.version_finder import link_note_versions, link_versions
from ocat.records import Exchange, RecordKind, searched_text

if TYPE_CHECKING:
    from chromadb.api.types import Metadata, Where

    from ocat.memory.storage.parts import StoreParts

# How many records go to Chroma per call (each write has a cost of its own: writing a
# 700 KB file's 978 chunks 16 at a time took 4x as long as 256 at a time).
WRITE_BATCH = 256
# How many records are embedded per step of a write that reports progress (an add): it
# reports, and can be stopped, after each, about every half second at ~30 chunks/s on two
# cores (docs/PERFORMANCE.md).
EMBED_STEP = 16
# A write of up to this many new exchanges (a chat turn, a small import) embeds their passages
# with them; a bulk write (an import) leaves them to a background thread, so that importing runs
# at the model's rate on the texts and prompts (docs/PERFORMANCE.md, "Passage vectors").
PASSAGES_INLINE = 8
# Told how many records of a write have been handled (stored or found stored) so far.
Progress = Callable[[int], None]


def add_rows(
    store: StoreParts, kind: RecordKind, rows: Iterable[Row], progress: Progress | None = None,
    titles: Mapping[str, str] | None = None,
) -> int:
    """Store records of one kind in batches, skipping ids already stored; how many were added.
    `titles` names threads without a title, in the same write (MemoryStore.add_exchanges)."""
    # Rows stream through in batches: an import of any size holds one batch at a time,
    # and only records whose ids are not stored yet are embedded, EMBED_STEP at a time
    # when `progress` listens (told after each step). Each batch is one Chroma write of
    # what was embedded, made even when a step is interrupted (Ctrl+C, or `progress`
    # raising Cancelled): whole records are kept and a rerun adds the rest.
    added = handled = 0
    deferred = False
    step = EMBED_STEP if progress else WRITE_BATCH
    titles = kept_titles(store.secrets, titles)  # an imported thread's title is its first prompt, often
    for batch in batches(rows, WRITE_BATCH):
        # Embedded by length, as the embedder orders its input: then steps pad as little as
        # one call for the batch would (unordered steps of 16 embedded 10% slower). Written in
        # the order given, so an export imported again exports byte for byte the same.
        unique = unique_by_id(batch)
        present = set(store.existing_ids(kind, [r[0] for r in unique]))
        fresh = kept_rows(store.secrets, kind, [r for r in unique if r[0] not in present])  # no secret is kept
        by_length = sorted(range(len(fresh)), key=lambda i: len(fresh[i][1]))
        handled += len(batch) - len(fresh)
        vectors: dict[int, Sequence[float]] = {}
        sides: dict[int, Sides] = {}
        # An embedder that reads whole texts has no passages: nothing to leave for later.
        inline = len(fresh) <= PASSAGES_INLINE or not has_passages(store.embedder)
        deferred = deferred or (kind == "exchange" and not inline)
        try:
            for start in range(0, len(fresh), step):
                part = by_length[start : start + step]
                embedded, other = _embedded(store, kind, [fresh[i] for i in part], inline)
                vectors.update(zip(part, embedded))
                sides.update(zip(part, other))
                if progress:
                    progress(handled + len(vectors))
        finally:
            if vectors:
                done = sorted(vectors)
                _write(store, kind, [fresh[i] for i in done], [vectors[i] for i in done],
                            [sides[i] for i in done if i in sides], passages=inline, titles=titles)
        added += len(fresh)
        handled += len(fresh)
        if not fresh and progress:
            progress(handled)
    if deferred:
        start_backfill(store)
    return added


def replace_exchanges(store: StoreParts, exchanges: Iterable[Exchange]) -> int:
    """Write newer versions of stored exchanges over them, under the same ids (an agent's turn
    imported while its answer was still being written, found grown later): Chroma's record (text,
    vector, metadata: a key the new version lacks, such as its thread's title, is kept) and its
    rows in every derived file. An id not stored is left alone. Returns how many were replaced."""
    rows = unique_by_id([(e.exchange_id, searched_text(e.text), e.to_metadata()) for e in exchanges])
    present = set(store.existing_ids("exchange", [row[0] for row in rows]))
    rows = kept_rows(store.secrets, "exchange", [row for row in rows if row[0] in present])
    replace_rows(store, "exchange", rows)
    return len(rows)


def replace_rows(store: StoreParts, kind: RecordKind, rows: list[Row]) -> None:
    """Write rows over stored records of the same ids: text, vector, the metadata given (Chroma
    keeps the keys a row lacks), and their rows in every derived file, embedded again."""
    inline = len(rows) <= PASSAGES_INLINE or not has_passages(store.embedder)
    for start in range(0, len(rows), WRITE_BATCH):
        part = rows[start : start + WRITE_BATCH]
        vectors, sides = _embedded(store, kind, part, inline)
        _write(store, kind, part, vectors, sides, passages=inline, replace=True)
    if rows and kind == "exchange" and not inline:
        start_backfill(store)


def _embedded(
    store: StoreParts, kind: RecordKind, rows: list[Row], inline: bool
) -> tuple[list[Sequence[float]], list[Sides]]:
    """The rows' vectors, and for exchanges their other sides (their prompts, their passages past
    the model's window: ocat.memory.storage.prompt_vectors), embedded in the same call; a bulk
    write leaves the passages to the background (see PASSAGES_INLINE)."""
    texts = [row[1] for row in rows]
    if kind != "exchange":
        return list(store.embedder.embed(texts)), []
    other = [other_sides(store.embedder, row[1], row[2], passages=inline) for row in rows]
    embedded = store.embedder.embed(texts + [t for side in other for t in side])
    return list(embedded[: len(texts)]), split_sides(embedded[len(texts) :], other)


def _write(
    store: StoreParts,
    kind: RecordKind,
    rows: list[Row],
    vectors: list[Sequence[float]],
    sides: list[Sides],
    *,
    passages: bool = True,
    titles: Mapping[str, str] | None = None,
    replace: bool = False,
) -> None:
    if kind == "exchange":
        carry_titles(store, rows, titles)
    ids = [row[0] for row in rows]
    texts = [row[1] for row in rows]
    # Chroma refuses an empty metadata dict but takes None (its types do not say so): an
    # imported chunk may have none.
    metadatas = cast("list[Metadata]", [row[2] or None for row in rows])
    if replace:
        # The derived rows go first, as for a delete: a crash before they are written again
        # leaves Chroma holding more than its derived files, which the next open mends.
        try:
            store.prompts.delete(ids)
            store.lexical.delete(kind, ids)
        except DerivedFileError as exc:
            store.derived_failed(exc)
    try:
        write = store.collection(kind).update if replace else store.collection(kind).add
        write(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
    except Exception as exc:
        raise StoreError(f"cannot write to the memory store: {exc}") from exc
    # Chroma first: if we die between the writes, the next open sees the counts differ and
    # rebuilds the lexical index, or embeds the missing prompts and passages. A derived file
    # that fails here costs the write nothing: the records are stored, and it catches up.
    # Without `passages` the rows are marked for the background to make them.
    later = None if not passages else [s[1] for s in sides]
    try:
        if sides:
            store.prompts.write(ids[: len(sides)], [s[0] for s in sides], later)
        store.lexical.add(kind, rows)
    except DerivedFileError as exc:
        store.derived_failed(exc)
    # On a server, the other machines read these vectors instead of embedding them again, and
    # hear of the write at their next search (ocat.memory.storage.remote_sync).
    share(store, ids[: len(sides)], [s[0] for s in sides], later or [None] * len(sides))
    log_change(store, "update" if replace else "add", kind, ids)
    if store.link_versions and not replace:
        if kind == "exchange":
            prompts = [s[0] for s in sides] if len(sides) == len(rows) else [None] * len(rows)
            link_versions(store, rows, vectors, prompts)
        else:
            link_note_versions(store, rows, vectors)


def mark_documents(store: StoreParts, documents: Iterable[str], marks: Mapping[str, Any]) -> int:
    """Set metadata `marks` on every stored chunk of these documents (Chroma merges them into what
    each chunk holds); how many chunks were marked. User data, so it is in Chroma itself."""
    wanted = sorted({d for d in documents if d})
    if not wanted:
        return 0
    try:
        within = cast("Where", {"document_id": {"$in": wanted}})
        found = list(store.documents.get(where=within, include=[])["ids"])
        for start in range(0, len(found), WRITE_BATCH):
            part = found[start : start + WRITE_BATCH]
            store.documents.update(ids=part, metadatas=cast("list[Metadata]", [dict(marks) for _ in part]))
    except Exception as exc:
        raise StoreError(f"cannot mark a document in the memory store: {exc}") from exc
    return len(found)
