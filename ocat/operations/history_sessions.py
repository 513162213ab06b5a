"""Which coding-agent session files an import has read, so a rerun over the same folder skips
the unchanged ones without opening them.

A file is skipped only when its size and its modification time are both what they were when it
was read, and the last exchange read from it is still in the store: a session that grew, a file
rewritten to the same size, or a store emptied since are read again. The ledger is derived
state (in ocat's state folder, one per store): deleted or damaged, it is rebuilt by reading
every file once more, which the derived ids make harmless.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocat.config.locations import display_path, state_dir
from ocat.errors import InputFileError, UsageError
from ocat.history_import import AGENT_FORMATS, FolderExports, default_folder, session_files

if TYPE_CHECKING:
    from ocat.history_import import SessionFile
    from ocat.memory import MemoryStore

LEDGER_FILE = "imported-sessions.json"
# Ids asked of the store in one read (well under SQLite's limit on a query's variables).
_READ_IDS = 5000


def ledger_path() -> Path:
    """Where the ledgers are kept (one file, a section per store)."""
    return state_dir() / LEDGER_FILE


class SessionLedger:
    """The session files one store has imported: path -> [size, mtime_ns, last exchange id]."""

    def __init__(self, store: MemoryStore, path: Path | None = None) -> None:
        self.store = store
        self.path = path or ledger_path()
        location = store.location
        where = str(location.path) if location.path is not None else f"{location.host}:{location.port}"
        self.key = f"{where}#{store.name}"
        self.files: dict[str, list[Any]] = {}
        self.changed = False
        # The ledger's last exchange ids found in the store, read at the first question: one read
        # for the whole folder, not one per file (a rerun over thousands of sessions asked
        # Chroma once per session, ~2 ms each).
        self._stored: set[str] | None = None
        section = _read(self.path).get(self.key)
        if isinstance(section, dict):
            self.files = {name: entry for name, entry in section.items() if _valid(entry)}

    @classmethod
    def of(cls, store: MemoryStore) -> SessionLedger:
        """The ledger of `store`."""
        return cls(store)

    def unchanged(self, file: SessionFile) -> bool:
        """Whether `file` is as it was when its exchanges were written, which are still stored
        (as the store was at this ledger's first question)."""
        entry = self.files.get(str(file.path))
        if entry is None or entry[0] != file.size or entry[1] != file.mtime_ns:
            return False
        last = entry[2]
        return not last or last in self._stored_last_ids()

    def _stored_last_ids(self) -> set[str]:
        if self._stored is None:
            ids = sorted({entry[2] for entry in self.files.values() if entry[2]})
            self._stored = set()
            for start in range(0, len(ids), _READ_IDS):
                self._stored.update(self.store.existing_ids("exchange", ids[start : start + _READ_IDS]))
        return self._stored

    def remember(self, file: SessionFile, last_exchange_id: str) -> None:
        """Note `file` as read, as it was then (its size and time were taken before reading)."""
        self.files[str(file.path)] = [file.size, file.mtime_ns, last_exchange_id]
        self.changed = True

    def save(self) -> None:
        """Write the ledger (the other stores' sections kept); a failure only costs a slower rerun."""
        if not self.changed:
            return
        try:
            everything = _read(self.path)
            everything[self.key] = self.files
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".ledger-", dir=self.path.parent)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(everything, out)
            os.replace(temporary, self.path)
            self.changed = False
        except OSError:
            pass  # the next import reads every session again, and adds nothing twice


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: derived, so rebuilt by the next import
    return loaded if isinstance(loaded, dict) else {}


def _valid(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in entry[:2])
        and isinstance(entry[2], str)
    )


def default_sessions(fmt: str | None) -> FolderExports:
    """What `--import-history` without a path imports: the coding agents' own session folders
    (~/.claude/projects, $CODEX_HOME/sessions or ~/.codex/sessions), those that hold a session,
    or the one `fmt` names. UsageError for an export's format (an export has no default place);
    InputFileError naming the folders looked for when none holds one."""
    if fmt is not None and fmt not in AGENT_FORMATS:
        raise UsageError(f"--import-history needs the path of the {fmt} export (only Claude Code's and Codex's "
                         "sessions have a folder it looks in)")
    wanted = [fmt] if fmt is not None else list(AGENT_FORMATS)
    folders = [(default_folder(name), name) for name in wanted]
    # A folder the agent made but holds no session yet is passed over, as if it were not there.
    found = [(f, name) for f, name in folders if f.is_dir() and next(iter(session_files(f)), None) is not None]
    if not found:
        named = [f"{display_path(folder)} ({_AGENT_NAMES[name]})" for folder, name in folders]
        looked = f"neither {' nor '.join(named)} holds a session" if len(named) > 1 else f"{named[0]} holds no session"
        raise InputFileError(f"no path given, and {looked}: give the path of an export or a session")
    return FolderExports(found=found)


_AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}
