"""The tools of the user's MCP servers as a turn offers them: each call asks consent first (a
denied call never reaches its server), then runs on its server; its result is data the model
reads as a tool message, and what the faces show of it is escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocat.mcp_client.consent import DENIED
from ocat.text.terminal import printable, shorten
from ocat.tools.box import ToolFailed, ToolOutcome, ToolSpec
from ocat.tools.calls import result_gist
from ocat.mcp_client.servers import result_text

if TYPE_CHECKING:
    from ocat.mcp_client.consent import Consent
    from ocat.mcp_client.servers import McpServers, ServerTool


class ToolDenied(ToolFailed):
    """The user (or the lack of one) did not allow the call: the model reads that, the turn goes on."""


def server_tools(servers: McpServers, consent: Consent, taken: set[str]) -> list[ToolSpec]:
    """A ToolSpec for each tool of the servers that are up, named SERVER__TOOL (none clashing
    with `taken`, the memory tools' names). A crashed server restarts at most once in the turn
    these specs are built for."""
    restarted: set[str] = set()

    def cancel() -> None:  # the turn was cancelled: withdraw a question, give up the calls under way
        consent.abandon()
        servers.cancel_calls()

    specs = []
    for tool in servers.tools():
        if tool.qualified in taken:
            continue
        specs.append(ToolSpec(tool.qualified, tool.description, tool.schema, _runner(servers, consent, tool, restarted),
                              cancel=cancel, label=f"{tool.server}.{tool.name}"))
    return specs


def _runner(servers: McpServers, consent: Consent, tool: ServerTool, restarted: set[str]) -> Any:
    def run(arguments: dict[str, Any]) -> ToolOutcome:
        if not consent.decide(tool.server, tool.name, arguments, tool.read_only):
            raise ToolDenied(DENIED)
        result = servers.call(tool.server, tool.name, arguments, restarted=restarted)
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolFailed(f"{tool.server}.{tool.name} said: {shorten(printable(text), 300)}")
        return ToolOutcome(text, f"{tool.server}.{tool.name}: {result_gist(text)}")

    return run
