"""One tool call the model made: assembled from a streamed answer, then run, timed and summed up.

Providers stream a call in pieces, OpenAI's way: the first delta of call `index` brings its id
and name, the next ones bring its arguments a few characters at a time, and several calls may
come in one step. `CallAssembler` puts them together; a `ToolCall` then carries everything the
faces show and the exchange keeps: name, arguments, result, time, error.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ocat.records import CalledTool, compact_json


def clock() -> float:
    """Now, for timing calls (a test may set a clock of its own, so pictures never move)."""
    return time.monotonic()


class CallState(Enum):
    """Where a call is: asked for by the model, running, done, or failed (its result says why)."""

    ASKED = "asked"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass
class ToolCall:
    """One call of one tool, from the model's request to the result it was given."""

    id: str
    name: str
    # The arguments as the model wrote them (JSON text, perhaps not valid).
    arguments: str = ""
    state: CallState = CallState.ASKED
    # What the model is given back (text); what the faces show in one line; the record ids a
    # search or a read returned (kept with the exchange); how many results.
    result: str = ""
    summary: str = ""
    ids: tuple[str, ...] = ()
    count: int | None = None
    # Why the call failed (bad arguments, an unknown tool, a tool that raised), or None.
    error: str | None = None
    started: float | None = None
    seconds: float | None = None
    # Set by a tool that changed memory (remember): what the faces say about it.
    changed: str | None = None
    parsed: dict[str, Any] = field(default_factory=dict)

    def start(self) -> None:
        """The call begins now."""
        self.state = CallState.RUNNING
        self.started = clock()

    def end(self, *, failed: bool = False) -> None:
        """The call has its result."""
        self.state = CallState.FAILED if failed else CallState.DONE
        if self.started is not None:
            self.seconds = clock() - self.started

    def fail(self, why: str) -> None:
        """The call failed, or was refused without running: the model reads why, as a tool error."""
        self.error = why
        self.result = f"error: {why}"
        self.summary = f"failed: {why}"
        self.end(failed=True)

    @property
    def ms(self) -> int | None:
        """How long it ran, in milliseconds."""
        return None if self.seconds is None else round(self.seconds * 1000)

    def line(self) -> str:
        """The call in one line, as every face shows it: what it did, how many results, how long
        ('searched "kitchen budget": 3 results · 14 ms'); a face escapes it for the terminal."""
        if self.state in (CallState.ASKED, CallState.RUNNING):
            return f"{self.name} …"
        took = f" · {self.ms} ms" if self.ms is not None else ""
        if self.error is not None:
            return f"{self.name} failed: {self.error}{took}"
        return f"{self.summary or self.name}{took}"

    def request_message(self) -> dict[str, Any]:
        """The call as the assistant message that asked for it lists it (OpenAI's format)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments or "{}"}}

    def result_message(self) -> dict[str, Any]:
        """The call's result as the tool message the model reads next: data, never system text."""
        return {"role": "tool", "tool_call_id": self.id, "content": self.result}

    def kept(self) -> CalledTool:
        """The call as the exchange keeps it (and `--ask --output json` lists it)."""
        arguments = self.arguments.strip() or "{}"
        try:
            arguments = compact_json(json.loads(arguments))
        except ValueError:
            pass  # kept as the model wrote it
        return CalledTool(self.name, arguments, self.count, self.ids, self.ms, self.error)


class CallAssembler:
    """The tool calls of one streamed answer, put together from their deltas."""

    def __init__(self) -> None:
        self._calls: dict[int, ToolCall] = {}

    def feed(self, deltas: Any) -> None:
        """Take a chunk's `delta.tool_calls` (objects or dicts, OpenAI's shape)."""
        for position, delta in enumerate(deltas or []):
            index = chunk_field(delta, "index")
            index = index if isinstance(index, int) else position
            call = self._calls.setdefault(index, ToolCall(id="", name=""))
            call_id = chunk_field(delta, "id")
            if call_id:
                call.id = str(call_id)
            function = chunk_field(delta, "function")
            name = chunk_field(function, "name") if function is not None else None
            if name:
                # Some providers send the whole name at once, some repeat it: never doubled.
                call.name = name if not call.name or name.startswith(call.name) else call.name + name
            pieces = chunk_field(function, "arguments") if function is not None else None
            if pieces:
                call.arguments += str(pieces)

    def calls(self) -> list[ToolCall]:
        """The calls, in their order; one without an id gets one (a provider that sends none)."""
        found = [self._calls[i] for i in sorted(self._calls)]
        for n, call in enumerate(found):
            call.id = call.id or f"call_{n}"
        return [call for call in found if call.name or call.arguments]


def chunk_field(value: Any, name: str) -> Any:
    """A field of a streamed chunk (or a delta, a call), whether it is a dict (the OpenAI road) or an
    object (litellm's)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
