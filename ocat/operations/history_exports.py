"""A folder of several history exports, imported one at a time (`ocat --import-history FOLDER`, `/import`).

Each export is imported as operations.history.import_history imports one; one that cannot be
read is named and the others still import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ocat.operations.history import HistoryImport, Progress, import_history
from ocat.errors import InputFileError

if TYPE_CHECKING:
    from ocat.history_import import ConversationProblem, FolderExports
    from ocat.memory import MemoryStore


# How a line names each format.
FORMAT_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude", "llm": "llm", "claude-code": "Claude Code", "codex": "Codex"}


@dataclass
class ExportsImport:
    """What an import of a folder of several exports did, one export at a time: each one's
    import, or why it could not be read; those a stop came before are left for the rerun."""

    imported: list[tuple[Path, HistoryImport]] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    left: list[Path] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """Whether a stop left some of it to import."""
        return bool(self.left) or any(outcome.stopped for _, outcome in self.imported)

    def lines(self) -> list[str]:
        """One line per export: 'chatgpt.zip (ChatGPT): 412 conversations: ...'."""
        said = [f"{path.name} ({FORMAT_NAMES.get(o.source, o.source)}): {o.sentence()}" for path, o in self.imported]
        said += [f"{path.name}: not imported: {why}" for path, why in self.failed]
        said += [f"{path.name}: not imported yet: stopped before it; run the same command again" for path in self.left]
        return said

    def to_dict(self) -> dict[str, object]:
        """The JSON form: each export's path with its import (as HistoryImport.to_dict) or its error."""
        exports: list[dict[str, object]] = [{"path": str(path)} | o.to_dict() for path, o in self.imported]
        exports += [{"path": str(path), "error": why} for path, why in self.failed]
        exports += [{"path": str(path), "stopped": True, "left": True} for path in self.left]
        return {"exports": exports, "stopped": self.stopped}


def import_exports(
    store: MemoryStore,
    held: FolderExports,
    *,
    progress: Progress | None = None,
    problem: Callable[[ConversationProblem], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> ExportsImport:
    """Import each export a folder holds (history_import.folders.exports_in) in turn, as
    import_history does. One that cannot be read is named and the others still import, as are
    the files that looked like an export and are none; after a stop, the exports not begun are
    left (the rerun finds what is already here)."""
    done = ExportsImport(failed=list(held.passed_over))
    for path, fmt in held.found:
        if done.stopped:
            done.left.append(path)
            continue
        try:
            done.imported.append(
                (path, import_history(store, path, fmt, progress=progress, problem=problem, warn=warn))
            )
        except InputFileError as exc:
            done.failed.append((path, str(exc)))
    return done
