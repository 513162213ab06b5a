"""What a chat turn is given: the model it calls, the tools it may offer, the thread's wake block,
and what the conversation gives it as values (its history, the search, the exchange's stamp).

`ocat.chat.session.ChatSession.turn` makes these once per prompt and hands them down to a
`ocat.chat.turn.Turn`; nothing here calls back up into the session.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from ocat import llm
from ocat.chat.outcomes import MemorySearch
from ocat.records import CalledTool, Exchange, SearchHit
from ocat.text.tokens import estimate_tokens
from ocat.tools import ToolBox
from ocat.tools.support import offer_tools

if TYPE_CHECKING:
    from ocat.chat.session_memory import SessionMemory
    from ocat.config.settings import LLMSettings
    from ocat.llm import AnswerStream
    from ocat.memory import ProjectScope
    from ocat.operations.wake import WakeBlock
    from ocat.tools import ToolSpec
    from ocat.tools.server_tools import ServerTools
    from ocat.tools.support import Refusals


log = logging.getLogger(__name__)

# How long a thread's first turn waits for memory still opening before its wake block is built
# (without the recent threads, then, and built again on the next turn that has memory).
WAKE_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class Model:
    """The chat model as a turn calls it: its settings, and whether answers are made up (dummy mode)."""

    settings: LLMSettings
    dummy: bool = False

    def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> AnswerStream:
        """One model call's answer, piece by piece; its `usage` is known once it has finished, and
        its `tool_calls` when it was offered `tools`."""
        return llm.stream(messages, self.settings, dummy=self.dummy, tools=tools)

    def token_limit(self) -> int | None:
        """The model's input window in tokens (None in dummy mode: nothing is cut)."""
        return None if self.dummy else llm.input_token_limit(self.settings)


@dataclass(frozen=True)
class ExchangeStamp:
    """What the conversation writes on each exchange it makes: its thread, session and place in the
    thread, where it was said, its project and the fork it continues."""

    thread_id: str
    session_id: str
    continuation_seq: int = 0
    origin: str = ""
    project: str = ""
    forked_from_thread: str = ""
    forked_from_exchange: str = ""

    def exchange(self, prompt: str, answer: str, memories: list[SearchHit],
                 calls: tuple[CalledTool, ...] = ()) -> Exchange:
        """The exchange of this prompt and its answer, with the memories it was given and its tool calls."""
        return Exchange(
            user_prompt=prompt, assistant_response=answer, thread_id=self.thread_id, session_id=self.session_id,
            prior_exchange_ids=tuple(h.id for h in memories), thread_continuation_seq=self.continuation_seq,
            tool_calls=calls, origin=self.origin, project=self.project,
            forked_from_thread=self.forked_from_thread, forked_from_exchange=self.forked_from_exchange,
        )


@dataclass(frozen=True)
class TurnContext:
    """What the conversation gives one turn: the settings of its model's prompt, the history the
    model is sent, the search, the stamp, and the conversation's history that the finished
    exchange joins."""

    llm: LLMSettings
    started: datetime
    recent: tuple[Exchange, ...]
    search: MemorySearch
    stamp: ExchangeStamp
    # The conversation itself: the finished exchange is appended to it.
    history: list[Exchange] = field(default_factory=list)


class ToolOffer:
    """The memory tools a chat offers its model, as the provider is offered them (OpenAI's function
    format), or None when it is offered no tool: made once (`ChatSession.prepare_turns`, when memory
    has opened; else the first turn), and again only when what they depend on has changed (the
    settings, memory on or off, dummy mode, what the provider refused). A turn hands the model this
    ready list; the tools that run are made for a turn only once the model calls one (`TurnTools.box`)."""

    def __init__(self) -> None:
        self._made: tuple[tuple[object, ...], list[dict[str, Any]] | None] | None = None

    def schemas(self, depends_on: tuple[object, ...], make: Callable[[], list[dict[str, Any]] | None]
                ) -> list[dict[str, Any]] | None:
        """The list made for `depends_on` (compared by equality: the same settings object is the
        same at once), made now by `make` when it differs from the last one's."""
        made = self._made
        if made is None or made[0] != depends_on:
            made = self._made = (depends_on, make())
        return made[1]


class TurnTools:
    """What one turn may call: `offered` gives the model its tools (memory's made before the turn,
    the MCP servers' asked now), `box` makes the ones that run once the model calls one."""

    def __init__(self, session_memory: SessionMemory, servers: ServerTools, refusals: Refusals, project: ProjectScope,
                 offer: ToolOffer) -> None:
        self.session_memory = session_memory
        self.servers = servers
        self.refusals = refusals
        self.project = project
        self.offer = offer
        # What the turn should say of the servers (one that failed to start), once `offered` has asked them.
        self.news: list[str] = []
        # The MCP servers' tools offered this turn (None: not asked yet).
        self._server_specs: list[ToolSpec] | None = None

    @property
    def max_steps(self) -> int:
        """Model calls of a turn that offer tools (`tools.max_steps`)."""
        return self.session_memory.settings.tools.max_steps

    @property
    def max_calls_per_step(self) -> int:
        """Calls of one step that run (`tools.max_calls_per_step`)."""
        return self.session_memory.settings.tools.max_calls_per_step

    def offered(self) -> list[dict[str, Any]] | None:
        """The tools this turn offers the model, as the provider is offered them, or None: none in
        dummy mode, with tools off, or for a model that cannot call them. Memory's tools need memory
        on; the MCP servers' tools (started now if the face did not start them) do not, and are
        asked only when servers are configured."""
        schemas = self.memory_schemas()
        if schemas is None:
            return None
        if self.session_memory.settings.mcp_servers:  # their tools come and go with the servers: asked on every turn
            taken = {schema["function"]["name"] for schema in schemas}
            self._server_specs = [spec for spec in self.servers.specs(taken) if spec.name not in self.refusals.dropped]
            schemas = schemas + [spec.schema() for spec in self._server_specs]
            self.news = self.servers.news()
        return schemas or None

    def memory_schemas(self) -> list[dict[str, Any]] | None:
        """Memory's tools as the provider is offered them ([] with memory off), or None when the
        model is offered no tool at all: the chat's `ToolOffer`, made again only when what it
        depends on has changed."""
        mine = self.session_memory
        memory_on = mine.store is not None and mine.model_available()
        depends_on = (mine.settings, mine.store if memory_on else None, mine.dummy, self.refusals.tools_on,
                      self.refusals.changes)
        return self.offer.schemas(depends_on, self._make_memory_schemas)

    def _make_memory_schemas(self) -> list[dict[str, Any]] | None:
        if not self._offers_tools():
            return None
        return [spec.schema() for spec in self._memory_tools(set()) if spec.name not in self.refusals.dropped]

    def box(self, in_context: set[str]) -> ToolBox | None:
        """The tools that run this turn's calls (ocat.tools), or None when no tool is offered:
        memory's, and the MCP servers' offered this turn (asked now if `offered` did not).
        `in_context`: the memories the model already has (marked, not repeated, by a search)."""
        if not self._offers_tools():
            return None
        specs = self._memory_tools(in_context)
        settings = self.session_memory.settings
        if self._server_specs is not None:
            specs += self._server_specs
        elif settings.mcp_servers:
            specs += self.servers.specs({spec.name for spec in specs})
        specs = [spec for spec in specs if spec.name not in self.refusals.dropped]
        return ToolBox(specs, result_tokens=settings.tools.result_tokens, count=estimate_tokens) if specs else None

    def stray_news(self) -> list[str]:
        """What the MCP servers wrote to stdout that is not JSON-RPC, said once (none configured: nothing)."""
        return self.servers.stray_news() if self.session_memory.settings.mcp_servers else []

    def _offers_tools(self) -> bool:
        """Whether the model is offered tools at all: not in dummy mode, with tools on, a model
        that calls them (ocat.tools.support) and no refusal of them this session."""
        mine = self.session_memory
        return not mine.dummy and self.refusals.tools_on and offer_tools(mine.settings)

    def _memory_tools(self, in_context: set[str]) -> list[ToolSpec]:
        store = self.session_memory.store
        if store is None or not self.session_memory.model_available():
            return []
        from ocat.tools.memory_tools import MemoryToolContext, memory_tools  # noqa: PLC0415 - loads with the first turn

        return memory_tools(MemoryToolContext(store, self.session_memory.settings, in_context=set(in_context),
                                              project=self.project))


@dataclass(frozen=True)
class GivenWake:
    """The wake block as one turn gives it: the block, what the model reads of it (None: nothing to
    tell), whether no turn of the thread was given this block before (`new`: `/showcontext on` shows
    it then), and whether no turn of the thread was given any block before (`first`)."""

    block: WakeBlock
    text: str | None
    new: bool
    first: bool


class ThreadWake:
    """One thread's wake block (ocat.operations.wake), made before the thread's first turn when it
    can be (`prepare`: when memory has opened, when the thread starts), else on that turn. The first
    turn is given the block as it would have made it: one made before is made again when the store's
    newest thread has changed since (an exchange written meanwhile, here or by another ocat)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.block: WakeBlock | None = None
        # What the model reads of `block`, made with it (None: the block has nothing to tell).
        self.text: str | None = None
        # The block was built while memory was still opening: the next turn with memory builds it again.
        self.without_memory = False
        # The last block a turn was given (None: no turn of this thread has been given one yet).
        self.given: WakeBlock | None = None
        # The store's newest thread as the block was made from it (None: made without memory).
        self._newest: object = None
        # A turn and the warm-up after memory opened may build at once: one builds, the other reads it.
        self._building = threading.Lock()

    def forget(self) -> None:
        """The block changed (a pin, the profile, the project): the next turn builds it again."""
        self.block = None

    def prepare(self, session_memory: SessionMemory, project: str | None) -> None:
        """Make the block now, unless memory is still opening (the first turn waits for it then:
        its block is the same sent at once or later) or it is made already. Never raises: a block
        that could not be made is made by the first turn, which says what failed."""
        if not (session_memory.settings.wake.enabled and session_memory.opening.settled):
            return
        try:
            self._current(session_memory, project)
        except Exception:
            log.warning("making the wake block of thread %s before its first turn failed", self.thread_id,
                        exc_info=True)

    def for_turn(self, session_memory: SessionMemory, project: str | None) -> WakeBlock | None:
        """This thread's block (made when first asked unless `prepare` made it; None when
        `wake.enabled` is off). Memory that is off or failing leaves its parts out: the profile is still read.

        Not made yet, it waits for memory still opening, at most WAKE_WAIT_SECONDS, so the first
        turn's block is the same sent at once or later. `project`: the chat's (its recent threads are listed first)."""
        if not session_memory.settings.wake.enabled:
            return None
        if (self.given is None and self.block is not None and self._newest is not None
                and _newest_thread(session_memory) != self._newest):
            self.forget()  # made before this first turn, and the store has changed since: made again now
        if self.block is None:
            session_memory.opening.wait(WAKE_WAIT_SECONDS)
        return self._current(session_memory, project)

    def give(self, session_memory: SessionMemory, project: str | None) -> GivenWake | None:
        """The block as a turn gives it to the model (`for_turn`), with what the model reads of it."""
        block = self.for_turn(session_memory, project)
        if block is None:
            return None
        with self._building:
            text = self.text if block is self.block else _model_text(block)
        before, self.given = self.given, block
        return GivenWake(block, text, new=block is not before, first=before is None)

    def _current(self, session_memory: SessionMemory, project: str | None) -> WakeBlock:
        with self._building:
            block = self.block
            if block is not None and not (self.without_memory and session_memory.model_available()):
                return block
            from ocat.operations.wake import build_wake  # noqa: PLC0415 - loads with the first thread's block

            settings = session_memory.settings
            available = session_memory.model_available()
            store = session_memory.store if available else None
            # This thread is sent as history, never listed as a recent one (a fork's first exchange is stored by now).
            block = build_wake(settings, store, exclude_thread=self.thread_id, project=project)
            self.block, self.text = block, _model_text(block)
            self._newest = _newest_thread(session_memory) if store is not None else None
            self.without_memory = (not available and session_memory.error is None
                                   and settings.vector_store.enabled)
            return block


def _newest_thread(session_memory: SessionMemory) -> object:
    """The store's most recently active thread and its size and times (what a block's recent threads
    change with), or a value equal to no other when it cannot be read."""
    store = session_memory.store
    try:
        return tuple(store.threads.recent(1)) if store is not None else None
    except Exception:  # a damaged index, a store that failed: the block is made again, with what can be read
        return object()


def _model_text(block: WakeBlock) -> str | None:
    """What the model reads of a wake block, or None when it has nothing to tell."""
    return None if block.empty else block.text()
