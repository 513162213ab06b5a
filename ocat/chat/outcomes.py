"""What a turn's memory steps came to, as values: what recall found, and whether the exchange was remembered.

The session returns these, the turn keeps them, and every face words them with the one
function here (`remembered_words`): no face reads the session back to decide whether an answer
was remembered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from ocat.text.secrets import count_kinds
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.records import Exchange, SearchHit


class Remembered(Enum):
    """Whether a finished exchange is in memory."""

    STORED = "stored"
    # Not in memory yet: this chat keeps it and writes it on a later turn, or at the next start.
    KEPT = "kept for later"
    # Never to be: dummy mode, or memory disabled.
    NOT_STORED = "not stored"


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
