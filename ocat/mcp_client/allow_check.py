"""`--allow-tool SERVER.TOOL` checked against the tools that exist: a name no configured server
has is a usage error listing the ones it could be; a server whose tools are not known yet (never
listed for its entry, and not started to learn them) has its names accepted, with a warning.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ocat.errors import UsageError


def check_allowed_tools(names: Iterable[str], known: Mapping[str, tuple[str, ...] | None]) -> list[str]:
    """The warnings for `names` (SERVER.TOOL) given each configured server's tool names (None:
    not known); UsageError for a name that matches no configured server's tool."""
    warnings = []
    for name in sorted(set(names)):
        server, _, tool = name.partition(".")
        if server in known and known[server] is None:
            warnings.append(f"--allow-tool {name}: the tools of {server} are not known yet (it has not been started "
                            "with this entry); the name is accepted as given")
        elif server not in known or tool not in (known[server] or ()):
            raise UsageError(f"--allow-tool {name}: {_why(server, tool, known)}; {_existing(known)}")
    return warnings


def _why(server: str, tool: str, known: Mapping[str, tuple[str, ...] | None]) -> str:
    if server not in known:
        return f"no MCP server named {server!r} is configured"
    return f"the MCP server {server} has no tool {tool!r}"


def _existing(known: Mapping[str, tuple[str, ...] | None]) -> str:
    tools = [f"{server}.{tool}" for server, names in known.items() for tool in names or ()]
    unknown = [server for server, names in known.items() if names is None]
    said = f"the tools are: {', '.join(tools)}" if tools else "no server's tools are known"
    if not known:
        said = "no MCP servers are configured (mcp_servers in the config)"
    return said + (f" (not known yet: the tools of {', '.join(unknown)})" if unknown else "")
