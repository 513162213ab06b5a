"""What the history readers yield: conversations of exchanges, or a problem with one conversation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportedExchange:
    """One user message and the assistant reply that followed it, as the source recorded them."""

    prompt: str
    """The user's message text."""
    answer: str
    """The assistant reply that follows ("" if none followed)."""
    timestamp: float | None
    """Epoch seconds of the user message (or of the answer), when the source knows it."""
    source_id: str
    """A stable id from the source (message id, response id)."""
    git_branch: str = ""
    """The git branch a coding agent was on when the prompt was given; "" when unknown."""
    maybe_unfinished: bool = False
    """Whether the agent may still be answering it: the last turn of a session file whose answer
    holds no text yet (nothing, or only the tools it used). A later import that finds it grown
    updates it in place (operations.history_turns)."""


@dataclass(frozen=True)
class SessionFile:
    """A coding agent's session file as it was when read: an import that finds it the same size
    with the same modification time again need not read it again."""

    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ImportedConversation:
    """One conversation read from an export, its exchanges in the order they were said."""

    source: str
    """"chatgpt", "claude", "llm", "claude-code" or "codex"."""
    source_id: str
    """The conversation's id in the source."""
    title: str
    """"" when the source has none."""
    created: float | None
    """Epoch seconds, when the source knows it."""
    exchanges: tuple[ImportedExchange, ...]
    project: str = ""
    """The folder a coding agent worked in (its session's cwd, an absolute path); "" for a chat."""
    warnings: tuple[str, ...] = ()
    """What was passed over while reading it ("FILE:LINE: not JSON"), one line each."""
    file: SessionFile | None = None
    """The session file it was read from (coding agents: one file per session)."""


@dataclass(frozen=True)
class UnchangedSession:
    """A session file an import read before and finds unchanged (its size and modification
    time), so it is not read again; yielded only when the caller asked to skip those."""

    source: str
    file: SessionFile


@dataclass(frozen=True)
class ConversationProblem:
    """A conversation that could not be read; the reader goes on with the next one."""

    source: str
    source_id: str
    """"" when unknown."""
    title: str
    problem: str
    """One line saying what is wrong."""


HistoryItem = ImportedConversation | ConversationProblem
"""What a reader yields, one per conversation, in file order."""
