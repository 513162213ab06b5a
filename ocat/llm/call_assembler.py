"""The tool calls of a streamed answer, put together from their pieces (OpenAI's way).

Providers stream a call in pieces: the first delta of call `index` brings its id and name, the
next ones bring its arguments a few characters at a time, and several calls may come in one step.
`CallAssembler` puts them together into `AskedCall`s, what the model asked for and nothing more;
the turn makes each a `ocat.tools.calls.ToolCall`, which runs, is timed and is shown. The model
layer knows no tool: the tools are above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocat.llm.openai_compatible import chunk_field


@dataclass(frozen=True)
class AskedCall:
    """One tool call as the model asked for it: its id, the tool's name (SERVER__TOOL for an MCP
    server's tool) and the arguments as it wrote them (JSON text, perhaps not valid)."""

    id: str
    name: str
    arguments: str


@dataclass
class _Pieces:
    id: str = ""
    name: str = ""
    arguments: str = ""


class CallAssembler:
    """The tool calls of one streamed answer, put together from their deltas."""

    def __init__(self) -> None:
        self._calls: dict[int, _Pieces] = {}

    def feed(self, deltas: Any) -> None:
        """Take a chunk's `delta.tool_calls` (objects or dicts, OpenAI's shape)."""
        for position, delta in enumerate(deltas or []):
            index = chunk_field(delta, "index")
            index = index if isinstance(index, int) else position
            call = self._calls.setdefault(index, _Pieces())
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

    def calls(self) -> list[AskedCall]:
        """The calls, in their order; one without an id gets one (a provider that sends none)."""
        found = [self._calls[i] for i in sorted(self._calls)]
        return [AskedCall(call.id or f"call_{n}", call.name, call.arguments)
                for n, call in enumerate(found) if call.name or call.arguments]
