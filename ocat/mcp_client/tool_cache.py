"""Each MCP server's tool list (names, descriptions, schemas), kept between runs so a turn can
offer a server's tools without starting it: the server starts when the model calls one of them.

Keyed by a digest of the server's entry (command, args, env, cwd; url and headers): a changed
entry is a new key, never served the old list; the file holds digests, never the env's values.
The cache is derived data: a damaged or unreadable file is ignored (and rewritten on the next
list heard), never an error; it is written whole to a temporary file and renamed over the old.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ocat.config.locations import cache_dir
from ocat.config.mcp_servers import McpServerConfig
from ocat.mcp_client.servers import ServerTool, qualified_name

log = logging.getLogger(__name__)

# Bumped when the shape of an entry changes: an older file is then read as empty.
VERSION = 1


def cache_file() -> Path:
    """Where the tool lists are kept (`$XDG_CACHE_HOME/ocat/mcp-tools.json`)."""
    return cache_dir() / "ocat" / "mcp-tools.json"


def entry_key(config: McpServerConfig) -> str:
    """The digest of what decides a server's tools: its command, args, env and cwd (or url and headers)."""
    entry = {"command": config.command, "args": list(config.args), "env": dict(sorted(config.env.items())),
             "cwd": config.cwd, "url": config.url, "headers": dict(sorted(config.headers.items()))}
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


class ToolCache:
    """The tool lists of one cache file: read once, written on every list a server gives."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else cache_file()
        self._lists: dict[str, Any] | None = None
        self._lock = threading.Lock()  # lists are heard on the servers' loop, read in the turn's thread

    def tools(self, config: McpServerConfig) -> tuple[ServerTool, ...] | None:
        """The server's tools as last listed for this very entry, or None (never listed, or the entry changed)."""
        with self._lock:
            kept = self._read().get(entry_key(config))
        if not isinstance(kept, dict) or not isinstance(kept.get("tools"), list):
            return None
        try:
            return _as_tools(config.name, kept["tools"])
        except (KeyError, TypeError, ValueError):
            return None  # an entry in a shape this version does not read: as if never listed

    def store(self, config: McpServerConfig, tools: tuple[ServerTool, ...]) -> None:
        """Keep the list the server just gave (replacing what this server's name had under any key)."""
        listed = [{"name": t.name, "description": t.description, "schema": t.schema, "read_only": t.read_only}
                  for t in tools]
        with self._lock:
            lists = {key: kept for key, kept in self._read().items()
                     if not (isinstance(kept, dict) and kept.get("server") == config.name)}
            lists[entry_key(config)] = {"server": config.name, "tools": listed}
            self._lists = lists
            self._write(lists)

    def _read(self) -> dict[str, Any]:
        if self._lists is None:
            self._lists = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                return self._lists
            except (OSError, ValueError) as exc:  # damaged or unreadable: derived data, listed again
                log.info("the MCP tool cache %s is ignored: %s", self.path, exc)
                return self._lists
            if isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("servers"), dict):
                self._lists = data["servers"]
        return self._lists

    def _write(self, lists: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".mcp-tools-", dir=self.path.parent)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump({"version": VERSION, "servers": lists}, out, ensure_ascii=False)
                os.replace(temporary, self.path)  # a reader sees the old file or the new, never half of one
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:  # not kept: the next run lists the server again
            log.info("the MCP tool cache %s was not written: %s", self.path, exc)


def _as_tools(server: str, listed: list[Any]) -> tuple[ServerTool, ...]:
    """Cached entries as the ServerTools the server's own list gives (the same names, in the same order)."""
    taken: set[str] = set()
    tools = []
    for item in listed:
        name, schema = str(item["name"]), item["schema"]
        if not isinstance(schema, dict):
            raise ValueError("a schema is an object")
        qualified = qualified_name(server, name, taken)
        taken.add(qualified)
        tools.append(ServerTool(server, name, qualified, str(item["description"]), schema, bool(item["read_only"])))
    return tuple(tools)


def known_tools(configs: tuple[McpServerConfig, ...], cache: ToolCache) -> dict[str, tuple[str, ...] | None]:
    """Each configured server's tool names as last listed (None: never listed for its entry)."""
    known: dict[str, tuple[str, ...] | None] = {}
    for config in configs:
        tools = cache.tools(config)
        known[config.name] = None if tools is None else tuple(tool.name for tool in tools)
    return known
