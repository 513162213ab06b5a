"""A tiny MCP server (stdio, the official SDK) for the client tests: a read-only tool, one with a
side effect (it writes a file, so a test can prove it never ran without consent), one that
hangs, one that crashes its process, one that fails, one that floods notifications, one that
answers at length, one whose answer carries terminal control sequences, one that writes lines
that are not JSON-RPC to stdout (with $FIXTURE_GARBAGE=1, which also prints a banner there first),
and one that adds a tool and says so with `notifications/tools/list_changed` ($FIXTURE_GROWS=1).

Run: python tests/support/mcp_fixture_server.py (the side effect writes $FIXTURE_NOTE_FILE;
each call is appended to $FIXTURE_CALLS_FILE, one JSON line, so tests see what reached it; each
start appends the process's pid to $FIXTURE_STARTS_FILE, so tests see whether it was started). It is
slow to answer its initialize by $FIXTURE_START_DELAY seconds, or until the file $FIXTURE_START_HELD exists.
"""

import json
import os
import sys
import time

import anyio

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("fixture", log_level="WARNING")


def called(tool: str, **arguments: object) -> None:
    path = os.environ.get("FIXTURE_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(json.dumps({"tool": tool, "pid": os.getpid(), **arguments}) + "\n")


@server.tool(description="Look a word up in the fixture's dictionary.",
             annotations=ToolAnnotations(read_only_hint=True))
def lookup(word: str) -> str:
    called("lookup", word=word)
    return f"{word}: a word the fixture knows (definition 42)"


@server.tool(description="Write a note to the fixture's note file.",
             annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def write_note(text: str) -> str:
    called("write_note", text=text)
    with open(os.environ["FIXTURE_NOTE_FILE"], "a", encoding="utf-8") as note:
        note.write(text + "\n")
    return "written"


@server.tool(description="Never answers.", annotations=ToolAnnotations(read_only_hint=True))
async def hang() -> str:
    called("hang")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        called("hang-cancelled")  # MCP's cancellation reached the server
        raise
    return "late"


@server.tool(description="Ends the server's process.", annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    called("crash")
    sys.stdout.flush()
    os._exit(3)


@server.tool(description="Always fails.", annotations=ToolAnnotations(read_only_hint=True))
def fail() -> str:
    called("fail")
    raise ToolError("the fixture failed on purpose")


@server.tool(description="Sends many log notifications, then answers.",
             annotations=ToolAnnotations(read_only_hint=True))
async def flood(ctx: Context) -> str:
    called("flood")
    for index in range(300):
        await ctx.info(f"log line {index}")
    return "flooded and done"


@server.tool(description="Answers at great length.", annotations=ToolAnnotations(read_only_hint=True))
def big() -> str:
    called("big")
    return "\n".join(f"line {index}: " + "lorem ipsum dolor sit amet " * 4 for index in range(3000))


def babble() -> str:
    called("babble")
    os.write(1, b"babble: not JSON-RPC\n{\"jsonrpc\": \"2.0\", \"nonsense\": 1}\n")
    return "babbled"


if os.environ.get("FIXTURE_GARBAGE"):  # only then: the other tests count the tools
    server.tool(description="Writes lines that are not JSON-RPC to stdout, then answers.",
                annotations=ToolAnnotations(read_only_hint=True))(babble)


def grown() -> str:
    called("grown")
    return "grown and here"


async def grow(ctx: Context) -> str:
    called("grow")
    server.add_tool(grown, description="A tool that grow added.")
    await ctx.session.send_tool_list_changed()
    return "the list has grown"


if os.environ.get("FIXTURE_GROWS"):
    server.tool(description="Adds the tool grown to the list and tells the client.",
                annotations=ToolAnnotations(read_only_hint=True))(grow)


@server.tool(description="Answers with terminal control sequences.", annotations=ToolAnnotations(read_only_hint=True))
def paint() -> str:
    called("paint")
    return "\x1b[2J\x1b[31mred\x1b[0m and a bell\x07"


if __name__ == "__main__":
    if os.environ.get("FIXTURE_STARTS_FILE"):
        with open(os.environ["FIXTURE_STARTS_FILE"], "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    if os.environ.get("FIXTURE_GARBAGE"):  # a server that prints a banner on stdout, as some do
        os.write(1, b"Starting the fixture server...\n")
    if os.environ.get("FIXTURE_START_DELAY"):
        time.sleep(float(os.environ["FIXTURE_START_DELAY"]))
    if os.environ.get("FIXTURE_START_HELD"):  # slow until the test lets it go: the file appears
        while not os.path.exists(os.environ["FIXTURE_START_HELD"]):
            time.sleep(0.05)
    server.run("stdio")
