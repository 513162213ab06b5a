"""The tools of the user's MCP servers as a turn offers them: each call asks consent first (a
denied call never reaches its server), then runs on its server; its result is data the model
reads as a tool message, and what the faces show of it is escaped.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from ocat.mcp_client.consent import DENIED
from ocat.mcp_client.server_status import ServerState
from ocat.text.terminal import printable, shorten
from ocat.tools.box import ToolFailed, ToolOutcome, ToolSpec
from ocat.tools.calls import result_gist
from ocat.mcp_client.server_tool import result_text

if TYPE_CHECKING:
    from ocat.mcp_client.consent import Consent
    from ocat.mcp_client.servers import McpServers, ServerStatus, ServerTool

# Starts a server if it was not, and waits for it (ServerTools.ready).
Ready = Callable[[str], "ServerStatus"]


class ToolDenied(ToolFailed):
    """The user (or the lack of one) did not allow the call: the model reads that, the turn goes on."""


def server_tools(servers: McpServers, consent: Consent, taken: set[str], tools: list[ServerTool],
                 ready: Ready) -> list[ToolSpec]:
    """A ToolSpec for each of `tools` (a server's own list, or the cached one of a server not
    started yet, which `ready` starts at the first call), named SERVER__TOOL (none clashing with
    `taken`, the memory tools' names). A crashed server restarts at most once in the turn these
    specs are built for."""
    restarted: set[str] = set()

    def cancel() -> None:  # the turn was cancelled: withdraw a question, give up the calls under way
        consent.abandon()
        servers.cancel_calls()

    specs = []
    for tool in tools:
        if tool.qualified in taken:
            continue
        runner = _runner(servers, consent, functools.partial(_live, tool, ready, restarted), restarted)
        specs.append(ToolSpec(tool.qualified, tool.description, tool.schema, runner, cancel=cancel,
                              label=f"{tool.server}.{tool.name}"))
    return specs


def _live(offered: ServerTool, ready: Ready, restarted: set[str]) -> ServerTool:
    """The tool as its server lists it now (a cached one may have changed or gone), its server
    started first if it was not; ToolFailed when the server no longer has it."""
    status = ready(offered.server)
    if status.state is ServerState.FAILED:
        restarted.add(offered.server)  # it just failed to start: the call says why, not a second start
    if status.state is not ServerState.READY:
        return offered
    for tool in status.tools:
        if tool.name == offered.name:
            return tool
    names = ", ".join(tool.name for tool in status.tools) or "none"
    raise ToolFailed(f"{offered.server}.{offered.name} is no longer a tool of {offered.server} (its list changed "
                     f"since ocat kept it); its tools now: {shorten(names, 300)}")


def _runner(servers: McpServers, consent: Consent, live: Callable[[], ServerTool], restarted: set[str]) -> Any:
    def run(arguments: dict[str, Any]) -> ToolOutcome:
        tool = live()  # asked about as the server describes it now (read-only or not)
        if not consent.decide(tool.server, tool.name, arguments, tool.read_only):
            raise ToolDenied(DENIED)
        result = servers.call(tool.server, tool.name, arguments, restarted=restarted)
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolFailed(f"{tool.server}.{tool.name} said: {shorten(printable(text), 300)}")
        return ToolOutcome(text, f"{tool.server}.{tool.name}: {result_gist(text)}")

    return run
