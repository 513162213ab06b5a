"""The add operations: a file or folder (`--add-to-vector-store`, `/vdoc`), a note (`/vadd`, MCP's
`remember`), and the one sentence that says what an add did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ocat.config.locations import display_path
from ocat import memory
from ocat.text.secrets import count_kinds
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.memory import Source
    from ocat.text.chunking import ChunkingSettings

# Progress of a long add: (label, chunks stored so far, chunks in all).
ChunkProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AddSummary:
    """What an add stored: chunks new and already there, replaced and removed, and warnings."""

    # The file or folder as given; None for a note.
    path: str | None
    added_chunks: int
    total_chunks: int
    replaced_chunks: int = 0
    removed_chunks: int = 0
    files: int = 1
    ids: tuple[str, ...] = ()
    # Warnings met on the way (an empty file, one not in UTF-8, one that could not be read).
    notes: tuple[str, ...] = ()
    # The secrets found in what was stored, one kind per secret (`memory.secrets`), and whether
    # they were kept as they were (`keep`) rather than replaced by placeholders.
    secrets: tuple[str, ...] = ()
    secrets_kept: bool = False

    @property
    def already_stored(self) -> int:
        """Chunks that were stored before and so were not added again."""
        return self.total_chunks - self.added_chunks

    def sentence(self, *, short_path: bool = False) -> str:
        """What was done, in one sentence, the same in every face (`short_path`: the home folder as ~)."""
        if self.path is None:
            if self.added_chunks == 0:
                return "Already remembered."
            return f"Remembered ({chunks(self.added_chunks)}{self._secrets_words()})."
        shown = display_path(self.path) if short_path else self.path
        text = f"Added {chunks(self.added_chunks)} from {shown}"
        if self.files > 1:
            text += f" ({self.files} files)"
        if self.already_stored:
            text += f"; {self.already_stored} already stored"
        if self.replaced_chunks:
            text += f"; {chunks(self.replaced_chunks)} of an earlier version removed"
        if self.removed_chunks:
            text += f"; {chunks(self.removed_chunks)} of files no longer in the folder removed"
        return text + self._secrets_words() + "."

    def _secrets_words(self) -> str:
        return secrets_clause(self.secrets, self.secrets_kept)

    def to_json(self) -> dict[str, Any]:
        """The JSON result of an add."""
        return {
            "source_path": self.path,
            "added_chunks": self.added_chunks,
            "total_chunks": self.total_chunks,
            "replaced_chunks": self.replaced_chunks,
            "removed_chunks": self.removed_chunks,
            "files": self.files,
            "secrets": list(self.secrets),
            "secrets_kept": self.secrets_kept,
        }


def chunks(count: int) -> str:
    """'1 chunk', '3 chunks'."""
    return count_of(count, "chunk")


def add_file_or_folder(
    store: MemoryStore,
    path: Path,
    settings: ChunkingSettings,
    *,
    source: Source,
    file_started: Callable[[Path], None] | None = None,
    chunks_stored: ChunkProgress | None = None,
    notify: Callable[[str], None] | None = None,
) -> AddSummary:
    """Add a file, or a folder's .md/.txt files (InputFileError if there is nothing to add).

    `file_started` hears of each file of a folder that brings chunks to store (an unchanged one is
    not named); `chunks_stored(file name, done, total)`
    follows each stored batch (and may raise Cancelled to stop between two); warnings go to
    `notify` as they happen and are kept in the summary's `notes`.
    """
    notes: list[str] = []
    seen: memory.SecretsSeen

    def note(message: str) -> None:
        notes.append(message)
        if notify is not None:
            notify(message)

    with memory.counting_secrets() as seen:
        outcome = memory.add_path(
            store,
            path,
            settings,
            source=source,
            progress=file_started,
            notify=note,
            chunks_stored=(lambda file, done, total: chunks_stored(file.name, done, total)) if chunks_stored else None,
        )
    return AddSummary(
        path=str(path),
        added_chunks=outcome.added_chunks,
        total_chunks=outcome.total_chunks,
        replaced_chunks=outcome.replaced_chunks,
        removed_chunks=outcome.removed_chunks,
        files=len(outcome.files),
        ids=tuple(i for f in outcome.files for i in f.ids),
        notes=tuple(notes),
        secrets=tuple(seen.kinds.elements()),
        secrets_kept=seen.mode == "keep",
    )


def add_note(
    store: MemoryStore,
    text: str,
    settings: ChunkingSettings,
    *,
    source: Source,
    extra: Mapping[str, Any] | None = None,
    credentials_only: bool = False,
) -> AddSummary:
    """Remember a text, chunked like a document; the same text twice is stored once.
    `extra` is metadata for every chunk. `credentials_only`: a text the user typed to be
    remembered (`/remember`) keeps passwords said in prose even under `memory.secrets: strict`."""
    with memory.counting_secrets(credentials_only=credentials_only) as seen:
        outcome = memory.add_text(store, text, settings, source=source, manual_entry=True, extra=extra)
    return AddSummary(path=None, added_chunks=outcome.added_chunks, total_chunks=outcome.total_chunks,
                      replaced_chunks=outcome.replaced_chunks, ids=outcome.ids,
                      secrets=tuple(seen.kinds.elements()), secrets_kept=seen.mode == "keep")


def secrets_clause(kinds: tuple[str, ...], kept: bool) -> str:
    """'; 2 secrets not kept (AWS key, password)', or kept as they were (`memory.secrets: keep`);
    '' when none was found."""
    if not kinds:
        return ""
    return f"; {count_of(len(kinds), 'secret')} {'kept as they were' if kept else 'not kept'} ({count_kinds(kinds)})"


def progress_printer(say: Callable[[str], None]) -> ChunkProgress:
    """A `chunks_stored` callback for a text face: "NAME: done/total chunks stored", throttled
    per name (the first batch, then at most once a second, and the last)."""
    printers: dict[str, Callable[[int, int], None]] = {}

    def report(label: str, done: int, total: int) -> None:
        if label not in printers:
            printers[label] = memory.throttled_progress(lambda d, t: say(f"{label}: {d}/{t} chunks stored"))
        printers[label](done, total)

    return report
