"""Exchanges memory could not take, kept in a file until a later start writes them.

A chat keeps what memory could not store (the store failed, or refused one write) and tries
again on every turn. What is still waiting when the chat ends (those, and any exchange whose
write is under way) goes to a file under the state folder, one per session, in the
`--import-memory` format; the next start on the same store writes it to memory and removes the
file. Nothing said in a chat is lost because memory was down, or slow, when it ended.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ocat.errors import OcatError
from ocat.config.locations import display_path, state_dir
from ocat.text.terminal import count_of
from ocat import memory
from ocat.records import Exchange

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import MemoryStore


def unsaved_folder(settings: Settings) -> Path:
    """Where the exchanges kept for the configured store wait: one folder per store (its
    location and collection), so a start on another store never writes them there."""
    identity = f"{memory.location_for(settings).describe()}\0{settings.vector_store.collection}"
    return state_dir() / "unsaved" / hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# Each write of a kept file has a temporary name of its own: a signal handler that keeps the
# exchanges may run in the middle of another such write in the same thread (ocat.process_end).
_writes = itertools.count()


def write_unsaved_file(settings: Settings, exchanges: Sequence[Exchange], session_id: str) -> Path:
    """Write exchanges to this session's file in the store's kept folder (replacing an earlier
    version of it whole, synced to disk: a crash mid-write leaves the previous file); returns the file."""
    folder = unsaved_folder(settings)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    partial = path.with_name(f"{session_id}.{os.getpid()}.{next(_writes)}.partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            for exchange in exchanges:
                # ASCII: the file may be `cat` to a terminal, and escapes are read back exactly.
                out.write(json.dumps({"kind": "exchange", **exchange.to_record()}, ensure_ascii=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)  # gone already, unless the write failed or was cut short
    return path


@dataclass(frozen=True)
class Spooled:
    """What a session's kept file holds after `spool_exchanges`: how many exchanges, where (None:
    there were none, and no file is left), or why it could not be written."""

    count: int = 0
    path: Path | None = None
    failure: str = ""


def spool_exchanges(settings: Settings, exchanges: Sequence[Exchange], session_id: str) -> Spooled:
    """Make this session's kept file hold exactly `exchanges`: written (and synced) when there are
    any, removed when there are none. Run again and again as a chat ends; never raises."""
    folder = unsaved_folder(settings)
    try:
        if not exchanges:
            (folder / f"{session_id}.jsonl").unlink(missing_ok=True)
            return Spooled()
        return Spooled(len(exchanges), write_unsaved_file(settings, exchanges, session_id))
    except OSError as exc:
        return Spooled(len(exchanges), failure=exc.strerror or str(exc))


def spooled_words(kept: Spooled, reason: str | None) -> str:
    """What became of exchanges memory had not taken when a chat ended, kept in a file or not."""
    what = f"{count_of(kept.count, 'exchange')} of this chat could not be written to memory"
    what += f" ({reason})" if reason else ""
    if kept.path is None:
        return f"{what}, nor kept in a file ({kept.failure}): {'it is' if kept.count == 1 else 'they are'} lost."
    them = "it" if kept.count == 1 else "them"
    return f"{what}: kept in {display_path(kept.path)}; the next start on this store writes {them} to memory."


@dataclass(frozen=True)
class Recovered:
    """What a start wrote of the exchanges earlier chats kept: how many, from how many files,
    and the files it could not write (left in place for the next start)."""

    exchanges: int = 0
    files: int = 0
    failed: tuple[str, ...] = ()

    def sentence(self) -> str | None:
        """What to tell the user, or None when there was nothing to write."""
        parts = []
        if self.files:
            parts.append(f"{count_of(self.exchanges, 'exchange')} kept by an earlier chat "
                         f"{'was' if self.exchanges == 1 else 'were'} written to memory")
        if self.failed:
            parts.append(f"{count_of(len(self.failed), 'kept file')} could not be written yet "
                         f"({display_path(self.failed[0])}); the next start tries again")
        return "; ".join(parts) + "." if parts else None


def save_unsaved_files(settings: Settings, store: MemoryStore) -> Recovered:
    """Write every file kept for this store, then remove it; a file that fails stays (an
    exchange already written is skipped next time: ids are kept)."""
    folder = unsaved_folder(settings)
    if not folder.is_dir():
        return Recovered()
    written = files = 0
    failed: list[str] = []
    for path in sorted(folder.glob("*.jsonl")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            records = [memory.parse_line(line, n, path) for n, line in enumerate(lines, start=1) if line.strip()]
            exchanges = [r for r in records if isinstance(r, Exchange)]
            store.add_exchanges(exchanges)
            path.unlink()
        except (OcatError, OSError, UnicodeDecodeError):
            failed.append(str(path))
            continue
        written += len(exchanges)
        files += 1
    return Recovered(written, files, tuple(failed))
