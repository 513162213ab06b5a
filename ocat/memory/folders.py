"""Knowledge folders: a folder of notes added as a whole, kept in step with the disk when re-added.

Markdown files are split at their `## ` headings, each chunk headed by the file's path in
the folder (and the heading), in chunks of roughly 500-1500 tokens; `.txt` files use the
configured chunking. Every chunk carries metadata taken from its path, so searches can be
filtered on it (`--where`, the MCP filters):

- `source_file`: the path relative to the folder (`ACME-OCD-042/plan.md`), `filename`,
  `source_path` (absolute) and `source_folder` (the folder added, absolute);
- `section`: the `## ` heading, lower-case;
- `prefix` and `ocd_number` when a folder on the way follows the session-folder naming
  `PREFIX-OCD-NNN` (`ACME-OCD-042` -> prefix `ACME`, ocd_number 42, an integer so that
  `042` and `42` are the same session; the innermost such folder wins);
- `content_hash`, the file's sha256, as for every document.

Re-adding the folder embeds only files whose content changed, and removes the chunks of
files that were added from it before and are no longer there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from ocat.chunking import ChunkingOptions
from ocat.memory.ingest import PathAddResult, Source, document_chunks, plan_document
from ocat.memory.store import MemoryStore
from ocat.models import DocumentChunk

MARKDOWN_SUFFIXES = (".md", ".markdown")
# ~4 characters per token: sections are split past ~1000 tokens and never exceed ~1500.
FOLDER_MARKDOWN = ChunkingOptions(strategy="markdown", chunk_size=4000, chunk_overlap=0, max_chunk_size=6000)
_SESSION_FOLDER = re.compile(r"([A-Za-z][A-Za-z0-9]*)-OCD-(\d+)", re.IGNORECASE)


def path_metadata(folder: Path, file: Path) -> dict[str, Any]:
    """The metadata a file's place in a knowledge folder gives each of its chunks."""
    relative = file.relative_to(folder)
    metadata: dict[str, Any] = {
        "source_path": str(file.resolve()),
        "source_folder": str(folder.resolve()),
        "filename": file.name,
    }
    # The folder's own name counts too: `ocat --add-to-vector-store notes/ACME-OCD-042`.
    for part in [folder.resolve().name, *relative.parts[:-1]]:
        match = _SESSION_FOLDER.fullmatch(part)
        if match:
            metadata["prefix"] = match.group(1).upper()
            metadata["ocd_number"] = int(match.group(2))
    return metadata


def add_folder(
    store: MemoryStore,
    folder: Path,
    texts: list[tuple[Path, str]],
    options: ChunkingOptions,
    *,
    source: Source,
    progress: Callable[[Path], None] | None = None,
    chunks_stored: Callable[[Path, int, int], None] | None = None,
) -> PathAddResult:
    """Store a folder's files (already read) and drop what was stored for files since deleted."""
    results = []
    pending: list[DocumentChunk] = []
    for file, text in texts:
        if progress:
            progress(file)
        relative = file.relative_to(folder).as_posix()
        extra = path_metadata(folder, file)
        markdown = file.suffix.lower() in MARKDOWN_SUFFIXES
        chunks = document_chunks(
            text,
            FOLDER_MARKDOWN if markdown else options,
            source=source,
            source_file=relative,
            manual_entry=False,
            extra=extra,
            # Folder and path make the document: one file is one document whatever else holds its text.
            identity=f"{extra['source_folder']}\0{relative}",
            title=relative,
        )
        # Earlier versions: the same file on disk, added from this or any folder, or on its own.
        previous = {"$or": [{"source_path": extra["source_path"]}, {"source_file": extra["source_path"]}]}
        result, missing = plan_document(store, chunks, previous=previous, source_path=extra["source_path"])
        results.append(result)
        pending.extend(missing)
    # The folder's new chunks go to the store together, in full batches: each write (an
    # embedding call and a Chroma add) costs about the same whatever its size, so one
    # write per small file was 13% of a folder add (docs/PERFORMANCE.md).
    report = (lambda done: chunks_stored(folder, done, len(pending))) if chunks_stored else None
    store.add_chunks(pending, progress=report)
    root = str(folder.resolve())
    on_disk = sorted({str(file.resolve()) for file, _ in texts})
    removed = store.delete_documents_where({"$and": [{"source_folder": root}, {"source_path": {"$nin": on_disk}}]})
    return PathAddResult(source_path=str(folder), files=results, removed_chunks=removed)
