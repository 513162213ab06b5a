"""The MCP servers of one chat, as the session owns them: started when the face says (after the
first frame, or when the model calls a tool of one), offered to every turn beside memory's tools,
asked about through `consent`, and closed with the chat. Servers that failed, servers still
starting when a turn has waited its `start_timeout` for them, and servers that wrote something
that is not JSON-RPC to stdout, are said once each.

A server not started (`--ask`) or still starting offers its tools from ocat's cache of tool lists
(ocat.mcp_client.tool_cache) and starts when the model calls one; only a server never listed for
its entry is started to learn its tools. Every list a server gives is kept in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ocat.config.locations import display_path, state_dir
from ocat.mcp_client.allow_check import check_allowed_tools
from ocat.mcp_client.consent import Consent
from ocat.mcp_client.servers import McpServers, ServerState
from ocat.mcp_client.tool_cache import ToolCache
from ocat.tools.mcp_tools import server_tools

if TYPE_CHECKING:
    from ocat.config.mcp_servers import McpServerConfig
    from ocat.mcp_client.consent import Ask
    from ocat.mcp_client.servers import ServerStatus, ServerTool
    from ocat.config.settings import Settings
    from ocat.tools.box import ToolSpec


class ServerTools:
    """The configured servers (none: every method is a no-op) and the consent their calls need."""

    def __init__(self, settings: Settings, cache: ToolCache | None = None, *, ask: Ask | None = None) -> None:
        """`ask`: the face's way of asking the user's consent (None: a call not allowed beforehand is denied)."""
        self.configs = settings.mcp_servers
        self.consent = Consent({c.name: c.allow for c in self.configs}, settings.allowed_tools, ask=ask)
        self.cache = cache if cache is not None else ToolCache()
        self._servers: McpServers | None = None
        self._said: set[tuple[str, str]] = set()
        self._stray_said: set[str] = set()
        self._starting_said: set[str] = set()
        if self.configs:
            # Made here, in the thread that builds the chat (the main one): it sets ocat's SIGTERM handler.
            self._servers = McpServers(self.configs, state_dir() / "mcp", on_tools=self.cache.store)

    def __bool__(self) -> bool:
        return bool(self.configs)

    @property
    def servers(self) -> McpServers | None:
        """The live servers (not started until `start`); None when none are configured."""
        return self._servers

    def start(self) -> None:
        """Start the servers in the background (returns at once)."""
        if self.servers is not None:
            self.servers.start()

    def specs(self, taken: set[str]) -> list[ToolSpec]:
        """Their tools for one turn: a server up offers its own list, one not started or still
        starting its cached list; one never listed is started and waited for (within its start_timeout)."""
        servers = self.servers
        if servers is None:
            return []
        return server_tools(servers, self.consent, taken, self._offered(servers), self.ready)

    def _offered(self, servers: McpServers) -> list[ServerTool]:
        waiting = {c.name: servers.status(c.name).state in (ServerState.STOPPED, ServerState.STARTING)
                   for c in self.configs}
        unlisted = [c.name for c in self.configs if waiting[c.name] and self.cache.tools(c) is None]
        servers.start(only=unlisted)  # side by side
        tools: list[ServerTool] = []
        for config in self.configs:
            cached = self.cache.tools(config) if waiting[config.name] else None
            if cached is not None:
                tools += cached
            else:
                tools += servers.wait_turn(config.name).tools  # a failed server, or one still starting, has none
        return tools

    def ready(self, name: str) -> ServerStatus:
        """The server `name` started (if it was not) and waited for, within its start_timeout."""
        assert self._servers is not None
        timeout = next(c.start_timeout for c in self.configs if c.name == name)
        self._servers.start(only=[name])
        return self._servers.wait_for(name, timeout + 5)

    def check_allowed(self, names: Iterable[str], *, learn: bool) -> list[str]:
        """The warnings for `--allow-tool`'s `names`; UsageError for a name no configured server
        has. A named server never listed for its entry is started to learn its tools when `learn`
        (`--ask`, which would start it anyway), else its names are accepted with a warning (the chat)."""
        named = {name.partition(".")[0] for name in names}
        learning = [c.name for c in self.configs if learn and c.name in named and self.cache.tools(c) is None]
        if self._servers is not None:
            self._servers.start(only=learning)
        known: dict[str, tuple[str, ...] | None] = {}
        for config in self.configs:
            tools = self.cache.tools(config)
            if tools is None and config.name in learning:
                status = self.ready(config.name)
                tools = status.tools if status.state is ServerState.READY else None
            known[config.name] = None if tools is None else tuple(tool.name for tool in tools)
        return check_allowed_tools(names, known)

    def statuses(self) -> list[ServerStatus]:
        """Each server's state, tools and last error (starting them if they were not)."""
        servers = self.servers
        if servers is None:
            return []
        servers.wait()
        return servers.statuses()

    def news(self) -> list[str]:
        """One line for each server that failed since last asked (a failure is said once), and
        the `stray_news`, and consent's own (a damaged answers file moved aside)."""
        if self._servers is None:
            return []
        lines = self.consent.news()
        for status in self._servers.statuses():
            config = self._servers.servers[status.name].config
            # Said once, of a server whose tools this turn lacked: one still starting whose tools
            # were offered from the cache is no news (a call to one of them waits for it).
            if (status.state is ServerState.STARTING and status.name not in self._starting_said
                    and self.cache.tools(config) is None):
                self._starting_said.add(status.name)  # once: it is not stopped, and comes when ready
                lines.append(starting_line(config))
            if status.state in (ServerState.FAILED, ServerState.CRASHED) and status.error is not None:
                said = (status.name, status.error)
                if said not in self._said:
                    self._said.add(said)
                    lines.append(f"MCP server {status.name} is off ({status.error}): "
                                 "the chat goes on without its tools")
        return lines + self.stray_news()

    def stray_news(self) -> list[str]:
        """One line for each server that wrote to stdout something that is not JSON-RPC, the
        first time it did (once a session: the details of each line are in its log)."""
        if self._servers is None:
            return []
        lines = []
        for status in self._servers.statuses():
            if status.stray and status.name not in self._stray_said:
                self._stray_said.add(status.name)
                where = f"details in {display_path(status.log)}" if status.log else "details in its log"
                lines.append(f"mcp server {status.name} wrote something that is not JSON-RPC; ignored ({where})")
        return lines

    def close(self) -> None:
        """Stop every server (no child outlives the chat)."""
        if self._servers is not None:
            self._servers.close()


# Launchers that fetch a package on its first use (a first run may take a minute).
_DOWNLOADERS = {"npx", "uvx", "bunx", "pnpx", "pipx"}


def starting_line(config: McpServerConfig) -> str:
    """The line for a server still starting once a turn has waited its `start_timeout`."""
    launcher = Path(config.command or "").name
    why = f" ({launcher} may be downloading it on first use)" if launcher in _DOWNLOADERS else ""
    return f"{config.name}: still starting{why}; its tools come when it is ready"
