"""Exchanges memory could not take, kept in a file until a later start writes them.

A chat keeps what memory could not store (the store failed, or refused one write) and tries
again on every turn. What is still waiting when the chat ends goes to a file under the
state folder, one per session, in the `--import-memory` format; the next start on the same
store writes it to memory and removes the file. Nothing said in a chat is lost because
memory was down when it ended.
"""

from __future__ import annotations

import hashlib
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


def write_unsaved_file(settings: Settings, exchanges: Sequence[Exchange], session_id: str) -> Path:
    """Write exchanges to this session's file in the store's kept folder (replacing an earlier
    version of it whole: a crash mid-write leaves the previous file); returns the file."""
    folder = unsaved_folder(settings)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as out:
        for exchange in exchanges:
            # ASCII: the file may be `cat` to a terminal, and escapes are read back exactly.
            out.write(json.dumps({"kind": "exchange", **exchange.to_record()}, ensure_ascii=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    return path


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
