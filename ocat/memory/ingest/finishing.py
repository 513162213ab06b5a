"""Finishing a document whose add was cut short (`ocat --repair-store`), by adding only what is missing.

A repair never deletes what the user kept: a partial document is finished only when its file
still holds the very text it was added from, chunked the same way, so the chunks written are
exactly the ones missing and none stored is touched. Otherwise it is kept as it is, marked
shortened (SHORTENED_KEY), and the user is told how to replace it.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from ocat.text.chunking import ChunkingSettings, content_hash
from ocat.errors import InputFileError
from ocat.memory.ingest.documents import PartialDocument, Source, read_text_file
from ocat.memory.ingest.folders import folder_file_chunks
from ocat.memory.ingest.paths import file_chunks
from ocat.memory.storage.store import MemoryStore
from ocat.records import SHORTENED_BY_REPAIR


class Finished(Enum):
    """What became of a partial document, in the words a repair prints after its name."""

    FINISHED = "finished: its missing chunks were added from its file"
    FILE_GONE = "kept as it is: its file is gone"
    FILE_UNREADABLE = "kept as it is: its file cannot be read"
    FILE_CHANGED = "kept as it is: its file has changed since it was added (add the file again to replace it)"
    OTHER_CHUNKING = "kept as it is: it was chunked with other settings (add the file again to replace it)"

    @property
    def finished(self) -> bool:
        """Whether the document is whole now."""
        return self is Finished.FINISHED


def finish_document(store: MemoryStore, partial: PartialDocument, options: ChunkingSettings) -> Finished:
    """Add the chunks a partial document lacks when its file still holds the text it was added
    from; else mark it kept as it is. Nothing stored is deleted or changed but that mark."""
    outcome = _finish(store, partial, options)
    if not outcome.finished:
        keep_as_it_is(store, partial.document_id)
    return outcome


def _finish(store: MemoryStore, partial: PartialDocument, options: ChunkingSettings) -> Finished:
    file = Path(partial.file)
    if not file.is_file():
        return Finished.FILE_GONE
    try:
        text = read_text_file(file)
    except InputFileError:
        return Finished.FILE_UNREADABLE
    if partial.content_hash and content_hash(text) != partial.content_hash:
        return Finished.FILE_CHANGED
    present = store.documents_where({"document_id": partial.document_id})
    source: Source = str(present[0].metadata.get("source") or "cli") if present else "cli"
    try:
        if partial.folder:
            chunks = folder_file_chunks(Path(partial.folder), file, text, options, source=source)
        else:
            chunks = file_chunks(file, text, options, source=source)
    except ValueError:  # the file is no longer under its folder (a link that moved)
        return Finished.FILE_CHANGED
    have = {c.id for c in present}
    expected = {c.id for c in chunks}
    same_document = bool(chunks) and chunks[0].metadata.get("document_id") == partial.document_id
    if not same_document or not have <= expected or len(chunks) != partial.total_chunks:
        return Finished.OTHER_CHUNKING
    store.add_chunks([c for c in chunks if c.id not in have])
    return Finished.FINISHED


def keep_as_it_is(store: MemoryStore, document_id: str) -> int:
    """Mark every stored chunk of a document shortened by a repair (whole as it is); how many."""
    return store.mark_shortened([document_id], SHORTENED_BY_REPAIR)
