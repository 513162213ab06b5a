"""What the history readers yield: conversations of exchanges, or a problem with one conversation."""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True)
class ImportedConversation:
    """One conversation read from an export, its exchanges in the order they were said."""

    source: str
    """"chatgpt", "claude" or "llm"."""
    source_id: str
    """The conversation's id in the source."""
    title: str
    """"" when the source has none."""
    created: float | None
    """Epoch seconds, when the source knows it."""
    exchanges: tuple[ImportedExchange, ...]


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
