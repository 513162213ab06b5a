"""`ocat mcp`: ocat's memory as an MCP server over stdio (the official MCP Python SDK).

`server` declares the tools and serves them, `tools` carries out each call with the
operations layer (`ocat.operations`), `stdio` makes sure every line on stdin is answered.
Importing this package loads none of them: the SDK loads when `serve` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from ocat.mcp_server.server import serve as run

if TYPE_CHECKING:
    from ocat.config.loading import Settings


def serve(settings: Settings, store_names: list[str]) -> int:
    """Serve the memory over stdio until the client closes the connection; returns the exit code."""
    return run(settings, store_names)
