"""What `/tools` and `ocat --list-tools` show: each MCP server (its state, tool count and last
error) and each of its tools, with whether it may run without asking, and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocat.text.terminal import printable, shorten

if TYPE_CHECKING:
    from ocat.tools.server_tools import ServerTools


def tool_listing(server_tools: ServerTools) -> list[dict[str, Any]]:
    """The servers as plain values (the JSON of `--list-tools --output json`), starting them first."""
    consent = server_tools.consent
    listing = []
    for status in server_tools.statuses():
        tools = []
        for tool in status.tools:
            reason = consent.reason(tool.server, tool.name, tool.read_only)
            tools.append({"name": tool.name, "offered_as": tool.qualified, "read_only": tool.read_only,
                          "allowed": reason is not None, "allowed_by": reason,
                          "description": tool.description})
        listing.append({"server": status.name, "state": status.state, "command": status.command,
                        "error": status.error, "tools": tools})
    return listing


def render_listing(listing: list[dict[str, Any]], *, asks: bool) -> str:
    """The listing as text; `asks`: whether this face asks the user for a call not allowed beforehand."""
    if not listing:
        return ("No MCP servers are configured: add them under mcp_servers: in the config (docs/tools.md). "
                "Memory's own tools (search_memory, read_thread, remember) need no consent.")
    unallowed = "asks first" if asks else "denied here (no one to ask)"
    lines = []
    for server in listing:
        count = len(server["tools"])
        head = f"{server['server']}: {server['state']}, {count} tool{'s' if count != 1 else ''}"
        lines.append(printable(head + (f" - last error: {server['error']}" if server["error"] else "")))
        lines.append(printable(f"  {server['command']}"))
        for tool in server["tools"]:
            allowed = f"allowed ({tool['allowed_by']})" if tool["allowed"] else unallowed
            marker = ", read-only" if tool["read_only"] else ""
            first = (tool["description"] or "").strip().splitlines()[0] if tool["description"] else ""
            lines.append(printable(f"  {server['server']}.{tool['name']}: {allowed}{marker} - {shorten(first, 70)}"))
    lines.append("Memory's own tools (search_memory, read_thread, remember) need no consent. "
                 "/tools deny SERVER.TOOL takes an 'always' back.")
    return "\n".join(lines)
