"""What a chat turn is given: the model it calls, the tools it may offer, the thread's wake block,
and what the conversation gives it as values (its history, the search, the exchange's stamp).

`ocat.chat.session.ChatSession.turn` makes these once per prompt and hands them down to a
`ocat.chat.turn.Turn`; nothing here calls back up into the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class TurnTools:
    """What one turn may call: `box` makes the turn's tool box once; the rest is what it says of them."""

    session_memory: SessionMemory
    servers: ServerTools
    refusals: Refusals
    project: ProjectScope

    @property
    def max_steps(self) -> int:
        """Model calls of a turn that offer tools (`tools.max_steps`)."""
        return self.session_memory.settings.tools.max_steps

    @property
    def max_calls_per_step(self) -> int:
        """Calls of one step that run (`tools.max_calls_per_step`)."""
        return self.session_memory.settings.tools.max_calls_per_step

    def box(self, in_context: set[str]) -> ToolBox | None:
        """The tools this turn offers the model (ocat.tools), or None: none in dummy mode, with
        tools off, or for a model that cannot call them. Memory's tools need memory on; the MCP
        servers' tools (started now if the face did not start them) do not.
        `in_context`: the memories the model already has (marked, not repeated, by a search)."""
        settings = self.session_memory.settings
        if self.session_memory.dummy or not self.refusals.tools_on or not offer_tools(settings):
            return None
        specs = self._memory_tools(in_context)
        specs += self.servers.specs({spec.name for spec in specs})
        specs = [spec for spec in specs if spec.name not in self.refusals.dropped]
        return ToolBox(specs, result_tokens=settings.tools.result_tokens, count=estimate_tokens) if specs else None

    def _memory_tools(self, in_context: set[str]) -> list[ToolSpec]:
        store = self.session_memory.store
        if store is None or not self.session_memory.model_available():
            return []
        from ocat.tools.memory_tools import MemoryToolContext, memory_tools  # noqa: PLC0415 - loads with the first turn

        return memory_tools(MemoryToolContext(store, self.session_memory.settings, in_context=set(in_context),
                                              project=self.project))


class ThreadWake:
    """One thread's wake block (ocat.operations.wake): None until its first turn asks."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.block: WakeBlock | None = None
        # The block was built while memory was still opening: the next turn with memory builds it again.
        self.without_memory = False

    def forget(self) -> None:
        """The block changed (a pin, the profile, the project): the next turn builds it again."""
        self.block = None

    def for_turn(self, session_memory: SessionMemory, project: str | None) -> WakeBlock | None:
        """This thread's block (built on first use; None when `wake.enabled` is off). Memory that is
        off or failing leaves its parts out: the profile is still read.

        The first turn waits for memory still opening, at most WAKE_WAIT_SECONDS, so its block is
        the same sent at once or later. `project`: the chat's (its recent threads are listed first)."""
        settings = session_memory.settings
        if not settings.wake.enabled:
            return None
        if self.block is None:
            session_memory.opening.wait(WAKE_WAIT_SECONDS)
        elif not (self.without_memory and session_memory.model_available()):
            return self.block
        from ocat.operations.wake import build_wake  # noqa: PLC0415 - loads with the first turn

        available = session_memory.model_available()
        store = session_memory.store if available else None
        # This thread is sent as history, never listed as a recent one (a fork's first exchange is stored by now).
        self.block = build_wake(settings, store, exclude_thread=self.thread_id, project=project)
        self.without_memory = (not available and session_memory.error is None
                               and settings.vector_store.enabled)
        return self.block
