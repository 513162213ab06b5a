"""Adding text and documents to a store: read, chunk, give each chunk a content-derived id.

A chunk's id is the document's content hash plus its index, so adding the same content
twice stores nothing new, and an add that was cut short is completed by adding again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from ocat.chunking import ChunkingOptions, chunk_text, content_hash
from ocat.errors import InputFileError
from ocat.memory.store import WRITE_BATCH, MemoryStore
from ocat.models import AddResult, DocumentChunk, now

Source = Literal["vdoc_command", "vadd_command", "cli", "import"]
# The file types a folder add picks up; a single named file may be any UTF-8 text.
FOLDER_SUFFIXES = (".md", ".markdown", ".txt")
# A file larger than this is refused rather than read into memory whole.
MAX_FILE_BYTES = 64 * 1024 * 1024


def document_key(text: str, source_file: str = "") -> str:
    """A document's identity: its content, and the file it came from (if any).

    The same text in two files is two documents, so editing one never touches the
    other; the same text added twice from one place is one document.
    """
    return content_hash(f"{source_file}\0{text}") if source_file else content_hash(text)


def chunk_id(key: str, index: int) -> str:
    """The id of chunk `index` of the document whose key is `key`."""
    return f"doc-{key[:32]}-{index}"


def document_chunks(
    text: str,
    options: ChunkingOptions,
    *,
    source: Source,
    source_file: str = "",
    manual_entry: bool = False,
    date_added: float | None = None,
) -> list[DocumentChunk]:
    """Chunk a text and attach the metadata every stored chunk carries."""
    digest = content_hash(text)
    key = document_key(text, source_file)
    filename = Path(source_file).name if source_file else None
    pieces = chunk_text(text, options, filename=filename)
    added_at = now() if date_added is None else date_added
    chunks = []
    for piece in pieces:
        metadata: dict[str, Any] = {
            "kind": "document",
            "source": source,
            "source_file": source_file,
            "chunk_index": piece.index,
            "total_chunks": len(pieces),
            "manual_entry": manual_entry,
            "content_hash": digest,
            "document_id": key,
            "date_added": added_at,
        }
        if piece.section:
            metadata["section"] = piece.section
        chunks.append(DocumentChunk(id=chunk_id(key, piece.index), text=piece.text, metadata=metadata))
    return chunks


def add_text(
    store: MemoryStore,
    text: str,
    options: ChunkingOptions,
    *,
    source: Source = "vadd_command",
    source_file: str = "",
    manual_entry: bool = True,
) -> AddResult:
    """Store a text as memory, chunked by `options`; the same text twice is stored once."""
    result, missing = _plan(store, text, options, source=source, source_file=source_file, manual_entry=manual_entry)
    store.add_chunks(missing)
    return result


def _plan(
    store: MemoryStore, text: str, options: ChunkingOptions, *, source: Source, source_file: str, manual_entry: bool
) -> tuple[AddResult, list[DocumentChunk]]:
    """What adding a text comes to: its outcome, and the chunks still to store.

    Earlier versions of the file, and a partial add made with other chunking settings,
    are deleted here; the caller stores the chunks returned.
    """
    chunks = document_chunks(text, options, source=source, source_file=source_file, manual_entry=manual_entry)
    if not chunks:
        return AddResult(source_path=source_file or None, added_chunks=0, total_chunks=0), []
    key = chunks[0].metadata["document_id"]
    replaced = 0
    if source_file:
        # The same file with other content is an edit: its old chunks go.
        replaced = store.delete_documents_where({"$and": [{"source_file": source_file}, {"document_id": {"$ne": key}}]})
    present = store.documents_where({"document_id": key})
    if present:
        declared = {int(c.metadata.get("total_chunks", -1)) for c in present}
        if declared == {len(present)}:
            # Complete already (perhaps chunked differently once): never store it twice.
            return AddResult(source_path=source_file or None, added_chunks=0, total_chunks=len(present)), []
        if not {c.id for c in present} <= {c.id for c in chunks}:
            # A partial add made with other chunking settings: start that document over.
            store.delete(sorted(c.id for c in present))
            present = []
    stored = {c.id for c in present}
    missing = [c for c in chunks if c.id not in stored]
    result = AddResult(
        source_path=source_file or None, added_chunks=len(missing), total_chunks=len(chunks), replaced_chunks=replaced
    )
    return result, missing


def read_text_file(path: Path) -> str:
    """A file's text, or an InputFileError saying plainly why it cannot be read."""
    if not path.exists():
        raise InputFileError(f"no such file: {path}")
    if not path.is_file():
        raise InputFileError(f"not a file: {path}")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputFileError(f"{path} is {size // (1024 * 1024)} MiB; the limit is {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if b"\x00" in data[:8192]:
        raise InputFileError(f"{path} looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path} is not UTF-8 text (byte {exc.start})") from exc


def files_to_add(path: Path) -> list[Path]:
    """The file itself, or a folder's text files (hidden folders and files skipped), sorted."""
    if path.is_dir():
        return sorted(p for p in _walk_visible(path) if p.suffix.lower() in FOLDER_SUFFIXES)
    return [path]


def _walk_visible(folder: Path) -> Iterator[Path]:
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from _walk_visible(entry)
        elif entry.is_file():
            yield entry


@dataclass(frozen=True)
class PathAddResult:
    """The outcome of adding a file or a folder."""

    source_path: str
    files: list[AddResult]

    @property
    def added_chunks(self) -> int:
        """Chunks newly stored, over all files."""
        return sum(r.added_chunks for r in self.files)

    @property
    def total_chunks(self) -> int:
        """Chunks the files make, stored now or before."""
        return sum(r.total_chunks for r in self.files)

    @property
    def replaced_chunks(self) -> int:
        """Chunks of earlier versions of the files that were removed."""
        return sum(r.replaced_chunks for r in self.files)


def add_path(
    store: MemoryStore,
    path: Path,
    options: ChunkingOptions,
    *,
    source: Source = "cli",
    progress: Callable[[Path], None] | None = None,
) -> PathAddResult:
    """Add a file, or every text file in a folder; every file is read before any is stored."""
    if not path.exists():
        raise InputFileError(f"no such file or folder: {path}")
    files = files_to_add(path)
    if path.is_dir() and not files:
        raise InputFileError(f"{path} holds no .md or .txt files")
    texts = [(f, read_text_file(f)) for f in files]
    results = []
    pending: list[DocumentChunk] = []
    for file, text in texts:
        if progress:
            progress(file)
        result, missing = _plan(store, text, options, source=source, source_file=str(file.resolve()), manual_entry=False)
        results.append(result)
        pending.extend(missing)
        # Chunks of many small files go to the store together, in full batches: each
        # write (an embedding call and a Chroma add) has a cost of its own, whatever its size.
        full = len(pending) - len(pending) % WRITE_BATCH
        if full:
            store.add_chunks(pending[:full])
            pending = pending[full:]
    store.add_chunks(pending)
    return PathAddResult(source_path=str(path), files=results)
