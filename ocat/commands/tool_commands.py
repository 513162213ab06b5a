"""/tools: the MCP servers of this chat and their tools, taking an "always" back, and offering
tools again after a provider refused them (`/tools reset`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command
from ocat.commands.results import CommandResult
from ocat.errors import OcatError
from ocat.tools.listing import render_listing, tool_listing

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


@command("tools", "list the MCP servers and their tools, allowed or not ('deny SERVER.TOOL' takes an 'always' back; "
         "'reset' offers tools again to a model that refused them, and the tools a provider refused)",
         group="settings", example="/tools",
         arguments=(Arg("deny", "deny and a SERVER.TOOL, or reset", kind="rest", optional=True, default="",
                        metavar="deny SERVER.TOOL | reset"),))
def _tools(session: ChatSession, deny: str = "") -> CommandResult:
    words = deny.split()
    consent = session.server_tools.consent
    if not words:
        listing = render_listing(tool_listing(session.server_tools), asks=consent.ask is not None)
        return CommandResult(text="\n".join([listing, *consent.news()]))  # a damaged answers file: said here too
    if words == ["reset"]:
        return CommandResult(text=session.refusals.reset(session.settings.llm))
    if words[0] != "deny" or len(words) != 2 or "." not in words[1]:
        raise OcatError("usage: /tools, /tools deny SERVER.TOOL, or /tools reset")
    key = words[1]
    said = (f"{key} is no longer allowed always: the next call asks first." if consent.take_back(key)
            else f"{key} was not allowed always; nothing changed.")
    return CommandResult(text="\n".join([said, *consent.news()]))
