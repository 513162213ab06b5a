"""One tool call the model made: run, timed and summed up.

The model layer puts a call together from the streamed answer (`ocat.llm.call_assembler`); a
`ToolCall` made from it then carries everything the faces show and the exchange keeps: name,
arguments, result, time, error.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ocat.records import CalledTool, compact_json
from ocat.text.terminal import printable, shorten


def clock() -> float:
    """Now, for timing calls (a test may set a clock of its own, so pictures never move)."""
    return time.monotonic()


def fitted(what: str, end: str, width: int | None) -> str:
    """`what` then `end` within `width` characters: `end` (how long the call took) is kept whole,
    and so is what follows the last ": " of `what` (its count of results) while there is room; the
    rest (what was asked) is cut with "…". A 80-column window cut the "ms" off before."""
    if width is None or len(what) + len(end) <= width:
        return what + end
    room = max(width - len(end), 1)
    head, sep, tail = what.rpartition(": ")
    if sep and len(tail) + len(sep) + 8 <= room:
        return shorten(head, room - len(tail) - len(sep)) + sep + tail + end
    return shorten(what, room) + end


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
    # The name the model called (SERVER__TOOL for an MCP server's tool: what providers allow).
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
    # The tool as a person reads it (server.tool), set by the tool box once it knows the tool.
    label: str = ""

    @property
    def shown(self) -> str:
        """The tool's name as every face shows it: server.tool for an MCP server's tool (never the
        SERVER__TOOL the model is offered), the tool's own name otherwise."""
        return self.label or self.name

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

    def line(self, width: int | None = None) -> str:
        """The call in one line, as every face shows it: what it did, how many results, how long
        ('searched "kitchen budget": 3 results · 14 ms'); a face escapes it for the terminal.
        Within `width` characters, when given, what was asked is cut ("…") and the rest is kept."""
        if self.state in (CallState.ASKED, CallState.RUNNING):
            return fitted(self.shown, " …", width)
        took = f" · {self.ms} ms" if self.ms is not None else ""
        if self.error is not None:
            return fitted(f"{self.shown} failed: {self.error}", took, width)
        return fitted(self.summary or self.shown, took, width)

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


def result_gist(text: str, width: int = 80) -> str:
    """A tool's result in one line of at most `width` characters, as a person would sum it up: a
    JSON object by its first fields ('timezone: Europe/Paris, datetime: 2026-…'), a JSON list by its
    length and its first item's shape ('3 items: {name, size}'), other text by its first line.
    Escaped for the terminal: the result is whatever the tool wrote."""
    stripped = text.strip()
    if not stripped:
        return "(no content)"
    try:
        value = json.loads(stripped) if stripped[0] in "{[" else None
    except ValueError:
        value = None  # text that only starts like JSON: its first line, as any text
    if isinstance(value, dict):
        said = ", ".join(f"{key}: {_in_brief(item)}" for key, item in value.items()) if value else "(empty object)"
    elif isinstance(value, list):
        said = _counted(value)
    else:
        said = stripped.splitlines()[0]
    return shorten(printable(" ".join(said.split())), width)


def _counted(items: list[Any]) -> str:
    """A JSON list: how many items, and the first one's shape (an object's keys) or the first few values."""
    if not items:
        return "(empty list)"
    head = f"{len(items)} item{'s' if len(items) != 1 else ''}"
    if isinstance(items[0], dict):
        return f"{head}: {_keys(items[0])}"
    return f"{head}: " + ", ".join(_in_brief(item) for item in items[:5])


def _in_brief(value: Any) -> str:
    """One value of a JSON result in a few words: a string as it is, an object by its keys, a list by its length."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _keys(value)
    if isinstance(value, list):
        return f"[{len(value)} item{'s' if len(value) != 1 else ''}]"
    return json.dumps(value)


def _keys(value: dict[str, Any]) -> str:
    """An object's shape: its keys, the first few."""
    keys = list(value)
    return "{" + ", ".join(str(k) for k in keys[:6]) + (", …" if len(keys) > 6 else "") + "}"
