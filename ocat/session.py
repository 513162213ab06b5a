"""One conversation, independent of any UI: its ids, its history, recall before a turn, storing after.

Memory failures never end a conversation: the session notes the error, goes on without
memory, and the UI says so.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from ocat import llm
from ocat.chat import TurnRequest, build_turn, retrieval_queries, system_prompt
from ocat.errors import Cancelled, OcatError
from ocat.models import Exchange, SearchHit, new_id

if TYPE_CHECKING:
    from ocat.config import Settings
    from ocat.memory import MemoryStore


def _note(message: str) -> None:
    print(f"ocat: {message}", file=sys.stderr)


class ChatSession:
    """A thread as lived in this session: recall, build the messages, stream, then remember."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: MemoryStore | None = None,
        dummy: bool = False,
        thread_id: str | None = None,
        continuation_seq: int = 0,
        history: list[Exchange] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.dummy = dummy
        self.thread_id = thread_id or new_id()
        self.session_id = new_id()
        self.continuation_seq = continuation_seq
        self.history: list[Exchange] = list(history or [])
        self.started = datetime.now()
        self.memory_error: str | None = None
        # Long commands (/vdoc) report here, and stop at their next step once `cancel` is set.
        self.on_progress: Callable[[str, int, int], None] | None = None
        self.cancel = threading.Event()

    def progress(self, label: str, done: int, total: int) -> None:
        """Report a long command's progress to the front end; raises Cancelled if the user asked to stop."""
        if self.cancel.is_set():
            raise Cancelled(f"cancelled at {done}/{total}: what was stored is kept, and the same command completes it")
        if self.on_progress is not None:
            self.on_progress(label, done, total)

    @classmethod
    def open(cls, settings: Settings, *, dummy: bool = False, serve: bool = True) -> ChatSession:
        """A new session on the configured store; if the store cannot open, memory is off.

        `serve` (the default, for the chat) shares the store with other ocat processes
        while the session lives; one-shot callers such as `--ask` pass False.
        """
        session = cls(settings, dummy=dummy)
        if settings.vector_store.enabled:
            try:
                from ocat.memory import open_store

                # The chat is long-lived: it shares the store, so a CLI add meanwhile goes
                # through it instead of racing it (ocat.memory.owner).
                session.store = open_store(settings, serve=serve, notify=_note)
            except OcatError as exc:
                session.memory_error = str(exc)
        return session

    @property
    def memory_on(self) -> bool:
        """True while memory is being read and written."""
        return self.store is not None

    def recall(self, prompt: str) -> list[SearchHit]:
        """Memories worth showing the model for this prompt, leaving out what is already in view."""
        if self.store is None:
            return []
        from ocat.memory import RetrievalLimits, admitted
        from ocat.memory.retrieval import retrieve_any, within_budget

        window = self.settings.vector_store.search_context_window
        queries = retrieval_queries(prompt, self.history, window)
        # Only what the model is sent as history is skipped; older turns of a long
        # conversation can still come back as memory.
        in_view = {e.exchange_id for e in self.recent_history()}
        try:
            limits = RetrievalLimits.from_settings(self.settings.vector_store)
            found = admitted(retrieve_any(self.store, queries, limits, exclude_ids=in_view))
            return within_budget(found, self.settings.vector_store.memory_token_budget)
        except OcatError as exc:
            self._memory_failed(exc)
            return []

    def request(self, prompt: str, memories: list[SearchHit]) -> TurnRequest:
        """The messages for this turn: system prompt, memory, recent history, the prompt.

        History is trimmed (oldest first) to the model's input window; this may import
        litellm, so the app calls it off the UI thread.
        """
        return build_turn(
            prompt,
            system=system_prompt(self.settings.llm, self.started),
            history=self.recent_history(),
            memories=memories,
            token_limit=None if self.dummy else llm.input_token_limit(self.settings.llm),
        )

    def recent_history(self) -> list[Exchange]:
        """The last `chat_window` exchanges: the part of this conversation the model is sent."""
        window = self.settings.vector_store.chat_window
        return self.history[-window:] if window > 0 else []

    def stream(self, request: TurnRequest) -> llm.AnswerStream:
        """The model's answer, piece by piece; its `usage` is known once it has finished."""
        return llm.stream(request.messages, self.settings.llm, dummy=self.dummy)

    def record(self, prompt: str, answer: str, memories: list[SearchHit]) -> Exchange:
        """Add a finished exchange to the history and, unless in dummy mode, to memory."""
        exchange = Exchange(
            user_prompt=prompt,
            assistant_response=answer,
            thread_id=self.thread_id,
            session_id=self.session_id,
            prior_exchange_ids=tuple(h.id for h in memories),
            thread_continuation_seq=self.continuation_seq,
        )
        self.history.append(exchange)
        if self.store is not None and not self.dummy:
            try:
                self.store.add_exchange(exchange)
            except OcatError as exc:
                self._memory_failed(exc)
        return exchange

    def resume(self, thread_id: str) -> list[Exchange]:
        """Continue a stored thread: its exchanges become this conversation, oldest first.

        New exchanges keep the thread id, carry this session's id, and the next
        continuation sequence (the thread's highest so far, plus one).
        """
        if self.store is None:
            raise OcatError(f"memory is off: {self.memory_error or 'not ready yet'}")
        exchanges = self.store.get_thread(thread_id)
        if not exchanges:
            raise OcatError(f"no thread {thread_id}")
        self.thread_id = thread_id
        self.continuation_seq = max(e.thread_continuation_seq for e in exchanges) + 1
        self.history = exchanges
        return exchanges

    def new_thread(self) -> None:
        """Start over: a fresh thread with no history (memory stays)."""
        self.thread_id = new_id()
        self.continuation_seq = 0
        self.history = []

    def _memory_failed(self, exc: OcatError) -> None:
        self.memory_error = str(exc)
        self.store = None
