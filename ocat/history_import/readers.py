"""The readers of old chats, found by format name (as harlequin finds its adapters): each export
format with how its first item is recognised, how one conversation is read and the key each
conversation holds once; each coding agent with how one session file is read.

`read_history`, `count_conversations` (ocat.history_import) and `format_of` (detection) look a
format up here; a new format is one entry, not another branch in each of them. llm's logs.db is
a database, read whole by `llm_logs` (it is told apart by being SQLite, not by a first item).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, get_args

from ocat.history_import.chatgpt import conversation as chatgpt_conversation, is_chatgpt
from ocat.history_import.claude import conversation as claude_conversation, is_claude
from ocat.history_import.claude_code import read_session as read_claude_code
from ocat.history_import.codex import read_session as read_codex
from ocat.history_import.model import HistoryItem, ImportedConversation

# Every format `--from` names, and `read_history` reads.
HistoryFormat = Literal["chatgpt", "claude", "llm", "claude-code", "codex"]
FORMATS: tuple[HistoryFormat, ...] = get_args(HistoryFormat)


@dataclass(frozen=True)
class ExportReader:
    """A JSON export of conversations (a zip, a folder or one file): one array item each."""

    name: HistoryFormat
    # Whether the export's first item is this format's.
    recognises: Callable[[Any], bool]
    # One conversation read from its item, numbered from 1 in file order.
    conversation: Callable[[Any, int], HistoryItem]
    # A key each conversation holds once, at its top level (counted for a progress bar).
    once_per_conversation: bytes


@dataclass(frozen=True)
class SessionReader:
    """A coding agent's sessions: one JSON Lines file per conversation."""

    name: HistoryFormat
    read: Callable[[Path], ImportedConversation]


EXPORTS: dict[str, ExportReader] = {reader.name: reader for reader in (
    ExportReader("chatgpt", is_chatgpt, chatgpt_conversation, b'"current_node":'),
    ExportReader("claude", is_claude, claude_conversation, b'"chat_messages":'),
)}
"""The export readers, by format name, in the order detection asks them."""

SESSIONS: dict[str, SessionReader] = {reader.name: reader for reader in (
    SessionReader("claude-code", read_claude_code),
    SessionReader("codex", read_codex),
)}
"""The coding agents' session readers, by format name."""


def export_of(item: Any) -> HistoryFormat | None:
    """The export format whose conversations look like `item` (an export's first), or None."""
    return next((reader.name for reader in EXPORTS.values() if reader.recognises(item)), None)
