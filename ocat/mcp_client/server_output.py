"""What an MCP server writes that is not MCP: a line on its stdout that is not JSON-RPC (a
banner, a stray print) and the SDK's own log records about it, kept in the log instead of
over the terminal; the chat says it once per server (ocat.tools.server_tools).

The SDK reads such a line, logs it with pydantic's traceback (to stderr, through Python's
last-resort handler, where nothing else is set) and hands the error to the client's message
handler. Here the handler writes it to the server's log, and the SDK's records go to
`client.log` beside the servers' logs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ocat.text.redact import redact

# Where the SDK's own records go, in the servers' log folder.
SDK_LOG = "client.log"


class StrayOutput:
    """One server's lines that were not JSON-RPC: each written to its log, and how many came."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.count = 0

    async def on_message(self, message: Any) -> None:
        """The SDK's message handler: an exception is a line it could not read (kept in the log);
        notifications and requests from the server are not the chat's business."""
        if not isinstance(message, Exception):
            return
        self.count += 1
        detail = redact(" ".join(str(message).split()))[:1000]
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("a", encoding="utf-8", errors="backslashreplace") as log:
                log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} ocat: a line on stdout that is not JSON-RPC, "
                          f"ignored: {type(message).__name__}: {detail}\n")
        except OSError:
            pass  # a log that cannot be written loses only the details


class _Redacted(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def keep_sdk_log(folder: Path) -> None:
    """Send the MCP SDK's log records to `folder/client.log` rather than to stderr (once a process)."""
    sdk = logging.getLogger("mcp")
    if any(isinstance(handler.formatter, _Redacted) for handler in sdk.handlers):
        return
    handler = logging.FileHandler(folder / SDK_LOG, encoding="utf-8", delay=True)  # made on the first record
    handler.setFormatter(_Redacted("--- %(asctime)s %(name)s %(levelname)s: %(message)s"))
    sdk.addHandler(handler)
    sdk.propagate = False  # nor to a handler of the root's: the terminal is the chat's
