"""`ocat mcp`: ocat's memory as an MCP server over stdio (the official MCP Python SDK).

The tools are thin wrappers over `ocat.memory.tools`; this module only declares their
schemas, checks arguments, and turns ocat's errors into MCP error results. stdout carries
the protocol alone: the SDK points fd 1 at stderr while it serves, and logs go to stderr.
Every line on stdin gets an answer: one the SDK cannot read is answered here with a
JSON-RPC error (the SDK would drop it, and leave the client waiting for ever).
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.
import json
import logging
import os
import sys
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, AsyncIterator, Iterator, Literal

from pydantic import Field

from ocat import __version__
from ocat.errors import OcatError

if TYPE_CHECKING:
    from ocat.config import Settings
    from ocat.memory.tools import MemoryTools

log = logging.getLogger("ocat.mcp")

INSTRUCTIONS = """\
ocat's long-term memory: past chat exchanges and saved notes and documents, searched by
meaning and keywords. Call memory_search before answering questions about earlier work,
decisions or notes; memory_save to remember something for later; memory_forget to delete
(it previews unless confirm is "CONFIRM"); memory_stats to see what is stored."""

Scalar = str | int | float | bool


def build_server(tools: "MemoryTools") -> Any:
    """The MCP server with ocat's four memory tools (mcp is imported here, not at start-up)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from ocat.memory.filters import FilterSpec

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        # Open the store while the client settles in, so the first call does not wait for it.
        threading.Thread(target=_open_quietly, args=(tools,), daemon=True, name="ocat-open-store").start()
        try:
            yield
        finally:
            tools.close()

    server = MCPServer(
        "ocat",
        title="ocat memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        lifespan=lifespan,
    )

    def run(operation: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return operation(*args, **kwargs)
        except OcatError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # never let one call take the server down
            log.exception("memory tool failed")
            raise ToolError(f"internal error: {type(exc).__name__}: {exc}") from None

    @server.tool(
        description="Search ocat's memory (past chat exchanges, saved notes and document chunks) by meaning "
        "and keywords. Returns the k most relevant memories, best first, each with text, a calibrated "
        "relevance score in [0, 1] ('admitted' means relevant enough to use), date and metadata. "
        "Filters narrow the search; 'where' matches any other metadata field exactly "
        "(e.g. filename, section, prefix, ocd_number, source_file).",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def memory_search(
        query: Annotated[str, Field(min_length=1, max_length=10_000, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 5,
        source: Annotated[
            str | None, Field(description="Only memories from this source: 'chat' (exchanges), 'cli', "
                          "'vdoc_command', 'vadd_command', 'mcp' or a label given to memory_save.")
        ] = None,
        thread_id: Annotated[str | None, Field(description="Only exchanges of this chat thread.")] = None,
        session_id: Annotated[str | None, Field(description="Only exchanges of this chat session.")] = None,
        kind: Annotated[
            Literal["exchange", "document"] | None,
            Field(description="Only chat exchanges, or only documents and saved notes."),
        ] = None,
        since: Annotated[
            str | None, Field(description="Only memories from this date on (ISO: 2026-11-01 or 2026-11-01T14:00).")
        ] = None,
        until: Annotated[str | None, Field(description="Only memories up to this date (a bare date includes the day).")] = None,
        where: Annotated[
            dict[str, Scalar] | None, Field(description="Other metadata fields that must be equal, e.g. {\"prefix\": \"ACME\"}.")
        ] = None,
    ) -> dict[str, Any]:
        spec = FilterSpec(source, thread_id, session_id, kind, since, until, dict(where or {}))
        return run(tools.search, query, k, spec)

    @server.tool(
        description="Save a note or text to ocat's memory so later searches (and ocat's chat) find it. "
        "Long text is chunked. Saving the same text twice stores it once. Returns the stored chunk ids.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def memory_save(
        content: Annotated[str, Field(min_length=1, description="The text to remember.")],
        source: Annotated[
            str | None, Field(max_length=100, description="A label for where this came from (default 'mcp'); "
                              "memory_search can filter on it.")
        ] = None,
        metadata: Annotated[
            dict[str, Scalar] | None,
            Field(description="Extra fields to store with it (strings, numbers, booleans), searchable with 'where'."),
        ] = None,
    ) -> dict[str, Any]:
        return run(tools.save, content, source, metadata)

    @server.tool(
        description="Delete memories, by id (a unique prefix will do) or by query (the up to k most relevant "
        "memories that pass the relevance threshold). Deletes only when confirm is exactly \"CONFIRM\"; "
        "otherwise returns what it would delete, so call it first without confirm.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def memory_forget(
        query: Annotated[str | None, Field(min_length=1, description="Forget what matches this.")] = None,
        id: Annotated[str | None, Field(min_length=1, description="Forget the memory with this id.")] = None,
        confirm: Annotated[str | None, Field(description='"CONFIRM" to really delete.')] = None,
        k: Annotated[int, Field(ge=1, le=50, description="Most memories a query may forget.")] = 3,
    ) -> dict[str, Any]:
        return run(tools.forget, query=query, id=id, confirm=confirm, k=k)

    @server.tool(
        description="What ocat's memory holds: for each open store its name, location and counts of exchanges "
        "and documents, the embedding model, the relevance thresholds, and the names of all stores.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def memory_stats() -> dict[str, Any]:
        return run(tools.stats)

    _close_schemas(server)
    server.middleware.append(StrictArguments(server))
    return server


def _close_schemas(server: Any) -> None:
    """Advertise that the tools take no other arguments (a misspelt filter must not be ignored)."""
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False


class StrictArguments:
    """Middleware: check a tools/call's arguments against the tool's schema before the SDK does.

    The SDK drops unknown arguments silently and words its errors for Python developers;
    here an unknown or wrong argument is an error result naming the argument.
    """

    def __init__(self, server: Any) -> None:
        self._server = server

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            problem = self._problem(ctx.params.get("name"), ctx.params.get("arguments"))
            if problem is not None:
                from mcp.types import CallToolResult, TextContent

                return CallToolResult(content=[TextContent(type="text", text=problem)], is_error=True)
        return await call_next(ctx)

    def _problem(self, name: object, arguments: object) -> str | None:
        from jsonschema import Draft202012Validator

        tool = self._server._tool_manager.get_tool(name) if isinstance(name, str) else None
        if tool is None:
            return None  # the SDK answers an unknown tool itself
        if arguments is None:
            arguments = {}
        errors = sorted(Draft202012Validator(tool.parameters).iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        lines = []
        for error in errors[:5]:
            if error.validator == "additionalProperties" and not error.absolute_path:
                allowed = ", ".join(sorted(tool.parameters.get("properties", {})))
                lines.append(f"{error.message} (the arguments are: {allowed})")
            else:
                leaf = _leaf(error)
                where = ".".join(str(p) for p in leaf.absolute_path)
                lines.append(f"{where or 'arguments'}: {leaf.message}")
        return f"invalid arguments for {name}: " + "; ".join(lines)


def _leaf(error: Any) -> Any:
    """The error worth showing: anyOf errors ("not valid under any of the given schemas", from
    optional arguments) hide it in their context; "is not of type 'null'" never is."""
    if error.validator == "anyOf" and error.context:
        useful = [e for e in error.context if not (e.validator == "type" and e.validator_value == "null")]
        # The deepest complaint is about the value actually wrong (where.a, not where).
        return _leaf(max(useful or error.context, key=lambda e: (len(e.absolute_path), -len(e.message))))
    return error


def _open_quietly(tools: "MemoryTools") -> None:
    from ocat.memory.model_files import prepare_model, progress_words

    try:
        tools.stores()
        # Fetch the embedding model now, on first use, rather than inside the first search.
        fetched = prepare_model(
            tools.settings.embedding,
            progress=lambda done, total: done or log.warning(
                "downloading the embedding model (first use, %s)", progress_words(total or 0, None)
            ),
        )
        if fetched is not None and fetched.downloaded:
            log.warning("%s", fetched.describe())
    except Exception as exc:  # reported again to the first call that needs the store or the model
        log.warning("memory is not ready yet: %s", exc)


def serve(settings: "Settings", store_names: list[str]) -> int:
    """Serve the memory over stdio until the client closes the connection; returns the exit code."""
    from ocat.memory.named import open_stores
    from ocat.memory.tools import MemoryTools

    # Before the SDK configures logging: ours goes to stderr, plainly, one line per record.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="ocat mcp: %(levelname)s: %(message)s")

    def notify(message: str) -> None:
        print(f"ocat mcp: {message}", file=sys.stderr, flush=True)

    # Long-lived like the chat: own the store and serve it to other ocat processes.
    tools = MemoryTools(settings, lambda: open_stores(settings, store_names, serve=True, notify=notify))
    server = build_server(tools)
    try:
        import anyio

        anyio.run(_serve_stdio, server)
    except KeyboardInterrupt:
        pass
    finally:
        tools.close()
    return 0


# -- stdin: every line answered ------------------------------------------------------------

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# An id is a string or a whole number; a longer number is no id anyone sent on purpose
# (and int() refuses past 4300 digits).
_MAX_ID_DIGITS = 40


async def _serve_stdio(server: Any) -> None:
    """What the SDK's `server.run("stdio")` does, but stdin goes through `AnsweredLines`."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    with _stdin_lines() as lines:
        answered = AnsweredLines(lines)
        # The SDK still claims stdout (fd 1 points at stderr while it serves) and writes every reply.
        async with stdio_server(stdin=answered) as (read_stream, write_stream):
            answered.reply_with(write_stream)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


@contextmanager
def _stdin_lines() -> Iterator[Any]:
    """stdin as async lines of text, read from a private copy of fd 0.

    While serving, fd 0 points at /dev/null, as the SDK arranges when it reads stdin itself,
    so no library or child process can take bytes meant for the protocol.
    """
    import io

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
