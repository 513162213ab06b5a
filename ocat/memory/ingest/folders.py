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

The walk follows links, but each real folder and file once (a link loop such as
`ln -s . loop` adds nothing twice), needs no recursion (a folder 1,000 levels deep is
fine), and skips a folder or file it cannot read with a warning, keeping what was added
from it before.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ocat.text.chunking import ChunkingSettings
from ocat.errors import InputFileError
from ocat.memory.ingest.documents import (
    FOLDER_SUFFIXES,
    PathAddResult,
    Source,
    document_chunks,
    plan_document,
    read_text_file,
)
from ocat.memory.storage.store import MemoryStore
from ocat.records import DocumentChunk

Notify = Callable[[str], None]

MARKDOWN_SUFFIXES = (".md", ".markdown")
# ~4 characters per token: sections are split past ~1000 tokens and never exceed ~1500.
# (The markdown strategy always splits along paragraphs and sentences.)
FOLDER_MARKDOWN = ChunkingSettings(
    strategy="markdown", chunk_size=4000, chunk_overlap=0, max_chunk_size=6000, preserve_sentence_boundaries=True
)
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


@dataclass
class FolderFiles:
    """A folder's text files, each reached once, and the paths on the way that could not be read."""

    files: list[Path] = field(default_factory=list)
    unreadable: list[Path] = field(default_factory=list)


def folder_files(folder: Path, notify: Notify | None = None) -> FolderFiles:
    """The folder's .md, .markdown and .txt files (hidden ones skipped), sorted, each once.

    Walked with an explicit stack, in sorted order, each real folder once however many links
    lead to it. Paths without links are walked first, so a file reached directly and through
    a link keeps its own name; of several links, the first in sorted order names it. A folder
    that cannot be listed is skipped (`notify` is told); the folder itself is an InputFileError.
    """
    walk = _Walk(folder, notify or (lambda _: None))
    walk.run()
    return FolderFiles(sorted(walk.files), walk.unreadable)


_Identity = tuple[int, int]  # (st_dev, st_ino): the same folder or file, whatever the path


class _Walk:
    """One walk of a folder; see `folder_files`."""

    def __init__(self, folder: Path, notify: Notify) -> None:
        self.folder = folder
        self.notify = notify
        self.files: list[Path] = []
        self.unreadable: list[Path] = []
        self._folders_seen: set[_Identity] = set()
        self._files_seen: set[_Identity] = set()
        self._stack: list[Path] = []
        self._links: list[Path] = []

    def run(self) -> None:
        try:
            self._enter([(self.folder, self.folder.stat())])
        except OSError as exc:
            raise InputFileError(f"cannot read {self.folder}: {exc.strerror or exc}") from exc
        # Rounds: every folder reachable without a link, then those behind the links found
        # so far, and so on: each round can only find folders not walked before, so it ends.
        while self._stack:
            while self._stack:
                self._list(self._stack.pop())
            links, self._links = sorted(self._links), []
            self._enter([found for found in map(self._follow, links) if found])

    def _enter(self, folders: list[tuple[Path, os.stat_result]]) -> None:
        """Put the folders not walked yet on the stack; of two paths to one folder, the first counts."""
        fresh = []
        for path, info in folders:
            identity = (info.st_dev, info.st_ino)
            if identity not in self._folders_seen:
                self._folders_seen.add(identity)
                fresh.append(path)
        self._stack.extend(reversed(fresh))  # the stack pops them in sorted order

    def _list(self, directory: Path) -> None:
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if directory == self.folder:
                raise InputFileError(f"cannot read {directory}: {exc.strerror or exc}") from exc
            self._skip(directory, f"cannot read the folder {directory}: {exc.strerror or exc}")
            return
        folders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = directory / entry.name
            try:
                if entry.is_symlink():
                    self._links.append(path)  # followed once every plain path is walked
                elif entry.is_dir(follow_symlinks=False):
                    folders.append((path, entry.stat(follow_symlinks=False)))
                elif entry.is_file(follow_symlinks=False):
                    self._take(path, entry.stat(follow_symlinks=False))
            except OSError as exc:
                self._skip(path, f"cannot read {path}: {exc.strerror or exc}")
        self._enter(folders)

    def _follow(self, link: Path) -> tuple[Path, os.stat_result] | None:
        """The folder a link leads to, to be walked; a file it leads to is taken at once."""
        try:
            info = link.stat()
        except OSError:
            return None  # a broken link, or one in a loop of links: nothing behind it to add
        if stat.S_ISDIR(info.st_mode):
            return link, info
        if stat.S_ISREG(info.st_mode):
            self._take(link, info)
        return None

    def _take(self, path: Path, info: os.stat_result) -> None:
        identity = (info.st_dev, info.st_ino)
        if path.suffix.lower() in FOLDER_SUFFIXES and identity not in self._files_seen:
            self._files_seen.add(identity)
            self.files.append(path)

    def _skip(self, path: Path, message: str) -> None:
        self.unreadable.append(path)
        self.notify(f"{message}; skipped (what was added from it before is kept)")


def read_folder(folder: Path, notify: Notify | None = None) -> tuple[list[tuple[Path, str]], list[Path]]:
    """Every text file of a folder read, and the paths skipped because they could not be read.

    A file the system will not let us read (or that went away meanwhile) is skipped with a
    warning; one that is not text (binary, too large) stops the add, as a named file does.
    """
    say = notify or (lambda _: None)
    walked = folder_files(folder, say)
    texts: list[tuple[Path, str]] = []
    unreadable = list(walked.unreadable)
    for file in walked.files:
        try:
            texts.append((file, read_text_file(file, say)))
        except InputFileError as exc:
            if not isinstance(exc.__cause__, OSError) and os.path.lexists(file):
                raise
            unreadable.append(file)
            say(f"{exc}; skipped (what was added from it before is kept)")
    return texts, unreadable


def add_folder_path(
    store: MemoryStore,
    folder: Path,
    options: ChunkingSettings,
    *,
    source: Source,
    progress: Callable[[Path], None] | None = None,
    notify: Notify | None = None,
    chunks_stored: Callable[[Path, int, int], None] | None = None,
) -> PathAddResult:
    """`add_path` for a folder: read all its files first, then store them (see `add_folder`)."""
    texts, unreadable = read_folder(folder, notify)
    if not texts and not unreadable:
        raise InputFileError(f"{folder} holds no .md or .txt files")
    for file, text in texts:
        if not text.strip() and notify:
            notify(f"{file} is empty; nothing to add from it")
    return add_folder(store, folder, texts, options, source=source, progress=progress,
                      chunks_stored=chunks_stored, unreadable=unreadable)


def add_folder(
    store: MemoryStore,
    folder: Path,
    texts: list[tuple[Path, str]],
    options: ChunkingSettings,
    *,
    source: Source,
    progress: Callable[[Path], None] | None = None,
    chunks_stored: Callable[[Path, int, int], None] | None = None,
    unreadable: Sequence[Path] = (),
) -> PathAddResult:
    """Store a folder's files (already read) and drop what was stored for files since deleted.

    `unreadable` are folders and files found but not read: what was stored from them stays.
    """
    results = []
    pending: list[DocumentChunk] = []
    for file, text in texts:
        chunks = folder_file_chunks(folder, file, text, options, source=source)
        absolute = str(file.resolve())
        # Earlier versions: the same file on disk, added from this or any folder, or on its own.
        previous = {"$or": [{"source_path": absolute}, {"source_file": absolute}]}
        result, missing = plan_document(store, chunks, previous=previous, source_path=absolute)
        if progress and missing:
            progress(file)  # only a file that brings chunks to store: an unchanged one is not being added
        results.append(result)
        pending.extend(missing)
    # The folder's new chunks go to the store together, in full batches: each write (an
    # embedding call and a Chroma add) costs about the same whatever its size, so one
    # write per small file was 13% of a folder add (docs/PERFORMANCE.md).
    report = (lambda done: chunks_stored(folder, done, len(pending))) if chunks_stored else None
    if report and pending:
        report(0)  # before the first embedding: a front end shows the total at once
    store.add_chunks(pending, progress=report)
    removed = _remove_gone(store, folder, [file for file, _ in texts], unreadable)
    return PathAddResult(source_path=str(folder), files=results, removed_chunks=removed)


def folder_file_chunks(
    folder: Path, file: Path, text: str, options: ChunkingSettings, *, source: Source
) -> list[DocumentChunk]:
    """A knowledge folder's file as the chunks it is stored as: markdown split at its headings,
    other text by `options`, each chunk with the metadata of the file's place in the folder."""
    relative = file.relative_to(folder).as_posix()
    extra = path_metadata(folder, file)
    markdown = file.suffix.lower() in MARKDOWN_SUFFIXES
    return document_chunks(
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


def _remove_gone(store: MemoryStore, folder: Path, read: list[Path], unreadable: Sequence[Path]) -> int:
    """Delete the chunks of files added from this folder before and no longer in it.

    A file or folder that could not be read this time is not gone: its chunks stay.
    """
    root = str(folder.resolve())
    kept = sorted({str(path.resolve()) for path in [*read, *unreadable]})
    where: dict[str, Any] = {"source_folder": root}
    if kept:
        where = {"$and": [where, {"source_path": {"$nin": kept}}]}
    hidden = [path.resolve() for path in unreadable]
    if not hidden:
        return store.delete_documents_where(where)
    # Whatever lies under an unreadable folder is unknown, so no file in it counts as gone.
    gone = [c.id for c in store.documents_where(where)
            if not any(Path(str(c.metadata.get("source_path", ""))).is_relative_to(h) for h in hidden)]
    return store.delete(gone) if gone else 0
