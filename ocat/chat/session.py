"""One conversation, independent of any UI: its ids, its history, recall before a turn, storing after.

Memory failures never end a conversation: the session notes the error, goes on without
memory, and the UI says so.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from datetime import datetime
from typing import IO, TYPE_CHECKING
import threading

from ocat.chat.messages import retrieval_queries
from ocat.errors import OcatError, UsageError
from ocat.chat.outcomes import MemorySearch, Recorded
from ocat.records import CalledTool, Exchange, SearchHit, new_id
from ocat.progress import CommandProgress
from ocat.chat.session_memory import SessionMemory
from ocat.chat.turn_inputs import ExchangeStamp, Model, ThreadWake, ToolOffer, TurnContext, TurnTools
from ocat.tools.server_tools import ServerTools
from ocat import memory
from ocat.choices import with_saved_choices
from ocat.chat.memory_loading import load_memory, warm_memory
from ocat.chat.turn import Turn
from ocat.tools.support import Refusals

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.mcp_client.consent import Ask
    from ocat.memory import MemoryStore, ProjectScope
    from ocat.memory import ProjectPolicy
    from ocat.memory import DownloadProgress
    from ocat.operations.forks import ForkLink


log = logging.getLogger(__name__)


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
        ask: Ask | None = None,
    ) -> None:
        """`ask`: how the face asks the user's consent to an MCP server's tool call (None: nobody
        to ask, and a call not allowed beforehand is denied: ocat.mcp_client.consent)."""
        self.session_id = new_id()
        # Memory as this session holds it (ocat.chat.session_memory): the store, the model, what
        # waits to be written. It keeps the session's settings and dummy mode (the properties below).
        # The theme and context display chosen in an earlier chat, where the config names none:
        # every chat (full screen, line mode) starts from them.
        self.session_memory = SessionMemory(with_saved_choices(settings), session_id=self.session_id, store=store,
                                            dummy=dummy)
        self.thread_id = thread_id or new_id()
        # This thread's wake block (ocat.chat.turn_inputs): built on its first turn, given with
        # every turn of it, and made afresh for the next thread.
        self.wake = ThreadWake(self.thread_id)
        self.continuation_seq = continuation_seq
        # Where its exchanges are said: "" for a chat, records.ONE_SHOT for `ocat --ask`.
        self.origin = ""
        self.history: list[Exchange] = list(history or [])
        # Where this thread was forked from (/fork): each of its new exchanges records it.
        self.forked_from: ForkLink | None = None
        self.started = datetime.now()
        # The day time words in a prompt are read against (`ocat --ask --now DATE`); None: the clock.
        self.now: datetime | None = None
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
        self.server_tools = ServerTools(self.settings, ask=ask)
        # The memory tools offered to the model, made before a turn and kept while nothing they depend on changes.
        self.tool_offer = ToolOffer()

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        dummy: bool = False,
        serve: bool = True,
        progress: DownloadProgress | None = None,
        ask: Ask | None = None,
    ) -> ChatSession:
        """A new session on the configured store, its embedding model fetched if needed
        (`progress` hears about a download); if either fails, memory is off.

        `serve` (the default, for the chat) shares the store with other ocat processes
        while the session lives; one-shot callers such as `--ask` pass False.
        """
        session = cls(settings, dummy=dummy, ask=ask)
        session.session_memory.loaded = load_memory(session.session_memory, serve=serve, notify=_note,
                                                    progress=progress)
        return session

    @property
    def settings(self) -> Settings:
        """This session's settings, one set for the conversation and its memory (a slash command
        may replace them: /model, /showcontext)."""
        return self.session_memory.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.session_memory.settings = settings

    @property
    def dummy(self) -> bool:
        """Dummy mode: the model's answers are made up here, and memory is read but never written."""
        return self.session_memory.dummy

    @dummy.setter
    def dummy(self, dummy: bool) -> None:
        self.session_memory.dummy = dummy

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
        """A new turn of this conversation, given what it calls: this session's memory, the model,
        the tools and the thread's wake block, and the conversation as values (every face drives it:
        ocat.chat.turn)."""
        settings = self.settings
        window = settings.vector_store.search_context_window
        limits = memory.RetrievalLimits.from_settings(settings.vector_store)
        # Only what the model is sent as history is skipped; older turns of a long conversation
        # can still come back as memory.
        recent = self.recent_history()
        search = MemorySearch(tuple(retrieval_queries(prompt, self.history, window)),
                              dataclasses.replace(limits, project=self.scope()),
                              frozenset(e.exchange_id for e in recent), self.now,
                              settings.vector_store.memory_token_budget)
        context = TurnContext(settings.llm, self.started, tuple(recent), search, self.stamp(), self.history)
        return Turn(prompt, context=context, session_memory=self.session_memory, model=Model(settings.llm, self.dummy),
                    tools=self.tools(), wake=self.wake)

    def tools(self) -> TurnTools:
        """The tools a turn of this conversation may offer (ocat.chat.turn_inputs): memory's, in this
        chat's project scope, and the user's MCP servers'."""
        return TurnTools(self.session_memory, self.server_tools, self.refusals, self.scope(), self.tool_offer)

    def prepare_turns(self) -> None:
        """Make what the next turn reads ready, once memory has opened (or failed to): the thread's
        wake block and memory's tools as the model is offered them, so the first turn does not build
        them. The chats call it after opening memory, off their first prompt (the window's memory
        worker, the line mode's warm-up); never raises: what it could not make, a turn makes and reports."""
        self.wake.prepare(self.session_memory, self.scope().project)
        try:
            self.tools().memory_schemas()
        except Exception:  # the turn makes them again, and fails as a turn does
            log.warning("making the tools offered to the first turn failed", exc_info=True)

    def stamp(self) -> ExchangeStamp:
        """What this conversation writes on the exchanges it makes now."""
        forked = self.forked_from
        return ExchangeStamp(self.thread_id, self.session_id, self.continuation_seq, self.origin, self.project,
                             forked.thread_id if forked else "", forked.exchange_id if forked else "")

    def recent_history(self) -> list[Exchange]:
        """The last `chat_window` exchanges: the part of this conversation the model is sent."""
        window = self.settings.vector_store.chat_window
        return self.history[-window:] if window > 0 else []

    def close(self, *, wait_seconds: float | None = None) -> str | None:
        """Keep what is not in memory yet in a file, stop the MCP servers, then give the store up
        (SessionMemory.close, waiting at most `wait_seconds` for a write under way: what became
        of exchanges not yet written, in words)."""
        self.session_memory.spool()  # before anything that may take a while
        self.server_tools.close()
        return self.session_memory.close(wait_seconds=wait_seconds)

    def record(
        self, prompt: str, answer: str, memories: list[SearchHit], calls: tuple[CalledTool, ...] = ()
    ) -> Recorded:
        """Add an exchange said outside a turn (an import's, a test's) to the history and, unless in
        dummy mode, to memory; says whether it was stored, kept for a later write, or not stored, and why."""
        exchange = self.stamp().exchange(prompt, answer, memories, calls)
        self.history.append(exchange)
        return self.session_memory.keep(exchange)

    def resume(self, thread_id: str) -> list[Exchange]:
        """Continue a stored thread: its history becomes this conversation, oldest first (a fork's
        begins with its source's, up to where it was forked: ocat.operations.forks).

        New exchanges keep the thread id, carry this session's id, and the next
        continuation sequence (the thread's highest so far, plus one).
        """
        from ocat.operations.forks import link_of, thread_history  # noqa: PLC0415 - loads with the first /continue

        store = self.session_memory.store
        if store is None:
            raise OcatError(f"memory is off: {self.session_memory.error or 'not ready yet'}")
        history = thread_history(store, thread_id)
        own = [e for e in history if e.thread_id == thread_id]
        if not own:
            raise OcatError(f"no thread {thread_id}")
        self.thread_id = thread_id
        self.continuation_seq = max(e.thread_continuation_seq for e in own) + 1
        self.history = history
        self.forked_from = link_of(own)
        self._start_wake()
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
        self.session_memory.forget(exchange_id)
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
        store = self.session_memory.store
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
        self._start_wake()

    def _start_wake(self) -> None:
        """This thread's wake block, made now when memory is open, so its first turn reads it ready
        (ocat.chat.turn_inputs.ThreadWake.prepare; while memory opens, the first turn waits and makes it)."""
        self.wake = ThreadWake(self.thread_id)
        self.wake.prepare(self.session_memory, self.scope().project)

def open_chat(settings: Settings, *, dummy: bool, serve: bool, stream: IO[str], ask: Ask | None = None) -> ChatSession:
    """`ChatSession.open` for a terminal: a first-use download of the model reports its
    progress, and where the model went, on `stream` (stderr). A long-lived chat (`serve`)
    warms memory up in the background."""
    printer = memory.ProgressPrinter(stream)
    session = None
    try:
        session = ChatSession.open(settings, dummy=dummy, serve=serve, progress=printer, ask=ask)
    finally:
        printer.finish(session.session_memory.fetched if session is not None else None)
    if serve:
        # A chat that waits for its first prompt readies the model and the store's floor
        # meanwhile, as the full-screen chat does; a one-shot (`--ask`) asks at once.
        # Not a daemon: leaving the chat at once waits for it (a second or two) rather than
        # aborting in the model's native threads at interpreter shutdown.
        threading.Thread(target=_warm_up, args=(session,), name="ocat-warm-up", daemon=False).start()
    return session


def _warm_up(session: ChatSession) -> None:
    """Ready memory's model and the store's floor, then what the first turn reads (a thread of its own)."""
    warm_memory(session.session_memory)
    session.prepare_turns()
