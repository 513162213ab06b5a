"""One chat turn, written once: recall -> prepare -> (model step -> tool calls)* -> finish.

The full-screen chat, the line mode, `--ask` and `/retry` (which sends its prompt again as a
new turn) all drive a `Turn` and only render it, as every face of simonw/llm iterates one
`Response`. A turn is given its collaborators by the session (`ChatSession.turn`): the
session's memory (searched once, and given the exchange), the model (ocat.chat.turn_inputs.Model),
the tools and the thread's wake block, and what the conversation gives it
as values (ocat.chat.turn_inputs.TurnContext); it never calls back into the session. A turn is a
loop: a model call, then the tools it asked for (ocat.tools), then the next call with their
results, until there is an answer; at most `tools.max_steps` calls offer tools, and one last
call without them follows. The turn owns everything that happened to it: what recall found
(`recalled`), every step and tool call, the answer's pieces, usage and timings, and whether the
exchange was remembered (`recorded`). Iterating it gives `TurnEvent`s (ocat.chat.outcomes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from enum import Enum
from typing import TYPE_CHECKING, AsyncIterator

from ocat.chat.messages import TurnRequest, build_request, system_prompt
from ocat.chat.outcomes import Recall, Recorded, TextPiece, ToolFinished, ToolStarted, TurnEvent
from ocat.llm import ToolRejected, ToolsRefused, Usage
from ocat.tools.calls import CallState, ToolCall

if TYPE_CHECKING:
    from ocat.chat.session_memory import SessionMemory
    from ocat.chat.turn_inputs import Model, ThreadWake, TurnContext, TurnTools
    from ocat.operations.wake import WakeBlock
    from ocat.records import Exchange, SearchHit
    from ocat.tools import ToolBox


def turn_clock() -> float:
    """Now, for a turn's timings (a test may set a clock of its own, so pictures never move)."""
    return time.monotonic()


class TurnState(Enum):
    """Where a turn is: each step moves it forward, and `finish` or `cancel` ends it."""

    NEW = "new"
    RECALLED = "recalled"
    ANSWERING = "answering"
    ANSWERED = "answered"
    RECORDING = "recording"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"


class TurnError(RuntimeError):
    """A step asked of a turn out of order (a programming error, not the user's)."""


class Turn:
    """One prompt and its answer: `recall()`, `prepare()`, `async for event in turn`, then
    `finish()` records the exchange or `cancel()` drops it.

    `recall` and `prepare` block (the store, the tokenizer, litellm's model list): the
    full-screen chat runs them off its event loop; iterating runs whichever has not run yet.
    Tool calls run in a thread (the store is synchronous); cancelling the iteration (Esc)
    stops the turn at once, a call under way finishing in its thread with no one to read it.
    """

    def __init__(self, prompt: str, *, context: TurnContext, session_memory: SessionMemory, model: Model,
                 tools: TurnTools, wake: ThreadWake) -> None:
        self.prompt = prompt
        self.context = context
        self.session_memory = session_memory
        self.model = model
        self.tools = tools
        self.thread_wake = wake
        self.state = TurnState.NEW
        self.recalled = Recall()
        # The thread's wake block, as the model is given it with this turn (None when off), and
        # whether this turn built it (the first of a thread: `/showcontext on` shows it then).
        self.wake: WakeBlock | None = None
        self._wake_text: str | None = None  # what the model reads of it, made with the block
        self.wake_is_new = False
        # What went wrong with memory on this turn while memory stayed on, and what to know of
        # the wake block (a profile left out), in words; None when nothing did.
        self.problem: str | None = None
        self.request: TurnRequest | None = None
        self.pieces: list[str] = []
        # Every tool call of the turn, in order, and how many model calls it made.
        self.calls: list[ToolCall] = []
        self.steps = 0
        self.box: ToolBox | None = None
        # What the faces should say about tools this turn (a model that refused them, the step limit).
        self.tool_notes: list[str] = []
        self.usage: Usage | None = None
        # The exchange, once the whole answer has come: held by memory until `finish` writes it.
        self.answered: Exchange | None = None
        self._finishing = threading.Lock()
        self.recorded: Recorded | None = None
        self.error: BaseException | None = None
        self.started = turn_clock()
        self.first_piece_at: float | None = None
        self.answered_at: float | None = None
        # Memory's state as the turn began: a face says so when a turn turned it off, or when
        # memory that had failed (not memory still loading) is back.
        self._had_memory = session_memory.on
        self._memory_had_failed = session_memory.error is not None

    # -- the steps -------------------------------------------------------------------

    def recall(self) -> list[SearchHit]:
        """Search memory for this prompt (what is already in view is left out); a failed search
        leaves the turn without memories and says so in `problem`."""
        self._expect(TurnState.NEW)
        given = self.thread_wake.give(self.session_memory, self.context.search.limits.project.project)
        self.wake = given.block if given is not None else None
        self._wake_text = given.text if given is not None else None
        # Given to a turn for the first time: the thread's first, or the first with memory after one without it.
        self.wake_is_new = given is not None and given.new and given.text is not None
        search = self.context.search
        if self.wake is not None:  # the model has the pinned memories in the wake block already
            search = dataclasses.replace(search, in_view=search.in_view | frozenset(self.wake.pinned_ids))
        self.recalled = self.session_memory.recall(search)
        notes = list(given.block.notes) if given is not None and given.new and given.first else []
        # What the user should know about the block (a profile left out or cut), once a thread.
        self.problem = "; ".join([*notes, *([self.recalled.problem] if self.recalled.problem else [])]) or None
        self.state = TurnState.RECALLED
        return self.recalled.hits

    def prepare(self) -> TurnRequest:
        """Build the messages the model is sent (recalling first if that has not run): system
        prompt, the wake block, the memories, the history that fits the model's window, the prompt.
        May import litellm (the model's window), so the full-screen chat runs it off its loop."""
        if self.state is TurnState.NEW:
            self.recall()
        self._expect(TurnState.RECALLED)
        if self.request is None:
            self.request = build_request(
                self.prompt, system=system_prompt(self.context.llm, self.context.started),
                history=list(self.context.recent), memories=self.memories,
                token_limit=self.model.token_limit(), wake=self._wake_text)
        return self.request

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        return self._answer()

    async def _answer(self) -> AsyncIterator[TurnEvent]:
        request = self.prepare()
        self.state = TurnState.ANSWERING
        # The tools offered, as the provider is offered them: made before the turn (ToolOffer), but
        # for the MCP servers' (asked now: in a thread, a server may be starting).
        offered = await asyncio.to_thread(self.tools.offered)
        self.tool_notes.extend(self.tools.news)  # a server that failed to start: said once
        limit = self.tools.max_steps
        messages = list(request.messages)
        try:
            while True:
                tools = offered if self.steps < limit else None
                stream = self.model.stream(messages, tools=tools)
                self.steps += 1
                said: list[str] = []
                try:
                    async for piece in stream:
                        if self.first_piece_at is None:
                            self.first_piece_at = turn_clock()
                        if not said and self.pieces and not self.pieces[-1].endswith("\n"):
                            piece = "\n\n" + piece  # a step after tool calls starts a paragraph of its own
                        said.append(piece)
                        self.pieces.append(piece)
                        yield TextPiece(piece)
                except ToolsRefused:
                    if said:
                        raise
                    self.tool_notes.append(self.tools.refusals.all_tools(self.model.settings))
                    offered = None
                    self.steps -= 1
                    continue
                except ToolRejected as rejected:  # one tool's definition: asked again without it
                    if said or not tools:
                        raise
                    self.tool_notes.append(self.tools.refusals.one_tool(rejected.tool, str(rejected)))
                    offered = [tool for tool in tools if tool["function"]["name"] != rejected.tool] or None
                    if self.box is not None:
                        self.box.drop(rejected.tool)
                    self.steps -= 1
                    continue
                self.usage = _added(self.usage, stream.usage)
                asked = stream.tool_calls if tools else []
                calls = [ToolCall(call.id, call.name, call.arguments) for call in asked]
                if not calls:
                    break
                # Made once, when the model first calls a tool (in a thread: memory may be reopened).
                box = self.box = self.box or await asyncio.to_thread(self._toolbox)
                if box is None:  # tools offered before the turn that can no longer run (tools turned off since)
                    self.tool_notes.append(f"the model asked for {', '.join(call.name for call in calls)}, "
                                           "but tools were turned off during this turn: not run")
                    break
                messages.append({"role": "assistant", "content": "".join(said) or None,
                                 "tool_calls": [call.request_message() for call in calls]})
                calls, refused = self._within_cap(calls)
                for call in calls:
                    self.calls.append(call)
                    box.start(call)  # named server.tool from its first line on
                    yield ToolStarted(call)
                    await asyncio.to_thread(box.run, call)
                    messages.append(call.result_message())
                    yield ToolFinished(call)
                messages.extend(call.result_message() for call in refused)
                self.tool_notes.extend(self.tools.stray_news())  # said during a call
                if self.steps >= limit:
                    self.tool_notes.append(
                        f"the model asked for tools {limit} times (tools.max_steps): it answers now without them")
        except BaseException as exc:
            # A provider failure or a cancellation: nothing of this turn is remembered.
            self.error = exc
            self.state = TurnState.FAILED
            raise
        self.answered_at = turn_clock()
        # Held before anything else can happen to the turn: from here on, every way out of the
        # chat keeps the exchange (in memory or in a file), whatever becomes of the face.
        kept = tuple(call.kept() for call in self.calls)
        self.answered = self.context.stamp.exchange(self.prompt, self.text, self.memories, kept)
        self.session_memory.hold(self.answered)
        self.state = TurnState.ANSWERED

    def _within_cap(self, calls: list[ToolCall]) -> tuple[list[ToolCall], list[ToolCall]]:
        """The calls of one step to run (the first `tools.max_calls_per_step`), and those past them,
        refused: each is a tool error, not run (a provider wants every call answered), and is not
        kept with the exchange; the faces say, once, how many."""
        most = self.tools.max_calls_per_step
        for call in calls[most:]:
            call.fail(f"at most {most} calls per step; this call was not run")
        if len(calls) > most:
            self.tool_notes.append(f"the model asked for {len(calls)} tool calls in one step: the {len(calls) - most} "
                                   f"past the first {most} were not run (tools.max_calls_per_step)")
        return calls[:most], calls[most:]

    def _toolbox(self) -> ToolBox | None:
        """The tools that run this turn's calls; the model has the injected memories and the wake block's pins."""
        in_context = {hit.id for hit in self.memories}
        if self.wake is not None:
            in_context |= set(self.wake.pinned_ids)
        return self.tools.box(in_context)

    async def answer(self) -> str:
        """The whole answer, for a face that shows it only once it is complete (`--ask`)."""
        async for _ in self:
            pass
        return self.text

    def finish(self) -> Exchange:
        """Record the answered exchange in the conversation and in memory (or keep it to be
        written later: `recorded` says which, and why)."""
        with self._finishing:  # a second `finish` (a face's, in another thread) is refused
            self._expect(TurnState.ANSWERED)
            self.state = TurnState.RECORDING
        assert self.answered is not None  # set with the state
        self.context.history.append(self.answered)  # the exchange joins the conversation
        recorded = self.session_memory.keep(self.answered)
        if recorded.stored and self._memory_had_failed:
            recorded = dataclasses.replace(recorded, memory_back=True)
        self.recorded = recorded
        self.state = TurnState.FINISHED
        return recorded.exchange

    @property
    def complete(self) -> bool:
        """Whether the whole answer has come (and so is kept, whatever happens to the face)."""
        return self.answered is not None

    def cancel(self) -> None:
        """Drop the turn: what was shown stays on screen, nothing of it is remembered. A turn whose
        answer had come in full is not dropped: its exchange stays held until written."""
        if self.state not in (TurnState.FINISHED, TurnState.RECORDING, TurnState.ANSWERED):
            self.state = TurnState.CANCELLED
        if self.box is not None and any(call.state is CallState.RUNNING for call in self.calls):
            self.box.cancel()  # an MCP server is told (MCP's cancellation); memory's tools just finish
        for call in self.calls:
            if call.state is CallState.RUNNING:
                call.error = "cancelled"
                call.end(failed=True)

    # -- what the faces show ------------------------------------------------------------

    @property
    def memories(self) -> list[SearchHit]:
        """The memories recall gave the model."""
        return self.recalled.hits

    @property
    def exchange(self) -> Exchange | None:
        """The exchange this turn recorded, once finished."""
        return self.recorded.exchange if self.recorded is not None else None

    @property
    def text(self) -> str:
        """The answer as it came (so far): faces escape it for the terminal, memory keeps it as is."""
        return "".join(self.pieces)

    @property
    def memory_lost(self) -> str | None:
        """Why memory went off during this turn's search (it was on when the turn began), or None."""
        return self.recalled.memory_lost

    @property
    def had_memory(self) -> bool:
        """Whether memory was on when the turn began."""
        return self._had_memory

    @property
    def stored(self) -> bool:
        """Whether the finished exchange is in memory (False in dummy mode, with memory off, or kept for later)."""
        return self.recorded is not None and self.recorded.stored

    def elapsed(self) -> float:
        """Seconds from the turn's start to its answer's end (or to now, while it runs)."""
        return (self.answered_at or turn_clock()) - self.started

    def _expect(self, state: TurnState) -> None:
        if self.state is not state:
            raise TurnError(f"this turn is {self.state.value}, not {state.value}")


def _added(total: Usage | None, more: Usage | None) -> Usage | None:
    """Two model calls' usage together (a turn with tool calls makes several)."""
    if more is None or total is None:
        return more or total
    cost = None if total.cost_usd is None or more.cost_usd is None else total.cost_usd + more.cost_usd
    return Usage(total.prompt_tokens + more.prompt_tokens, total.completion_tokens + more.completion_tokens, cost)
