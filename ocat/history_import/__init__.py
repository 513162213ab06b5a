"""Reading old chats for `ocat --import-history`: a ChatGPT or Claude data export, llm's logs.db,
or a coding agent's sessions (Claude Code, Codex).

This is the front door (the rest of ocat imports from here, never from a room: an
import-linter contract keeps it):

    from ocat.history_import import read_history

    for item in read_history(Path("chatgpt-export.zip")):
        ...  # an ImportedConversation, or a ConversationProblem to report

Readers yield one item per conversation, in file order: a conversation that cannot be read
becomes a ConversationProblem and the others still come through; a file that cannot be read
raises InputFileError. Nothing here touches the store or the screen. The rooms behind it:
`sources` (zip, folder or file), `detection` (which export a path holds), `folders` (several
exports side by side), `json_stream` (big JSON arrays in bounded memory), `chatgpt`, `claude`,
`llm_logs` with `llm_threads` and `llm_database`, `readers` (the formats by name: the registry the
others are found in), `pairing`, `values` (loose values made text
and times) and `model` (what the readers yield); the coding agents' JSON Lines in
`agent_sessions` (files, lines, exchanges), `claude_code` and `codex`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ocat.errors import InputFileError, UsageError
from ocat.history_import.agent_sessions import (
    AGENT_FORMATS,
    agent_format,
    default_folder,
    hook_transcript,
    session_files,
    stamp,
)
from ocat.history_import.detection import detect_format, format_of, not_an_export
from ocat.history_import.folders import FolderExports, exports_in
from ocat.history_import.json_stream import TooDeep
from ocat.history_import.llm_logs import count_llm, read_llm
from ocat.history_import.model import (
    ConversationProblem,
    HistoryItem,
    ImportedConversation,
    ImportedExchange,
    SessionFile,
    UnchangedSession,
)
from ocat.history_import.readers import EXPORTS, FORMATS, SESSIONS, HistoryFormat
from ocat.history_import.sources import Located, count_key, iter_items, locate
from ocat.input_files import refuse_special

__all__ = [
    "AGENT_FORMATS",
    "FORMATS",
    "ConversationProblem",
    "FolderExports",
    "HistoryFormat",
    "HistoryItem",
    "ImportedConversation",
    "ImportedExchange",
    "SessionFile",
    "UnchangedSession",
    "count_conversations",
    "default_folder",
    "detect_format",
    "exports_in",
    "hook_transcript",
    "read_history",
    "session_files",
]

# Whether a session file was read before, unchanged since (an import's own record of them).
Unchanged = Callable[[SessionFile], bool]


def read_history(
    path: Path, fmt: str | None = None, *, unchanged: Unchanged | None = None
) -> Iterator[ImportedConversation | ConversationProblem | UnchangedSession]:
    """The conversations in `path` (a zip, folder, JSON or SQLite file, a session file or a
    folder of them), one item each, in file order. `fmt` is one of FORMATS, or None to tell it
    from the content. A coding agent's session file for which `unchanged` is true is not read:
    an UnchangedSession stands for it.

    The path is checked at once (InputFileError for a missing file or unknown content); the
    conversations are read as they are iterated, so a big export is never loaded whole.
    """
    agent = _agent_opened(path, fmt)
    if agent is not None:
        return _sessions(path, agent, unchanged)
    located, fmt = _opened(path, fmt)
    if fmt == "llm" and located.database is not None:  # _opened checked they go together
        return read_llm(located.database)
    read = EXPORTS[fmt].conversation  # _opened checked the format is an export's
    # One item of the export's array per conversation: each is read, or names what is wrong with it.
    return (
        ConversationProblem(fmt, "", "", item.problem) if isinstance(item, TooDeep) else read(item, number)
        for number, item in enumerate(iter_items(located), 1)
    )


def count_conversations(path: Path, fmt: str | None = None) -> int | None:
    """How many conversations read_history will yield, for a progress bar: llm's database says
    so; a JSON export is counted by one fast pass over its bytes for a key each conversation
    has once (about a second for 300 MB). None when it cannot be told."""
    if _agent_opened(path, fmt) is not None:
        return sum(1 for _ in session_files(path))
    located, fmt = _opened(path, fmt)
    if fmt == "llm" and located.database is not None:
        return count_llm(located.database)
    reader = EXPORTS.get(fmt)
    return count_key(located, reader.once_per_conversation) if reader is not None else None


def _agent_opened(path: Path, fmt: str | None) -> str | None:
    """The coding agent whose sessions `path` holds ("claude-code", "codex"), or None when it
    holds an export (or `fmt` names one); InputFileError when it holds no session file."""
    if fmt is not None and fmt not in AGENT_FORMATS:
        return None
    refuse_special(path)  # before the first look: a pipe would block, a device never end
    chosen = fmt or agent_format(path)
    if chosen is None:
        return None
    if path.is_dir() and next(iter(session_files(path)), None) is None:
        raise InputFileError(f"{path} holds no session files (*.jsonl)")
    stamp(path)  # a missing file fails now, not when the import begins
    return chosen


def _sessions(path: Path, fmt: str, unchanged: Unchanged | None) -> Iterator[HistoryItem | UnchangedSession]:
    read = SESSIONS[fmt].read
    for file in session_files(path):
        try:
            found = stamp(file)
            if unchanged is not None and unchanged(found):
                yield UnchangedSession(fmt, found)
                continue
            yield read(file)
        except InputFileError as exc:  # gone since the folder was listed: the others still import
            yield ConversationProblem(fmt, file.stem, "", str(exc))
        except Exception as exc:  # one odd session must not stop the others
            yield ConversationProblem(fmt, file.stem, "", f"{file} could not be read: {exc!r}")


def _opened(path: Path, fmt: str | None) -> tuple[Located, str]:
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown history format {fmt!r}; the formats are {', '.join(FORMATS)}")
    located = locate(path)
    if fmt is None:
        return located, format_of(located)
    if (fmt == "llm") != (located.database is not None):
        what = "an SQLite database" if located.database is not None else "JSON"
        raise not_an_export(path, f"it holds {what}, which is not the {fmt} format")
    return located, fmt
