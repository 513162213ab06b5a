"""One conversation, independent of any UI: its ids, its history, recall before a turn, storing after.

Memory failures never end a conversation: the session notes the error, goes on without
memory, and the UI says so.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any
import threading

from ocat.chat.messages import TurnRequest, build_request, retrieval_queries, system_prompt
from ocat.errors import OcatError, UsageError
from ocat.chat.outcomes import Recall, Recorded
from ocat.records import CalledTool, Exchange, SearchHit, new_id
from ocat.progress import CommandProgress
from ocat.chat.session_memory import SessionMemory
from ocat.tools.server_tools import ServerTools
from ocat import llm, memory
from ocat.tools import ToolBox
from ocat.choices import with_saved_choices
from ocat.text.tokens import estimate_tokens
from ocat.chat.memory_loading import load_memory, warm_up
from ocat.chat.turn import Turn
from ocat.tools.support import Refusals, offer_tools

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.llm import AnswerStream
    from ocat.memory import MemoryStore, ProjectScope
    from ocat.memory import ProjectPolicy
    from ocat.memory import DownloadProgress
    from ocat.operations.forks import ForkLink
    from ocat.operations.wake import WakeBlock
    from ocat.tools import ToolSpec


# How long a thread's first turn waits for memory still opening before its wake block is built
# (without the recent threads, then, and built again on the next turn that has memory).
WAKE_WAIT_SECONDS = 20.0


def _current_folder() -> str:
    """The folder ocat was started in (home, when that folder has since been removed)."""
    try:
        return os.getcwd()
    except OSError:
        return os.path.expanduser("~")


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
        self.session_id = new_id()
        # Memory as this session holds it (ocat.chat.session_memory): the store, the model, what
        # waits to be written. It keeps the session's settings and dummy mode (the properties below).
        # The theme and context display chosen in an earlier chat, where the config names none:
        # every chat (full screen, line mode) starts from them.
        self.memory = SessionMemory(with_saved_choices(settings), session_id=self.session_id, store=store, dummy=dummy)
        self.thread_id = thread_id or new_id()
        self.continuation_seq = continuation_seq
        # Where its exchanges are said: "" for a chat, records.ONE_SHOT for `ocat --ask`.
        self.origin = ""
        self.history: list[Exchange] = list(history or [])
        # Where this thread was forked from (/fork): each of its new exchanges records it.
        self.forked_from: ForkLink | None = None
        self.started = datetime.now()
        # The day time words in a prompt are read against (`ocat --ask --now DATE`); None: the clock.
        self.now: datetime | None = None
        # What the model knows at the start of this thread (ocat.operations.wake): built on its
        # first turn, given with every turn of it, and built again for the next thread.
        self.wake: WakeBlock | None = None
        # The block was built while memory was still opening: the next turn with memory builds it again.
        self.wake_without_memory = False
        # Long commands (/vdoc) report here, and stop at their next step when asked (ocat.progress).
        self.progress = CommandProgress()
        # What the provider refused: tools (off for the rest of the session), or one tool's definition.
        self.refusals = Refusals()
        # Projects (ocat.memory.retrieval.project_scope): where ocat was started, and the scope
        # searches use (`--project PATH` and `/project` change it).
        self._started_in = _current_folder()
        self._project: str | None = None
        self.project_path: str | None = self.settings.project
        self.project_policy: ProjectPolicy = "only" if self.settings.project else "prefer"
        # The user's MCP servers (none configured: an empty one); faces start them after their first frame.
        self.server_tools = ServerTools(self.settings)

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        dummy: bool = False,
        serve: bool = True,
        progress: DownloadProgress | None = None,
    ) -> ChatSession:
        """A new session on the configured store, its embedding model fetched if needed
        (`progress` hears about a download); if either fails, memory is off.

        `serve` (the default, for the chat) shares the store with other ocat processes
        while the session lives; one-shot callers such as `--ask` pass False.
        """
        session = cls(settings, dummy=dummy)
        session.memory.loaded = load_memory(session.memory, serve=serve, notify=_note, progress=progress)
        return session

    @property
    def settings(self) -> Settings:
        """This session's settings, one set for the conversation and its memory (a slash command
        may replace them: /model, /showcontext)."""
        return self.memory.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.memory.settings = settings

    @property
    def dummy(self) -> bool:
        """Dummy mode: the model's answers are made up here, and memory is read but never written."""
        return self.memory.dummy

    @dummy.setter
    def dummy(self, dummy: bool) -> None:
        self.memory.dummy = dummy

    @property
    def project(self) -> str:
        """This chat's project: the git root of the folder ocat was started in, else that folder
        (worked out once, when first needed: after the first frame)."""
        if self._project is None:
            self._project = memory.project_of(self._started_in)
        return self._project

    def scope(self) -> ProjectScope:
        """How this chat's searches use projects: `--project` or `/project PATH` keep one project's
        exchanges only, `/project all` ignores projects, and by default this chat's are preferred."""
        if self.project_policy == "only":  # project_path is a project already (--project, /project PATH)
            return memory.ProjectScope(self.project_path or self.project, "only")
        if self.project_policy == "off":
            return memory.ProjectScope()
        return memory.ProjectScope(self.project, "prefer")

    def turn(self, prompt: str) -> Turn:
        """A new turn of this conversation: every face drives it (ocat.chat.turn)."""
        return Turn(self, prompt)

    def wake_block(self) -> WakeBlock | None:
        """This thread's wake block (built on first use; None when `memory.wake` is off). Memory
        that is off or failing leaves its parts out: the profile is still read.

        The first turn waits for memory still opening, at most WAKE_WAIT_SECONDS, so its block is
        the same sent at once or later; a block built without memory that was still opening (past
        the wait, or during the model's first download) is built again on the first turn memory is on."""
        if not self.settings.memory.wake:
            return None
        if self.wake is None:
            self.memory.opening.wait(WAKE_WAIT_SECONDS)
        elif not (self.wake_without_memory and self.memory.model_available()):
            return self.wake
        from ocat.operations.wake import build_wake  # noqa: PLC0415 - loads with the first turn

        available = self.memory.model_available()
        store = self.memory.store if available else None
        # This thread is sent as history, never listed as a recent one (a fork's first exchange is stored by now).
        self.wake = build_wake(self.settings, store, exclude_thread=self.thread_id, project=self.scope().project)
        self.wake_without_memory = not available and self.memory.error is None and self.settings.vector_store.enabled
        return self.wake

    def recall(self, prompt: str) -> Recall:
        """Memories worth showing the model for this prompt, leaving out what is already in view,
        and what went wrong on the way (a failed search leaves memory on, and says so)."""
        return self.memory.recall(lambda store: self._search(store, prompt))

    def _search(self, store: MemoryStore, prompt: str) -> list[SearchHit]:
        """This turn's search: the prompt and the recent conversation, in this chat's project scope,
        within the memory budget."""
        window = self.settings.vector_store.search_context_window
        queries = retrieval_queries(prompt, self.history, window)
        # Only what the model is sent as history is skipped; older turns of a long
        # conversation can still come back as memory.
        in_view = {e.exchange_id for e in self.recent_history()}
        if self.wake is not None:
            in_view |= set(self.wake.pinned_ids)  # the model has them in the wake block already
        limits = memory.RetrievalLimits.from_settings(self.settings.vector_store)
        limits = dataclasses.replace(limits, project=self.scope())
        found = memory.admitted(memory.retrieve_any(store, queries, limits, exclude_ids=in_view, now=self.now))
        return memory.within_budget(found, self.settings.vector_store.memory_token_budget)

    def build_request(self, prompt: str, memories: list[SearchHit]) -> TurnRequest:
        """The messages for this turn: system prompt, memory, recent history, the prompt.

        History is trimmed (oldest first) to the model's input window; this may import
        litellm, so the app calls it off the UI thread.
        """
        return build_request(
            prompt,
            system=system_prompt(self.settings.llm, self.started),
            history=self.recent_history(),
            memories=memories,
            token_limit=None if self.dummy else llm.input_token_limit(self.settings.llm),
            wake=self.wake.text() if self.wake is not None and not self.wake.empty else None,
        )

    def recent_history(self) -> list[Exchange]:
        """The last `chat_window` exchanges: the part of this conversation the model is sent."""
        window = self.settings.vector_store.chat_window
        return self.history[-window:] if window > 0 else []

    def stream(self, request: TurnRequest, tools: list[dict[str, Any]] | None = None) -> AnswerStream:
        """One model call's answer, piece by piece; its `usage` is known once it has finished, and
        its `tool_calls` when it was offered `tools`."""
        return llm.stream(request.messages, self.settings.llm, dummy=self.dummy, tools=tools)

    def toolbox(self, in_context: set[str]) -> ToolBox | None:
        """The tools this turn offers the model (ocat.tools), or None: none in dummy mode, with
        tools off, or for a model that cannot call them. Memory's tools need memory on; the MCP
        servers' tools (started now if the face did not start them) do not.
        `in_context`: the memories the model already has (marked, not repeated, by a search)."""
        if self.dummy or not self.refusals.tools_on:
            return None
        if not offer_tools(self.settings):
            return None
        specs = self._memory_tools(in_context)
        specs += self.server_tools.specs({spec.name for spec in specs})
        specs = [spec for spec in specs if spec.name not in self.refusals.dropped]
        return ToolBox(specs, result_tokens=self.settings.tools.result_tokens, count=estimate_tokens) if specs else None

    def _memory_tools(self, in_context: set[str]) -> list[ToolSpec]:
        store = self.memory.store
        if store is None or not self.memory.model_available():
            return []
        from ocat.tools.memory_tools import MemoryToolContext, memory_tools  # noqa: PLC0415 - loads with the first turn

        def short(record_id: str) -> str:
            from ocat.operations.lookup import short_id  # noqa: PLC0415 - loads with the first turn

            return short_id(store, record_id)

        return memory_tools(MemoryToolContext(store, self.settings, in_context=set(in_context), short=short,
                                              project=self.scope()))

    def close(self, *, wait_seconds: float | None = None) -> str | None:
        """Keep what is not in memory yet in a file, stop the MCP servers, then give the store up
        (SessionMemory.close, waiting at most `wait_seconds` for a write under way: what became
        of exchanges not yet written, in words)."""
        self.memory.spool()  # before anything that may take a while
        self.server_tools.close()
        return self.memory.close(wait_seconds=wait_seconds)

    def record(
        self, prompt: str, answer: str, memories: list[SearchHit], calls: tuple[CalledTool, ...] = ()
    ) -> Recorded:
        """Add a finished exchange to the history and, unless in dummy mode, to memory; says
        whether it was stored, kept for a later write, or not stored, and why."""
        return self.remember(self.answered(prompt, answer, memories, calls))

    def answered(
        self, prompt: str, answer: str, memories: list[SearchHit], calls: tuple[CalledTool, ...] = ()
    ) -> Exchange:
        """The exchange of an answer shown in full, held by memory from now on (SessionMemory.hold):
        every way out of the chat keeps it until `remember` has written it."""
        exchange = Exchange(
            user_prompt=prompt,
            assistant_response=answer,
            thread_id=self.thread_id,
            session_id=self.session_id,
            prior_exchange_ids=tuple(h.id for h in memories),
            thread_continuation_seq=self.continuation_seq,
            tool_calls=calls,
            origin=self.origin,
            project=self.project,
            forked_from_thread=self.forked_from.thread_id if self.forked_from else "",
            forked_from_exchange=self.forked_from.exchange_id if self.forked_from else "",
        )
        self.memory.hold(exchange)
        return exchange

    def remember(self, exchange: Exchange) -> Recorded:
        """Add an answered exchange to the history and, unless in dummy mode, to memory; says
        whether it was stored, kept for a later write, or not stored, and why."""
        self.history.append(exchange)
        return self.memory.keep(exchange)

    def resume(self, thread_id: str) -> list[Exchange]:
        """Continue a stored thread: its history becomes this conversation, oldest first (a fork's
        begins with its source's, up to where it was forked: ocat.operations.forks).

        New exchanges keep the thread id, carry this session's id, and the next
        continuation sequence (the thread's highest so far, plus one).
        """
        from ocat.operations.forks import link_of, thread_history  # noqa: PLC0415 - loads with the first /continue

        store = self.memory.store
        if store is None:
            raise OcatError(f"memory is off: {self.memory.error or 'not ready yet'}")
        history = thread_history(store, thread_id)
        own = [e for e in history if e.thread_id == thread_id]
        if not own:
            raise OcatError(f"no thread {thread_id}")
        self.thread_id = thread_id
        self.continuation_seq = max(e.thread_continuation_seq for e in own) + 1
        self.history = history
        self.forked_from = link_of(own)
        self.wake = None
        return own

    def fork(self, back: int) -> Exchange:
        """Fork this conversation at the exchange `back` places from its end (1: the last): a new
        thread starts with the history up to it, and records where it came from; both threads keep
        all their exchanges (the fork's own are written under its id). Returns that exchange."""
        from ocat.operations.forks import ForkLink, fork_point  # noqa: PLC0415 - loads with the first /fork

        point = fork_point(self.history, back)
        kept = self.history[: self.history.index(point) + 1]
        self.new_thread()
        self.history = kept
        # The exchange's own thread: forking a fork's inherited part links to where it lives.
        self.forked_from = ForkLink(point.thread_id, point.exchange_id)
        return point

    def forget(self, exchange_id: str) -> bool:
        """Drop an exchange from this conversation (it was deleted from memory), so the model is
        not sent it again; False when the conversation did not hold it."""
        kept = [e for e in self.history if e.exchange_id != exchange_id]
        dropped = len(kept) != len(self.history)
        self.history = kept
        self.memory.forget(exchange_id)
        return dropped

    def take_back_last(self) -> Exchange | None:
        """Remove this conversation's last exchange, from memory too, so it can be asked again
        and replaced (not joined by a second answer); None when there is none."""
        if not self.history:
            return None
        last = self.history[-1]
        if last.thread_id != self.thread_id:
            raise UsageError("the last exchange is the one this fork starts from: it stays in the thread it "
                             "belongs to; ask your next question instead (or /continue that thread)")
        store = self.memory.store
        if store is not None and not self.dummy:
            store.delete([last.exchange_id])  # a StoreError leaves the conversation as it was
        self.forget(last.exchange_id)
        return last

    def new_thread(self) -> None:
        """Start over: a fresh thread with no history (memory stays)."""
        self.thread_id = new_id()
        self.continuation_seq = 0
        self.history = []
        self.forked_from = None
        self.wake = None

def open_chat(settings: Settings, *, dummy: bool, serve: bool, stream: IO[str]) -> ChatSession:
    """`ChatSession.open` for a terminal: a first-use download of the model reports its
    progress, and where the model went, on `stream` (stderr). A long-lived chat (`serve`)
    warms memory up in the background."""
    printer = memory.ProgressPrinter(stream)
    session = None
    try:
        session = ChatSession.open(settings, dummy=dummy, serve=serve, progress=printer)
    finally:
        printer.finish(session.memory.fetched if session is not None else None)
    if serve:
        # A chat that waits for its first prompt readies the model and the store's floor
        # meanwhile, as the full-screen chat does; a one-shot (`--ask`) asks at once.
        # Not a daemon: leaving the chat at once waits for it (a second or two) rather than
        # aborting in the model's native threads at interpreter shutdown.
        threading.Thread(target=warm_up, args=(session.memory,), name="ocat-warm-up", daemon=False).start()
    return session
