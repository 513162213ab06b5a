"""Adding text and documents to a store: read, chunk, give each chunk a content-derived id.

A chunk's id is the document's content hash plus its index, so adding the same content
twice stores nothing new, and an add that was cut short is completed by adding again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from ocat.text.chunking import ChunkingSettings, chunk_text, content_hash
from ocat.errors import InputFileError
from ocat.text.limits import stored_count
from ocat.memory.storage.store import WRITE_BATCH, MemoryStore
from ocat.records import SHORTENED_KEY, AddResult, DocumentChunk, now

# How a document arrived; an MCP `remember` may name its own source label instead.
Source = Literal["vdoc_command", "vadd_command", "remember_command", "cli", "import", "mcp"] | str
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


@dataclass(frozen=True)
class PartialDocument:
    """A document added from a file whose add was cut short: fewer chunks stored than it was
    split into. Only such a document can be finished (its file read again); a note or an MCP
    text has no file, and a shortened document (SHORTENED_KEY) is whole as it is."""

    document_id: str
    # The file it was added from, absolute, as its metadata records it (`source_path`).
    file: str
    stored_chunks: int
    total_chunks: int
    # The sha256 of the file's text when it was added: a file that changed since is another document.
    content_hash: str = ""
    # The knowledge folder it was added with (`source_folder`), or "" for a file added on its own.
    folder: str = ""
    # Its path as the user reads it (relative to its folder for a folder's file).
    label: str = ""


def added_from_file(metadata: Mapping[str, Any]) -> str | None:
    """The absolute path of the file a chunk was added from, or None for a text that came from
    no file (/vadd, /remember, MCP, an import): only a path recorded as absolute is ever read
    again, never a source label (`vadd_command`, `mcp`) taken for a path in the current folder."""
    for key in ("source_path", "source_file"):
        value = metadata.get(key)
        if isinstance(value, str) and value and Path(value).is_absolute():
            return value
    return None


@dataclass(frozen=True)
class DocumentCensus:
    """How many documents a store holds (not chunks), and which were stored only in part."""

    documents: int
    partial: list[PartialDocument]


def document_census(store: MemoryStore) -> DocumentCensus:
    """Count the documents (distinct `document_id`s) and find the partially stored ones, in one
    pass over the chunks' metadata (page by page; per document only a count is kept).

    Read from the primary store alone, so it holds when a derived file is missing or damaged.
    A chunk whose `document_id` is unusable (another client's metadata, an older import) counts
    as a document of its own; one whose `total_chunks` or `document_id` is unusable says
    nothing about completeness: such a document is never reported partial. Only a document
    added from a file can be partial: a text that came from no file, or a document shortened on
    purpose (SHORTENED_KEY), is whole as it is.
    """
    stored: dict[str, int] = {}
    declared: dict[str, PartialDocument] = {}
    whole: set[str] = set()
    unnamed = 0
    for _, metadata in store.iter_metadata("document"):
        document = metadata.get("document_id")
        if not isinstance(document, str) or not document:
            unnamed += 1
            continue
        stored[document] = stored.get(document, 0) + 1
        total = stored_count(metadata.get("total_chunks"), least=1)
        file = added_from_file(metadata)
        if total is None or file is None:
            continue
        if metadata.get(SHORTENED_KEY):
            whole.add(document)
        known = declared.get(document)
        if known is None or total > known.total_chunks:
            declared[document] = PartialDocument(
                document, file, 0, total, content_hash=str(metadata.get("content_hash") or ""),
                folder=str(metadata.get("source_folder") or ""),
                label=str(metadata.get("source_file") or file),
            )
    partial = [
        replace(found, stored_chunks=stored[document])
        for document, found in sorted(declared.items())
        if document not in whole and stored[document] < found.total_chunks
    ]
    return DocumentCensus(documents=len(stored) + unnamed, partial=partial)


def partial_documents(store: MemoryStore) -> list[PartialDocument]:
    """Every document added from a file and only partly stored (adding it again completes it);
    see `document_census`."""
    return document_census(store).partial


def document_chunks(
    text: str,
    options: ChunkingSettings,
    *,
    source: Source,
    source_file: str = "",
    manual_entry: bool = False,
    date_added: float | None = None,
    extra: Mapping[str, Any] | None = None,
    identity: str | None = None,
    title: str | None = None,
) -> list[DocumentChunk]:
    """Chunk a text and attach the metadata every stored chunk carries (plus `extra`, which
    never overrides those fields).

    `identity` is what, besides the text, makes the document (default `source_file`);
    `title` heads each markdown chunk (default the file's name).
    """
    digest = content_hash(text)
    key = document_key(text, source_file if identity is None else identity)
    filename = title if title is not None else (Path(source_file).name if source_file else None)
    pieces = chunk_text(text, options, filename=filename)
    added_at = now() if date_added is None else date_added
    chunks = []
    for piece in pieces:
        metadata: dict[str, Any] = {
            **(extra or {}),
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
            # Lower-case: it is matched by filters (`--where section=...`), not read.
            metadata["section"] = piece.section.lower()
        chunks.append(DocumentChunk(id=chunk_id(key, piece.index), text=piece.text, metadata=metadata))
    return chunks


def add_text(
    store: MemoryStore,
    text: str,
    options: ChunkingSettings,
    *,
    source: Source = "vadd_command",
    source_file: str = "",
    manual_entry: bool = True,
    progress: Callable[[int, int], None] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> AddResult:
    """Store a text as memory, chunked by `options`; the same text twice is stored once.

    `extra` is metadata added to every chunk (it cannot replace the fields ocat sets).
    Chunks are embedded a few at a time (`EMBED_STEP`) and written a batch at a time;
    `progress(done, total)` is called before the first step and after each, and may raise
    (Cancelled) to stop there, what was embedded being written first.
    Cut short (a crash, Ctrl+C), the document stays detectably partial (`partial_documents`)
    and adding it again stores only the missing chunks.
    """
    chunks = document_chunks(
        text, options, source=source, source_file=source_file, manual_entry=manual_entry, extra=extra
    )
    previous = {"$or": [{"source_file": source_file}, {"source_path": source_file}]} if source_file else None
    return store_document(store, chunks, previous=previous, source_path=source_file or None, progress=progress)


def store_document(
    store: MemoryStore,
    chunks: list[DocumentChunk],
    *,
    previous: dict[str, Any] | None,
    source_path: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> AddResult:
    """Store one document's chunks, idempotently; `previous` matches the chunks of the same
    file's earlier versions, which are deleted first (an edited file replaces its old self)."""
    result, missing = plan_document(store, chunks, previous=previous, source_path=source_path)
    already = len(chunks) - len(missing)
    report = (lambda done: progress(already + done, len(chunks))) if progress else None
    if report and missing:
        report(0)  # before the first embedding: a front end shows the total at once
    store.add_chunks(missing, progress=report)
    return result


def plan_document(
    store: MemoryStore, chunks: list[DocumentChunk], *, previous: dict[str, Any] | None, source_path: str | None
) -> tuple[AddResult, list[DocumentChunk]]:
    """What storing a document comes to: its outcome, and the chunks still to write.

    Earlier versions of the file, and a partial add made with other chunking settings, are
    deleted here; the caller writes the chunks returned (a folder pools them across files,
    since every write has a cost of its own whatever its size).
    """
    if not chunks:
        # An emptied file: what it held before is gone too.
        replaced = store.delete_documents_where(previous) if previous else 0
        return AddResult(source_path=source_path, added_chunks=0, total_chunks=0, replaced_chunks=replaced), []
    key = chunks[0].metadata["document_id"]
    replaced = 0
    if previous:
        replaced = store.delete_documents_where({"$and": [previous, {"document_id": {"$ne": key}}]})
    present = store.documents_where({"document_id": key})
    if present:
        declared = {stored_count(c.metadata.get("total_chunks")) for c in present}
        if declared == {len(present)}:
            # Complete already (perhaps chunked differently once): never store it twice.
            ids = tuple(c.id for c in sorted(present, key=lambda c: stored_count(c.metadata.get("chunk_index")) or 0))
            return AddResult(source_path=source_path, added_chunks=0, total_chunks=len(present), ids=ids), []
        if not {c.id for c in present} <= {c.id for c in chunks}:
            # A partial add made with other chunking settings: start that document over.
            store.delete(sorted(c.id for c in present))
            present = []
    stored = {c.id for c in present}
    missing = [c for c in chunks if c.id not in stored]
    result = AddResult(
        source_path=source_path,
        added_chunks=len(missing),
        total_chunks=len(chunks),
        replaced_chunks=replaced,
        ids=tuple(c.id for c in chunks),
    )
    return result, missing


def read_text_file(path: Path, notify: Callable[[str], None] | None = None) -> str:
    """A file's text, or an InputFileError saying plainly why it cannot be read.

    UTF-8 (with or without a BOM) and UTF-16 with a BOM are read as such. Other bytes are
    not dropped: the text is decoded as Windows-1252 (Latin-1 where that fails), and
    `notify` is told.
    """
    if not path.exists():  # the one check: `add_path` and the faces leave it to here
        raise InputFileError(f"no such file or folder: {path}")
    if not path.is_file():
        raise InputFileError(f"not a file: {path}")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            mib = 1024 * 1024
            raise InputFileError(f"{path} is {size // mib} MiB; the limit is {MAX_FILE_BYTES // mib} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputFileError(f"{path} starts like UTF-16 text but is not (byte {exc.start})") from exc
    if b"\x00" in data[:8192]:
        raise InputFileError(f"{path} looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    for encoding in ("cp1252", "latin-1"):  # latin-1 decodes any byte, so this always returns
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if notify:
            notify(f"{path} is not UTF-8 (byte {first_bad}); read it as {_ENCODING_NAMES[encoding]}")
        return text
    raise AssertionError("unreachable: latin-1 decodes every byte")


_ENCODING_NAMES = {"cp1252": "Windows-1252", "latin-1": "Latin-1"}


@dataclass(frozen=True)
class PathAddResult:
    """The outcome of adding a file or a folder."""

    source_path: str
    files: list[AddResult]
    # Chunks of files that were added from this folder before and are gone from it now.
    removed_chunks: int = 0

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


def throttled_progress(say: Callable[[int, int], None], every: float = 1.0) -> Callable[[int, int], None]:
    """A progress callback for long writes: passes on the first call (an add's is before
    anything is embedded), then at most one call per `every` seconds, and the last; silent
    for a write of one batch (`WRITE_BATCH`)."""
    last = [0.0]

    def report(done: int, total: int) -> None:
        moment = time.monotonic()
        if total <= WRITE_BATCH or (last[0] and done < total and moment - last[0] < every):
            return
        last[0] = moment
        say(done, total)

    return report
