"""One chat turn, written once: recall -> request -> stream -> record.

The full-screen chat, the line mode, `--ask` and `/retry` (which sends its prompt again as a
new turn) all drive a `Turn` and only render it, as every face of simonw/llm iterates one
`Response`. The turn holds what the faces show: the memories it used, what went wrong with
memory on the way, the answer's pieces, usage and timings, and the exchange it recorded.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import TYPE_CHECKING, AsyncIterator

if TYPE_CHECKING:
    from ocat.chat import TurnRequest
    from ocat.llm import Usage
    from ocat.operations.wake import WakeBlock
    from ocat.records import Exchange, SearchHit
    from ocat.session import ChatSession


class TurnState(Enum):
    """Where a turn is: each step moves it forward, and `finish` or `cancel` ends it."""

    NEW = "new"
    RECALLED = "recalled"
    ANSWERING = "answering"
    ANSWERED = "answered"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"


class TurnError(RuntimeError):
    """A step asked of a turn out of order (a programming error, not the user's)."""


class Turn:
    """One prompt and its answer: `recall()`, `prepare()`, `async for piece in turn`, then
    `finish()` records the exchange or `cancel()` drops it.

    `recall` and `prepare` block (the store, the tokenizer, litellm's model list): the
    full-screen chat runs them off its event loop; iterating runs whichever has not run yet.
    """

    def __init__(self, session: ChatSession, prompt: str) -> None:
        self.session = session
        self.prompt = prompt
        self.state = TurnState.NEW
        self.memories: list[SearchHit] = []
        # The thread's wake block, as the model is given it with this turn (None when off), and
        # whether this turn built it (the first of a thread: `/showcontext on` shows it then).
        self.wake: WakeBlock | None = None
        self.wake_is_new = False
        # What went wrong with memory on this turn while memory stayed on (a search that failed,
        # an exchange kept to be written later), in words; None when nothing did.
        self.problem: str | None = None
        self.request: TurnRequest | None = None
        self.pieces: list[str] = []
        self.usage: Usage | None = None
        self.exchange: Exchange | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.first_piece_at: float | None = None
        self.answered_at: float | None = None
        # Memory's state as the turn began: a face says so when a turn turned it off.
        self._had_memory = session.memory_on

    # -- the steps -------------------------------------------------------------------

    def recall(self) -> list[SearchHit]:
        """Search memory for this prompt (what is already in view is left out); a failed search
        leaves the turn without memories and says so in `problem`."""
        self._expect(TurnState.NEW)
        built_before = self.session.wake is not None
        self.wake = self.session.wake_block()
        self.wake_is_new = self.wake is not None and not built_before and not self.wake.empty
        self.memories = self.session.recall(self.prompt)
        self.problem = self.session.problem
        if self.wake is not None and not built_before and self.wake.notes:
            # What the user should know about the block (a profile left out or cut), once a thread.
            self.problem = "; ".join([*self.wake.notes, *([self.problem] if self.problem else [])])
        self.state = TurnState.RECALLED
        return self.memories

    def prepare(self) -> TurnRequest:
        """Build the messages the model is sent (recalling first if that has not run)."""
        if self.state is TurnState.NEW:
            self.recall()
        self._expect(TurnState.RECALLED)
        if self.request is None:
            self.request = self.session.request(self.prompt, self.memories)
        return self.request

    def __aiter__(self) -> AsyncIterator[str]:
        return self._answer()

    async def _answer(self) -> AsyncIterator[str]:
        request = self.prepare()
        self.state = TurnState.ANSWERING
        stream = self.session.stream(request)
        try:
            async for piece in stream:
                if self.first_piece_at is None:
                    self.first_piece_at = time.monotonic()
                self.pieces.append(piece)
                yield piece
        except BaseException as exc:
            # A provider failure or a cancellation: nothing of this turn is remembered.
            self.error = exc
            self.state = TurnState.FAILED
            raise
        self.usage = stream.usage
        self.answered_at = time.monotonic()
        self.state = TurnState.ANSWERED

    async def answer(self) -> str:
        """The whole answer, for a face that shows it only once it is complete (`--ask`)."""
        async for _ in self:
            pass
        return self.text

    def finish(self) -> Exchange:
        """Record the answered exchange in the conversation and in memory (or keep it to be
        written later: `problem` then says why)."""
        self._expect(TurnState.ANSWERED)
        self.exchange = self.session.record(self.prompt, self.text, self.memories)
        if self.exchange in self.session.unsaved and self.session.problem:
            self.problem = self.session.problem
        self.state = TurnState.FINISHED
        return self.exchange

    def cancel(self) -> None:
        """Drop the turn: what was shown stays on screen, nothing of it is remembered."""
        if self.state is not TurnState.FINISHED:
            self.state = TurnState.CANCELLED

    # -- what the faces show ------------------------------------------------------------

    @property
    def text(self) -> str:
        """The answer as it came (so far): faces escape it for the terminal, memory keeps it as is."""
        return "".join(self.pieces)

    @property
    def memory_lost(self) -> bool:
        """Memory was on when the turn began and is off now (`session.memory_error` says why)."""
        return self._had_memory and not self.session.memory_on

    @property
    def had_memory(self) -> bool:
        """Whether memory was on when the turn began."""
        return self._had_memory

    @property
    def stored(self) -> bool:
        """Whether the finished exchange is in memory (False in dummy mode, with memory off, or kept for later)."""
        return (
            self.exchange is not None
            and self.session.memory_on
            and not self.session.dummy
            and self.exchange not in self.session.unsaved
        )

    def elapsed(self) -> float:
        """Seconds from the turn's start to its answer's end (or to now, while it runs)."""
        return (self.answered_at or time.monotonic()) - self.started

    def _expect(self, state: TurnState) -> None:
        if self.state is not state:
            raise TurnError(f"this turn is {self.state.value}, not {state.value}")
