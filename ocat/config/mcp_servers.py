"""The MCP servers a chat may use, as the config names them: `mcp_servers:` entries in the shape
of Claude Desktop's `mcpServers` (so entries can be pasted), and the same read from a
`claude_desktop_config.json` that `tools.mcp_servers_file` points at.

Pure values and checks: no SDK, no process. A bad entry is a ConfigError naming the file, the
server and the key, as every other config error does.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ocat.errors import ConfigError

# A server's name becomes the start of its tools' names, which providers limit to these characters.
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
READ_ONLY = "read-only"
_KEYS = ("command", "args", "env", "cwd", "url", "headers", "allow", "timeout", "start_timeout", "type", "disabled")


@dataclass(frozen=True)
class Allow:
    """The tools of one server that run without asking: `read_only` (the config said the keyword
    `allow: read-only`: every tool the server marks readOnlyHint) and `names` (`allow: [names]`).
    Kept apart so that a tool *named* "read-only" is a name, never the keyword."""

    read_only: bool = False
    names: frozenset[str] = frozenset()

    def allows(self, tool: str, read_only: bool) -> bool:
        """Whether `tool` (marked read-only or not by its server) runs without asking."""
        return tool in self.names or (self.read_only and read_only)


@dataclass(frozen=True)
class McpServerConfig:
    """One server: a command ocat starts (stdio) or a URL it connects to (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Tools allowed beforehand: the keyword READ_ONLY (those the server marks readOnlyHint), or names.
    allow: Allow = Allow()
    timeout: float = 60.0
    start_timeout: float = 10.0
    where: str = ""  # the file the entry came from, for messages

    @property
    def allows_read_only(self) -> bool:
        """Whether the tools the server marks read-only are allowed beforehand."""
        return self.allow.read_only

    def describe(self) -> str:
        """The server as one line: its command and arguments, or its URL (no env, no headers)."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


def parse_servers(value: Any, where: str, base: Path) -> tuple[McpServerConfig, ...]:
    """The servers of an `mcp_servers` mapping (or a JSON file's `mcpServers`); `base` is the
    folder a relative `cwd` is read from. Disabled entries are left out."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError(f"config error: {where}: mcp_servers must be a mapping of server names to entries")
    servers = []
    for name, entry in value.items():
        server = _parse_entry(str(name), entry, where, base)
        if server is not None:
            servers.append(server)
    return tuple(servers)


def read_servers_file(path: Path) -> tuple[McpServerConfig, ...]:
    """The `mcpServers` of a Claude Desktop config file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config error: tools.mcp_servers_file: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config error: tools.mcp_servers_file: cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config error: {path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config error: {path}: expected a JSON object with \"mcpServers\"")
    return parse_servers(data.get("mcpServers"), str(path), path.parent)


def merged(own: tuple[McpServerConfig, ...], from_file: tuple[McpServerConfig, ...]) -> tuple[McpServerConfig, ...]:
    """The config's own entries, then the file's that the config does not name (its own win)."""
    names = {server.name for server in own}
    return own + tuple(server for server in from_file if server.name not in names)


def _parse_entry(name: str, entry: Any, where: str, base: Path) -> McpServerConfig | None:
    def fail(problem: str) -> ConfigError:
        return ConfigError(f"config error: {where}: mcp server {name!r}: {problem}")

    if not SERVER_NAME.fullmatch(name):
        raise fail("a server's name is 1-40 letters, digits, '_' or '-' (it starts its tools' names)")
    if not isinstance(entry, Mapping):
        raise fail("expected a mapping with command (and args, env) or url")
    unknown = [key for key in entry if key not in _KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; the keys are: {', '.join(_KEYS)}")
    if entry.get("disabled") is True:
        return None
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise fail("give either command (a program ocat starts) or url (a streamable HTTP server)")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise fail("command must be a program name or path")
    if url is not None and (not isinstance(url, str) or not re.match(r"https?://\S+$", url)):
        raise fail("url must be an http:// or https:// URL")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, (str, int, float)) for arg in args):
        raise fail("args must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise fail("cwd must be a folder")
    return McpServerConfig(
        name=name,
        command=_home(command) if command is not None else None,
        args=tuple(_home(str(arg)) for arg in args),
        env=_strings(entry.get("env"), "env", fail),
        cwd=str((base / Path(cwd).expanduser()).resolve()) if cwd else None,
        url=url,
        headers=_strings(entry.get("headers"), "headers", fail),
        allow=_allow(entry.get("allow"), fail),
        timeout=_seconds(entry.get("timeout", 60), "timeout", fail),
        start_timeout=_seconds(entry.get("start_timeout", 10), "start_timeout", fail),
        where=where,
    )


def _home(text: str) -> str:
    # A shell would expand `~/notes` in a pasted command line; the server gets no shell.
    return os.path.expanduser(text) if text.startswith("~") else text


def _strings(value: Any, key: str, fail: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, (str, int, float)) for v in value.values()):
        raise fail(f"{key} must be a mapping of names to strings")
    return {str(k): str(v) for k, v in value.items()}


def _allow(value: Any, fail: Any) -> Allow:
    # The string is the keyword; a list holds names only. (Before issue 44, "read-only" inside a
    # list also acted as the keyword, so a tool named "read-only" ran unasked. Such a list now
    # names that tool, and the server's read-only tools ask first: the safe way to read it.)
    if value is None:
        return Allow()
    if value == READ_ONLY:
        return Allow(read_only=True)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail(f"allow must be a list of tool names, or {READ_ONLY}")
    return Allow(names=frozenset(value))


def _seconds(value: Any, key: str, fail: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise fail(f"{key} must be a number of seconds (0-3600), got {value!r}")
    return float(value)
