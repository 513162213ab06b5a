"""The tools the chat model may call, and what became of each call.

A turn (ocat.chat.turn) asks its session for a `ToolBox`, offers its `schemas()` to the model,
and `run`s each `ToolCall` the model makes; the faces show the calls. The package has no front
door: the session, the faces and the slash commands each import the module they use, and this
file only names the box and the call. The modules: `calls` (one call: run, timed, summed up),
`box` (the specs, argument checks, budgets and errors), `memory_tools` (search_memory,
read_thread) with `remember_tool` (remember), `mcp_tools` (the tools of the user's MCP servers,
each call asking consent first), `server_tools` (those servers as the session owns them),
`listing` (what /tools and `ocat --list-tools` show) and `support` (which models call tools).
"""

from __future__ import annotations

from ocat.tools.box import ToolBox, ToolOutcome, ToolSpec
from ocat.tools.calls import CallState, ToolCall

__all__ = ["CallState", "ToolBox", "ToolCall", "ToolOutcome", "ToolSpec"]
