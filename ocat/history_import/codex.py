"""Reading a Codex session (`~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`): one exchange per
user message, with the assistant's messages up to the next one and the tools it called.

Each line is `{timestamp, type, payload}`. `session_meta` gives the session's id, its folder
(`cwd`) and git branch; `response_item` payloads of type `message` are what was said. The
rest is left out: reasoning, tool calls and their output (tool names are summed up on the
answer's last line), `event_msg` (which repeats the messages for the screen) and `turn_context`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ocat.history_import.agent_sessions import (
    CODEX,
    ExchangeBuilder,
    absolute_folder,
    noting,
    records,
    stamp,
    title_from,
)
from ocat.history_import.model import ImportedConversation
from ocat.history_import.values import ident, iso_epoch, text

SOURCE = CODEX
# User messages Codex writes itself at the start of a session: the folder, sandbox and shell
# it runs in, and the instructions of AGENTS.md. Not something the user said.
_NOT_SAID = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions for")
# Tool calls that carry no `name` of their own.
_NAMELESS_TOOLS = {"local_shell_call": "shell", "web_search_call": "web_search"}


def read_session(file: Path, warn: Callable[[str], None] | None = None) -> ImportedConversation:
    """The session in `file`, read one line at a time."""
    warnings: list[str] = []
    found = stamp(file)
    builder = ExchangeBuilder()
    session_id = cwd = branch = first_prompt = ""
    created: float | None = None
    turn = 0

    for record in records(file, noting(warnings, warn)):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        when = iso_epoch(record.get("timestamp"))
        kind = record.get("type")
        if kind == "session_meta":
            if not session_id:  # a resumed session may repeat it; the first is the session's own
                session_id = ident(payload.get("id"))
                cwd = absolute_folder(text(payload.get("cwd")))
                git = payload.get("git")
                branch = text(git.get("branch")) if isinstance(git, dict) else ""
                created = iso_epoch(payload.get("timestamp")) or when
            continue
        if kind != "response_item":
            continue
        item = payload.get("type")
        if item == "message":
            said = _content_text(payload.get("content"))
            role = payload.get("role")
            if role == "user":
                if not said or said.startswith(_NOT_SAID):
                    continue
                turn += 1
                first_prompt = first_prompt or said
                # The turn's place in the session is its id: a session that grows keeps it.
                builder.prompt(said, when, f"turn-{turn}", branch)
            elif role == "assistant":
                builder.answer(said, when, f"turn-{turn}")
        elif item in ("function_call", "custom_tool_call"):
            builder.tool(text(payload.get("name")), when, f"turn-{turn}")
        elif isinstance(item, str) and item in _NAMELESS_TOOLS:
            builder.tool(_NAMELESS_TOOLS[item], when, f"turn-{turn}")
    return ImportedConversation(
        source=SOURCE,
        source_id=session_id or file.stem,
        title=title_from(first_prompt),
        created=created,
        exchanges=builder.build(),
        project=cwd,
        warnings=tuple(warnings),
        file=found,
    )


def _content_text(content: Any) -> str:
    """The text blocks of a message (input_text, output_text), joined."""
    if isinstance(content, str):
        return text(content).strip()
    blocks = content if isinstance(content, list) else []
    pieces = [
        piece
        for block in blocks
        if isinstance(block, dict)
        and block.get("type") in ("input_text", "output_text", "text")
        and (piece := text(block.get("text")).strip())
    ]
    return "\n\n".join(pieces)
