"""Reading a Claude Code session (`~/.claude/projects/<folder>/<session>.jsonl`): one exchange
per human prompt, with the agent's text up to the next one and the tools it used.

Each line is a record whose `type` is user, assistant, summary, system, queue-operation or
file-history-snapshot. Only user and assistant records say anything: a user record whose
content is text is a prompt; one whose content is tool_result blocks is a tool's output (not
said by anyone, left out); an assistant record holds text, thinking and tool_use blocks, of
which the text is the answer and the tool names are summed up on its last line. A `summary`
record is the thread's title. Records of sub-agents (`isSidechain`) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ocat.history_import.agent_sessions import (
    CLAUDE_CODE,
    ExchangeBuilder,
    absolute_folder,
    noting,
    records,
    stamp,
    title_from,
)
from ocat.history_import.model import ImportedConversation
from ocat.history_import.values import ident, iso_epoch, text

SOURCE = CLAUDE_CODE
# Prompts that are Claude Code's own bookkeeping, not something the user said: a slash
# command's local output and the caveat written before it.
_NOT_SAID = ("<local-command-stdout>", "<local-command-stderr>", "Caveat: The messages below were generated")
# A slash command the user typed: `<command-name>/fix-bug</command-name> ... <command-args>x</command-args>`.
_COMMAND = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# What Claude Code writes as a prompt when the user stops an answer.
_INTERRUPTED = "[Request interrupted by user"


def read_session(file: Path, warn: Callable[[str], None] | None = None) -> ImportedConversation:
    """The session in `file`, read one line at a time."""
    warnings: list[str] = []
    found = stamp(file)
    builder = ExchangeBuilder()
    session_id = cwd = first_prompt = ""
    summaries: list[tuple[str, str]] = []
    uuids: set[str] = set()
    created: float | None = None

    for record in records(file, noting(warnings, warn)):
        kind = record.get("type")
        if kind == "summary":
            summaries.append((ident(record.get("leafUuid")), text(record.get("summary")).strip()))
            continue
        if kind not in ("user", "assistant") or record.get("isSidechain") is True:
            continue
        uuid = ident(record.get("uuid"))
        if uuid and uuid in uuids:
            continue  # written twice (a resumed session repeats what it resumed)
        uuids.add(uuid)
        session_id = session_id or ident(record.get("sessionId"))
        cwd = cwd or absolute_folder(text(record.get("cwd")))
        when = iso_epoch(record.get("timestamp"))
        created = created if created is not None else when
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "assistant":
            _answer(builder, content, when, uuid)
            continue
        prompt = _prompt(record, content)
        if prompt is None:
            continue
        said, is_command = prompt
        first_prompt = first_prompt or said
        builder.prompt(said, when, uuid, text(record.get("gitBranch")), needs_answer=is_command)
    exchanges = builder.build()
    return ImportedConversation(
        source=SOURCE,
        source_id=session_id or file.stem,
        title=_title(summaries, uuids) or title_from(first_prompt),
        created=created,
        exchanges=exchanges,
        project=cwd,
        warnings=tuple(warnings),
        file=found,
    )


def _prompt(record: dict[str, Any], content: Any) -> tuple[str, bool] | None:
    """A user record's prompt and whether it is a slash command; None for what the user did not
    say: tool output, Claude Code's meta records (isMeta, a compaction's summary), a command's
    local output, an interruption."""
    if record.get("isMeta") is True or record.get("isCompactSummary") is True:
        return None
    if isinstance(content, str):
        said = text(content)
    elif isinstance(content, list):
        if any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content):
            return None
        pieces = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and (piece := text(block.get("text")).strip()):
                pieces.append(piece)
            elif block.get("type") == "image":
                pieces.append("[image]")
        said = "\n\n".join(pieces)
    else:
        return None
    said = said.strip()
    if not said or said.startswith(_NOT_SAID) or said.startswith(_INTERRUPTED):
        return None
    command = _COMMAND.search(said)
    if command and said.startswith(("<command-name>", "<command-message>")):
        args = _ARGS.search(said)
        typed = f"{command.group(1)} {args.group(1).strip()}".strip() if args else command.group(1)
        return typed, True  # kept only if the agent answered it (a custom command's prompt)
    return said, False


def _answer(builder: ExchangeBuilder, content: Any, when: float | None, uuid: str) -> None:
    if isinstance(content, str):
        builder.answer(text(content), when, uuid)
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            builder.answer(text(block.get("text")), when, uuid)
        elif block.get("type") in ("tool_use", "server_tool_use"):
            builder.tool(text(block.get("name")), when, uuid)
        # thinking and redacted_thinking blocks are the model's notes to itself, not its answer


def _title(summaries: list[tuple[str, str]], uuids: set[str]) -> str:
    """The summary of this session: one whose leaf is in it (a resumed session's file also
    carries the summaries of the sessions it came from), else the last one."""
    own = [summary for leaf, summary in summaries if summary and leaf in uuids]
    others = [summary for _, summary in summaries if summary]
    return (own or others or [""])[-1]
