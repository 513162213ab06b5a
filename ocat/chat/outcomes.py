"""What a turn's memory steps take and come to, as values: the search it hands memory, what recall found,
whether the exchange was remembered, what iterating it gives, and how opening memory went.

The session returns these, the turn keeps them, and every face words them with the one
function here (`remembered_words`): no face reads the session back to decide whether an answer
was remembered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

from ocat.text.secrets import count_kinds
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.memory import RetrievalLimits
    from ocat.records import Exchange, SearchHit
    from ocat.tools.calls import ToolCall


class Remembered(Enum):
    """Whether a finished exchange is in memory."""

    STORED = "stored"
    # Not in memory yet: this chat keeps it and writes it on a later turn, or at the next start.
    KEPT = "kept for later"
    # Never to be: dummy mode, or memory disabled.
    NOT_STORED = "not stored"


@dataclass(frozen=True)
class MemorySearch:
    """A turn's search, as data memory runs (`SessionMemory.recall`): the queries (the prompt, and
    the prompt after the last prompts), the chat's limits and project scope, what is already in
    view (left out: the history the model is sent, the wake block's pins), the day time words are
    read against, and the budget of what is kept."""

    queries: tuple[str, ...]
    limits: RetrievalLimits
    in_view: frozenset[str] = frozenset()
    now: datetime | None = None
    token_budget: int = 0


@dataclass(frozen=True)
class Recall:
    """What searching memory for a turn found, and what went wrong on the way (memory staying on)."""

    hits: list[SearchHit] = field(default_factory=list)
    # Why this turn's memories are missing or partial (a failed search, a derived file rebuilt).
    problem: str | None = None
    # Derived files rebuilt before the search, in words.
    rebuilt: tuple[str, ...] = ()
    # Why memory went off during this search (it was on before), or None.
    memory_lost: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What became of a finished exchange: stored, kept for later or not stored, and why."""

    exchange: Exchange
    status: Remembered
    # Why it was not stored (None when it was, or while memory is still loading: nothing to say).
    reason: str | None = None
    # Memory is off (rather than one write having failed while the store answers).
    memory_off: bool = False
    # Memory was off when the turn began and is on again: what was kept is written.
    memory_back: bool = False
    # The kinds of the secrets memory did not keep (one per secret: `memory.secrets`); the
    # model was sent them, the store has a placeholder instead.
    secrets: tuple[str, ...] = ()

    @property
    def stored(self) -> bool:
        """Whether the exchange is in memory."""
        return self.status is Remembered.STORED


def secrets_words(recorded: Recorded) -> str | None:
    """The quiet line every face shows when memory did not keep a secret of the turn, or None."""
    if not recorded.secrets:
        return None
    count = len(recorded.secrets)
    return (f"{count_of(count, 'secret')} in this turn {'was' if count == 1 else 'were'} not kept in memory "
            f"({count_kinds(recorded.secrets)}).")


def remembered_words(recorded: Recorded) -> tuple[str, bool] | None:
    """What every face says about whether an answer was remembered: (the line, whether it is an
    error), or None when there is nothing to say (stored, dummy mode, memory still loading)."""
    if recorded.status is Remembered.STORED:
        back = "Memory is back on; what this chat kept meanwhile is remembered."
        return (back, False) if recorded.memory_back else None
    if recorded.status is Remembered.NOT_STORED or recorded.reason is None:
        return None
    if not recorded.memory_off:  # one write failed; the store answers, and the next turn writes it
        return f"Not remembered yet: {recorded.reason}.", True
    return (f"Not remembered yet, memory is off: {recorded.reason}. This chat keeps it, and it is written to "
            "memory when memory is back.", True)


@dataclass(frozen=True)
class TextPiece:
    """A piece of the answer's text, as it came (faces escape it for the terminal)."""

    text: str


@dataclass(frozen=True)
class ToolStarted:
    """A tool call begins (named server.tool from now on): a face shows its line."""

    call: ToolCall


@dataclass(frozen=True)
class ToolFinished:
    """A tool call has its result (or failed): a face updates its line."""

    call: ToolCall


# What iterating a turn gives; every face matches on it.
TurnEvent = TextPiece | ToolStarted | ToolFinished


@dataclass(frozen=True)
class MemoryLoaded:
    """How opening memory went: `error` says why memory is off (None: it is on)."""

    error: str | None
    # Where a first-use download put the model ("Downloaded ... to ~/..."), if one ran.
    downloaded: str | None = None
    # Exchanges said while memory loaded, written to it once it was ready.
    saved: int = 0
    # What became of the exchanges earlier chats kept in a file (ocat.chat.unsaved), in words, if any.
    recovered: str | None = None

    def notice(self, unsaved: int = 0) -> tuple[str, bool] | None:
        """What to tell the user, and whether it is an error; None when there is nothing to say.

        `unsaved` counts the exchanges this chat holds that memory could not take yet.
        """
        if self.error:
            said = "What you say"
            if unsaved:
                said = f"The {count_of(unsaved, 'exchange')} said so far, and what you say next,"
            # Unsaved exchanges are written if memory comes back (the model arrives, or the store
            # opens again on a later turn).
            still = f" {said} stays in this chat and is remembered if memory comes back."
            return f"Memory is off: {self.error}. The chat works without it.{still}", True
        verb = "is" if self.saved == 1 else "are"
        saved = f"; the {count_of(self.saved, 'exchange')} made meanwhile {verb} remembered too" if self.saved else ""
        recovered = f" {self.recovered[:1].upper()}{self.recovered[1:]}" if self.recovered else ""
        if self.downloaded:
            return f"{self.downloaded} Memory is on{saved}.{recovered}", False
        if self.saved:
            return f"Memory is ready{saved}.{recovered}", False
        if recovered:
            return recovered.strip(), False
        return None
