"""Telling which export a path holds from its content: ChatGPT, Claude or llm, or a coding
agent's sessions (Claude Code, Codex)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ocat.errors import InputFileError
from ocat.history_import.agent_sessions import agent_format
from ocat.history_import.llm_logs import is_llm_database
from ocat.history_import.readers import export_of
from ocat.history_import.sources import Located, first_item, locate


def not_an_export(path: Path, why: str) -> InputFileError:
    """The error for a path that holds none of the formats."""
    return InputFileError(f"{path} is not a ChatGPT, Claude or llm export, nor a Claude Code or Codex session: {why}")


def format_of(located: Located) -> str:
    """"chatgpt", "claude" or "llm" for what `locate` found; InputFileError when it is none."""
    if located.database is not None:
        try:
            is_llm = is_llm_database(located.database)
        except InputFileError as exc:
            raise not_an_export(located.path, str(exc)) from None
        if not is_llm:
            raise not_an_export(located.path, f"{located.database} is an SQLite file without llm's responses table")
        return "llm"
    try:
        first = first_item(located)
    except InputFileError as exc:
        raise not_an_export(located.path, str(exc)) from None
    found = export_of(first)
    if found is not None:
        return found
    if first is None:
        raise not_an_export(located.path, "it holds no conversations, so which export it is cannot be told")
    raise not_an_export(located.path, f"its first item {_described(first)}")


def detect_format(path: Path) -> str:
    """"chatgpt", "claude", "llm", "claude-code" or "codex", from what `path` holds (not its name)."""
    return agent_format(path) or format_of(locate(path))


def _described(item: Any) -> str:
    if isinstance(item, dict):
        keys = ", ".join(sorted(str(key) for key in item)[:8]) or "none"
        return f"has neither mapping and current_node (ChatGPT) nor chat_messages (Claude); its keys: {keys}"
    return f"is {type(item).__name__}, not a conversation object"
