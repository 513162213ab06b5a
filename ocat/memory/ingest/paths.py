"""The one ingest path: a file is a document, a folder a knowledge folder (`--add-to-vector-store`, `/vdoc`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ocat.text.chunking import ChunkingSettings
from ocat.memory.ingest.documents import PathAddResult, Source, document_chunks, read_text_file, store_document
from ocat.memory.ingest.folders import add_folder_path
from ocat.memory.storage.store import MemoryStore
from ocat.records import DocumentChunk


def add_path(
    store: MemoryStore,
    path: Path,
    options: ChunkingSettings,
    *,
    source: Source = "cli",
    progress: Callable[[Path], None] | None = None,
    notify: Callable[[str], None] | None = None,
    chunks_stored: Callable[[Path, int, int], None] | None = None,
) -> PathAddResult:
    """Add a file, or every text file in a folder; every file is read before any is stored.

    This is the one ingest path: `--add-to-vector-store` and `/vdoc` both call it.
    A folder is a knowledge folder (see `ocat.memory.ingest.folders`): markdown split at `## `
    headings, metadata from each file's path, and files gone from it removed from memory.
    `progress` is told each file of a folder that has chunks to store (not an unchanged one);
    `notify` gets warnings (a file that is empty, or not UTF-8); `chunks_stored(file, done,
    total)` is told the total before anything is embedded, then follows each written step.
    """
    if path.is_dir():
        return add_folder_path(store, path, options, source=source, progress=progress, notify=notify,
                               chunks_stored=chunks_stored)
    file, text = path, read_text_file(path, notify)
    if not text.strip() and notify:
        notify(f"{file} is empty; nothing to add from it")
    absolute = str(file.resolve())
    chunks = file_chunks(file, text, options, source=source)
    previous = {"$or": [{"source_file": absolute}, {"source_path": absolute}]}
    result = store_document(
        store, chunks, previous=previous, source_path=absolute,
        progress=(lambda done, total: chunks_stored(file, done, total)) if chunks_stored else None,
    )
    return PathAddResult(source_path=str(path), files=[result])


def file_chunks(file: Path, text: str, options: ChunkingSettings, *, source: Source) -> list[DocumentChunk]:
    """A file added on its own, as the chunks it is stored as: the document is the file's
    absolute path and its text (the same file added again is the same document)."""
    absolute = str(file.resolve())
    return document_chunks(text, options, source=source, source_file=absolute, manual_entry=False,
                           extra={"source_path": absolute, "filename": file.name})
