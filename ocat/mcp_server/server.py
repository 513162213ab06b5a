"""The MCP server: the memory tools' schemas, strict argument checks, and serving over stdio.

The tools are thin wrappers over `ocat.mcp_server.tools`; this module only declares their
schemas, checks arguments, and turns ocat's errors into MCP error results. stdout carries
the protocol alone: the SDK points fd 1 at stderr while it serves, and logs go to stderr.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.
import logging
import sys
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, AsyncIterator, Callable

from pydantic import Field

from ocat import __version__, memory
from ocat.errors import OcatError
from ocat.records import RecordKind
from ocat.mcp_server.stdio import serve_stdio
from ocat.mcp_server.tools import MemoryTools

if TYPE_CHECKING:
    from ocat.config.loading import Settings

log = logging.getLogger("ocat.mcp")

INSTRUCTIONS = """\
ocat's long-term memory: past chat exchanges and saved notes and documents, searched by
meaning and keywords. Call search_memory before answering questions about earlier work,
decisions or notes; remember to save something for later; forget_memory to delete
(it previews unless confirm is "CONFIRM"); memory_stats to see what is stored; memory_wake
for what the user keeps at hand (pinned memories, their profile, recent threads), and
pin_memory / unpin_memory / memory_pins to manage the pins. (memory_search, memory_save,
memory_forget, memory_pin and memory_unpin are the old names, deprecated.)"""

Scalar = str | int | float | bool

# The tools' names before they took the chat's order (verb first: search_memory, as the chat's
# model calls it): still served, for one release, each as the tool it became (docs/mcp.md).
DEPRECATED_NAMES = {"memory_search": "search_memory", "memory_save": "remember", "memory_forget": "forget_memory",
                    "memory_pin": "pin_memory", "memory_unpin": "unpin_memory"}


def build_server(tools: "MemoryTools") -> Any:
    """The MCP server with ocat's memory tools (mcp is imported here, not at start-up)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

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

    def tool(name: str, *, description: str, annotations: Any) -> Callable[[Any], Any]:
        """Register a tool under its name, and under each old name it had (DEPRECATED_NAMES)."""

        def register(fn: Any) -> Any:
            server.add_tool(fn, name=name, description=description, annotations=annotations)
            for alias in (old for old, new in DEPRECATED_NAMES.items() if new == name):
                server.add_tool(fn, name=alias, annotations=annotations,
                                description=f"Deprecated: the old name of {name}, kept for one release. {description}")
            return fn

        return register

    def run(operation: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return operation(*args, **kwargs)
        except OcatError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # never let one call take the server down
            log.exception("memory tool failed")
            raise ToolError(f"internal error: {type(exc).__name__}: {exc}") from None

    @tool("search_memory",
        description="Search ocat's memory (past chat exchanges, saved notes and document chunks) by meaning "
        "and keywords. Returns the k most relevant memories, best first, each with text, a calibrated "
        "relevance score in [0, 1] ('admitted' means relevant enough to use), date and metadata. "
        "Filters narrow the search; 'where' matches any other metadata field exactly "
        "(e.g. filename, section, prefix, ocd_number, source_file).",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=10_000, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 5,
        source: Annotated[
            str | None, Field(description="Only memories from this source: 'chat' (exchanges), 'cli', "
                          "'vdoc_command', 'vadd_command', 'mcp' or a label given to remember.")
        ] = None,
        thread_id: Annotated[str | None, Field(description="Only exchanges of this chat thread.")] = None,
        session_id: Annotated[str | None, Field(description="Only exchanges of this chat session.")] = None,
        kind: Annotated[
            RecordKind | None,
            Field(description="Only chat exchanges, or only documents and saved notes."),
        ] = None,
        since: Annotated[
            str | None, Field(description="Only memories from this date on (ISO: 2026-11-01 or 2026-11-01T14:00).")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only memories up to this date (a bare date includes the day).")
        ] = None,
        where: Annotated[
            dict[str, Scalar] | None,
            Field(description="Other metadata fields that must be equal, e.g. {\"prefix\": \"ACME\"}."),
        ] = None,
        project: Annotated[
            str | None,
            Field(max_length=4096, description="Only exchanges of this project (a folder: its git root, as "
                  "coding-agent sessions and ocat's chats record it); notes and documents still come."),
        ] = None,
    ) -> dict[str, Any]:
        spec = memory.FilterSpec(source, thread_id, session_id, kind, since, until, dict(where or {}))
        return run(tools.search, query, k, spec, project)

    @tool("remember",
        description="Save a note or text to ocat's memory so later searches (and ocat's chat) find it. "
        "Long text is chunked. Saving the same text twice stores it once. Returns the stored chunk ids.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def remember(
        content: Annotated[str, Field(min_length=1, description="The text to remember.")],
        source: Annotated[
            str | None, Field(max_length=100, description="A label for where this came from (default 'mcp'); "
                              "search_memory can filter on it.")
        ] = None,
        metadata: Annotated[
            dict[str, Scalar] | None,
            Field(description="Extra fields to store with it (strings, numbers, booleans), searchable with 'where'."),
        ] = None,
    ) -> dict[str, Any]:
        return run(tools.save, content, source, metadata)

    @tool("forget_memory",
        description="Delete memories, by id (a unique prefix will do) or by query (the up to k most relevant "
        "memories that pass the relevance threshold). Deletes only when confirm is exactly \"CONFIRM\"; "
        "otherwise returns what it would delete, so call it first without confirm.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def forget_memory(
        query: Annotated[str | None, Field(min_length=1, description="Forget what matches this.")] = None,
        id: Annotated[str | None, Field(min_length=1, description="Forget the memory with this id.")] = None,
        confirm: Annotated[str | None, Field(description='"CONFIRM" to really delete.')] = None,
        k: Annotated[int, Field(ge=1, le=50, description="Most memories a query may forget.")] = 3,
    ) -> dict[str, Any]:
        return run(tools.forget, query=query, id=id, confirm=confirm, k=k)

    @tool("memory_stats",
        description="What ocat's memory holds: for each open store its name, location and counts of exchanges "
        "and documents, the embedding model, the relevance thresholds, and the names of all stores.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def memory_stats() -> dict[str, Any]:
        return run(tools.stats)

    @tool("memory_wake",
        description="The wake block: what ocat's chat gives the model at the start of every thread - the "
        "memories the user pinned, their profile, their latest threads - within a token budget. Start from it.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def memory_wake() -> dict[str, Any]:
        return run(tools.wake)

    @tool("pin_memory",
        description="Pin a memory (by id or unique prefix): it is then in the wake block of every thread.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def pin_memory(id: Annotated[str, Field(min_length=1, description="The memory's id.")]) -> dict[str, Any]:
        return run(tools.pin, id, True)

    @tool("unpin_memory",
        description="Unpin a memory (by id or unique prefix); it stays in memory.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    def unpin_memory(id: Annotated[str, Field(min_length=1, description="The memory's id.")]) -> dict[str, Any]:
        return run(tools.pin, id, False)

    @tool("memory_pins",
        description="The pinned memories, the latest pinned first.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def memory_pins() -> dict[str, Any]:
        return run(tools.pins)

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
    try:
        tools.stores()
        # Fetch the embedding model now, on first use, rather than inside the first search.
        def started(done: int, total: int | None) -> None:
            if not done:  # said once, when the download starts
                log.warning("downloading the embedding model (first use, %s)", memory.progress_words(total or 0, None))

        fetched = memory.prepare_model(tools.settings.embedding, progress=started,
                                       notify=lambda line: log.warning("%s", line))
        if fetched is not None and fetched.downloaded:
            log.warning("%s", fetched.describe())
    except Exception as exc:  # reported again to the first call that needs the store or the model
        log.warning("memory is not ready yet: %s", exc)


def serve(settings: "Settings", store_names: list[str]) -> int:
    """Serve the memory over stdio until the client closes the connection; returns the exit code."""
    # Before the SDK configures logging: ours goes to stderr, plainly, one line per record.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="ocat mcp: %(levelname)s: %(message)s")

    def notify(message: str) -> None:
        print(f"ocat mcp: {message}", file=sys.stderr, flush=True)

    # Long-lived like the chat: own the store and serve it to other ocat processes.
    tools = MemoryTools(settings, lambda: memory.open_stores(settings, store_names, serve=True, notify=notify))
    server = build_server(tools)
    try:
        import anyio

        anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        pass
    finally:
        tools.close()
    return 0
