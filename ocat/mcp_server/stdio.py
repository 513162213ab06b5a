"""stdin for `ocat mcp`: every line the client sends gets an answer.

The SDK drops a line it cannot read (after logging it at debug level), leaving the client
waiting for ever; here such a line is answered with a JSON-RPC error and serving goes on.
stdin is read from a private copy of fd 0, so nothing else in the process can take its bytes.
"""

import json
import logging
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, cast
import io

log = logging.getLogger("ocat.mcp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# An id is a string or a whole number; a longer number is no id anyone sent on purpose
# (and int() refuses past 4300 digits).
_MAX_ID_DIGITS = 40


async def serve_stdio(server: Any) -> None:
    """What the SDK's `server.run("stdio")` does, but stdin goes through `AnsweredLines`."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    with _stdin_lines() as lines:
        answered = AnsweredLines(lines)
        # The SDK still claims stdout (fd 1 points at stderr while it serves) and writes every reply.
        # The SDK only iterates its stdin line by line, which AnsweredLines does (it is no AsyncFile).
        async with stdio_server(stdin=cast(Any, answered)) as (read_stream, write_stream):
            answered.reply_with(write_stream)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


@contextmanager
def _stdin_lines() -> Iterator[Any]:
    """stdin as async lines of text, read from a private copy of fd 0.

    While serving, fd 0 points at /dev/null, as the SDK arranges when it reads stdin itself,
    so no library or child process can take bytes meant for the protocol.
    """
    import anyio

    try:
        private: int | None = os.dup(0)
    except OSError:
        private = None
    if private is not None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    # closefd=False: a reading thread may still be blocked on it after the loop ends.
    buffer = os.fdopen(private, "rb", closefd=False) if private is not None else sys.stdin.buffer
    # Bytes that are not UTF-8 become U+FFFD, as in the SDK: such a line is still read.
    text = io.TextIOWrapper(buffer, encoding="utf-8", errors="replace")
    try:
        yield anyio.wrap_file(text)
    finally:
        if private is not None:
            os.dup2(private, 0)
        else:
            text.detach()  # never close the process's own stdin


class AnsweredLines:
    """stdin's lines for the SDK, less the ones it cannot read: those are answered here.

    The SDK turns a line it cannot parse or validate into an exception that its dispatcher
    only logs at debug level, so the client waits for ever. JSON-RPC wants an error reply;
    this writes it on the SDK's own write stream (so replies never interleave) and goes on.
    """

    def __init__(self, lines: Any) -> None:
        import anyio

        self._lines = aiter(lines)
        self._replies: Any = None
        self._ready = anyio.Event()

    def reply_with(self, write_stream: Any) -> None:
        """The stream the SDK writes replies to (known only once its transport is up)."""
        self._replies = write_stream
        self._ready.set()

    def __aiter__(self) -> "AnsweredLines":
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._lines.__anext__()  # StopAsyncIteration at the end of stdin
            if not line.strip():
                continue  # a blank line is no message, and gets no answer
            try:
                reply = unreadable_line_error(line)
            except Exception:  # the check must never cost the connection
                log.exception("could not check a line from the client")
                reply = None
            if reply is None:
                return line
            await self._answer(reply)

    async def _answer(self, reply: dict[str, Any]) -> None:
        import anyio
        import mcp_types
        from mcp.shared.message import SessionMessage

        log.warning("a line from the client is not a JSON-RPC message; answered: %s", reply["error"]["message"])
        await self._ready.wait()
        try:
            await self._replies.send(SessionMessage(mcp_types.JSONRPCError.model_validate(reply)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.debug("the connection closed before the error could be sent")


def unreadable_line_error(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error reply for a line the SDK cannot read as a message; None if it can.

    JSON that does not parse (or that the SDK's parser refuses: nesting past its limit)
    is a -32700 Parse error with a null id. Valid JSON that is no message (no
    "jsonrpc", a lone surrogate such as "\\udfff", a number past the parser's range, a
    batch) is a -32600 Invalid Request, with the line's id when one can be read, so the
    client's request is answered rather than left waiting.
    """
    import mcp_types

    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as exc:
        problem = _problem(exc)
    try:
        # NaN and Infinity are let through, as the SDK's parser lets them through.
        value = json.loads(line, parse_int=_id_int)
    except (ValueError, RecursionError):
        return _error_reply(None, PARSE_ERROR, f"Parse error: {problem or 'not JSON'}")
    if not isinstance(value, dict):
        # A batch (a JSON array) was dropped from MCP; anything else is no message at all.
        return _error_reply(None, INVALID_REQUEST, "Invalid Request: a message is one JSON object")
    why = problem or "not a JSON-RPC 2.0 request, notification or response"
    return _error_reply(_id_of(value), INVALID_REQUEST, f"Invalid Request: {why}")


def _problem(exc: Exception) -> str:
    """What the SDK's parser said about a line that is not JSON to it ("" for other errors,
    whose wording, one complaint per kind of message, helps no one)."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else {}
    except Exception:
        first = {}
    if first.get("type") != "json_invalid":
        return ""
    return str(first.get("msg", "")).removeprefix("Invalid JSON: ")[:200]


def _id_int(text: str) -> int | None:
    return int(text) if len(text.lstrip("-")) <= _MAX_ID_DIGITS else None


def _id_of(message: dict[str, Any]) -> str | int | None:
    """The message's id if it is one a reply can carry: a string (valid Unicode) or a whole number."""
    value = message.get("id")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate cannot be written back
            return None
    return value


def _error_reply(id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
