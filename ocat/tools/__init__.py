"""The tools the chat model may call, and what became of each call.

This is the front door: a turn (ocat.chat.turn) asks its session for a `ToolBox`, offers its
`schemas()` to the model, and `run`s each `ToolCall` the model makes; the faces show the
calls. The rooms behind it: `calls` (one call, assembled from a streamed answer),
`box` (the specs, argument checks, budgets and errors), `memory_tools` (search_memory,
read_thread, remember), `mcp_tools` (the tools of the user's MCP servers, each call asking
consent first), `server_tools` (those servers as the session owns them), `listing` (what
/tools and `ocat --list-tools` show) and `support` (which models call tools).
"""

from __future__ import annotations

from ocat.tools.box import ToolBox, ToolOutcome, ToolSpec
from ocat.tools.calls import CallAssembler, CallState, ToolCall

__all__ = ["CallAssembler", "CallState", "ToolBox", "ToolCall", "ToolOutcome", "ToolSpec"]
