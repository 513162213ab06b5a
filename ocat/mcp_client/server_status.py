"""What the MCP client says of a server: its state, its status as `/tools` and `--list-tools`
show it, and the error a call that gave no result raises."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ocat.errors import OcatError
from ocat.mcp_client.server_tool import ServerTool


class CallFailed(OcatError):
    """A server's tool could not give a result: the server is down, timed out, or said it failed."""


class ServerState(StrEnum):
    """Where a server is (a str: it compares equal to, and shows as, its lowercase name)."""

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    CRASHED = "crashed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ServerStatus:
    """A server as `/tools` and `--list-tools` show it."""

    name: str
    state: ServerState
    tools: tuple[ServerTool, ...]
    error: str | None
    command: str
    # How many lines the server wrote to stdout that were not JSON-RPC (ignored, kept in `log`).
    stray: int = 0
    log: Path | None = None
