"""A folder of several exports: a ChatGPT zip, a Claude zip and llm's logs.db side by side.

People gather their downloads in one folder and pass it to `--import-history`. A folder that is
one export (an unzipped ChatGPT or Claude export, llm's own folder) is imported as before; a
folder that holds several is imported export by export, each told apart by its content.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

from ocat.errors import InputFileError
from ocat.history_import.detection import detect_format
from ocat.history_import.sources import CONVERSATIONS, LLM_DATABASE, shard_files

# The file names that may hold an export; others (chat.html, user.json's images) are not opened.
_CANDIDATE_SUFFIXES = (".zip", ".json", ".db", ".sqlite", ".sqlite3")


@dataclass
class FolderExports:
    """What a folder holds: its exports with their formats, and the files that looked like one
    (a zip, an SQLite file) but could not be read as one, with why."""

    found: list[tuple[Path, str]] = field(default_factory=list)
    passed_over: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def several(self) -> bool:
        """Whether the folder is more than one export (or one beside a file that failed to be one)."""
        return len(self.found) + len(self.passed_over) > 1


def exports_in(path: Path) -> FolderExports:
    """Each export `path` holds, with its format, by name: a folder's own JSON export first, then
    its logs.db, its zips, JSON and SQLite files, and the sub-folders that are exports (one level
    down). Empty when `path` is not a folder. A JSON file that is no export (an unzipped ChatGPT
    export's user.json) is not one; a zip or SQLite file that is no export is passed over, named."""
    held = FolderExports()
    if not path.is_dir():
        return held
    own_json = _holds_json_export(path)
    if own_json:
        _tell(path, held, quiet=False)  # the folder's conversations.json (or its shards)
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or (own_json and _is_json_part(child)):
            continue
        if _is_folder(child):
            if _holds_json_export(child) or (child / LLM_DATABASE).is_file():
                _tell(child, held, quiet=False)
        elif _is_regular(child) and (child.name == LLM_DATABASE or child.suffix.lower() in _CANDIDATE_SUFFIXES):
            _tell(child, held, quiet=child.suffix.lower() == ".json")
    return held


def _tell(path: Path, held: FolderExports, *, quiet: bool) -> None:
    """Add `path` to what the folder holds, by its content."""
    try:
        held.found.append((path, detect_format(path)))
    except InputFileError as exc:
        if not quiet:
            held.passed_over.append((path, str(exc)))


def _holds_json_export(folder: Path) -> bool:
    names = {p.name: p for p in folder.iterdir() if p.is_file()} if _is_folder(folder) else {}
    return CONVERSATIONS in names or bool(shard_files(names))


def _is_json_part(path: Path) -> bool:
    return path.name == CONVERSATIONS or bool(shard_files({path.name: path}))


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)  # a link to a folder is not followed (no loops)
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)  # never a pipe or a device, which would block
    except OSError:
        return False
