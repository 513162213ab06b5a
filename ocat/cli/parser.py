"""The command line's grammar: the `ocat` and `ocat mcp` argument parsers, whose help is the CLI reference.

Only argparse and light modules: `--version` and `--help` are answered without loading more.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from ocat import __version__
from ocat.text.limits import MAX_RESULTS, MIN_RESULTS, whole_number

# dest of each headless action -> the action's name in JSON output.
ACTIONS: dict[str, str] = {
    "add_to_vector_store": "add",
    "query_vector_store": "query",
    "vector_store_stats": "stats",
    "ask": "ask",
    "export_memory": "export",
    "import_memory": "import",
    "import_history": "import-history",
    "wake": "wake",
    "pin": "pin",
    "unpin": "unpin",
    "pins": "pins",
    "fetch_model": "fetch-model",
    "check_store": "check",
    "repair_store": "repair",
    "redact_secrets": "redact-secrets",
    "list_tools": "list-tools",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; its help text is the CLI reference."""
    parser = argparse.ArgumentParser(
        prog="ocat",
        description="A terminal chat client that remembers. Without an action, opens the chat. "
        "`ocat mcp` serves the same memory to MCP clients (Claude Code, editors) over stdio: see `ocat mcp --help`.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 configuration error, "
    "4 --check-store found problems.",
    )
    actions = parser.add_argument_group("actions (one at a time)").add_mutually_exclusive_group()
    actions.add_argument(
        "--add-to-vector-store", metavar="PATH", help="add a file, or a folder's .md/.txt files, to memory"
    )
    actions.add_argument(
        "--query-vector-store", metavar="QUERY", help="search memory; '-' reads one query per line from stdin"
    )
    actions.add_argument("--vector-store-stats", action="store_true", help="show the store's location and counts")
    actions.add_argument("--ask", metavar="TEXT", help="ask the model once, with memory; '-' reads stdin")
    actions.add_argument("--export-memory", metavar="FILE", help="write all memory as JSON Lines ('-' for stdout)")
    actions.add_argument(
        "--import-memory", metavar="FILE", help="add memory from a JSON Lines export ('-' reads stdin)"
    )
    actions.add_argument(
        "--import-history",
        metavar="PATH",
        nargs="?",
        const="",
        help="add your old chats: a ChatGPT or Claude export (.zip, folder or conversations.json), llm's logs.db,"
        " or Claude Code or Codex sessions (a session file or a folder; without PATH, the agent's own folder)"
        " ('-' reads stdin, or a Claude Code hook's JSON)",
    )
    actions.add_argument(
        "--wake", action="store_true",
        help="print the wake block the model gets at the start of every thread: pins, profile, recent threads",
    )
    actions.add_argument("--pin", metavar="ID", help="pin a memory: the model gets it at the start of every thread")
    actions.add_argument("--unpin", metavar="ID", help="unpin a memory (it stays in memory)")
    actions.add_argument("--pins", action="store_true", help="list the pinned memories")
    actions.add_argument(
        "--check-store",
        action="store_true",
        help="check the store: counts per side, orphans, damaged files, partial documents (changes nothing)",
    )
    actions.add_argument(
        "--repair-store",
        action="store_true",
        help="rebuild the derived files from the store and finish partial documents; deletes no memory",
    )
    actions.add_argument(
        "--redact-secrets",
        action="store_true",
        help="replace the secrets already stored (keys, tokens, passwords: memory.secrets) with placeholders, "
        "in place; asks first (--yes to not ask)",
    )
    actions.add_argument(
        "--list-tools", action="store_true",
        help="list the MCP servers of the config and their tools, and which may run without asking (docs/tools.md)",
    )
    actions.add_argument(
        "--fetch-model",
        action="store_true",
        help="download the local embedding model now (ocat otherwise does on first use); prints its folder",
    )

    options = parser.add_argument_group("options")
    options.add_argument("--config", metavar="PATH", help="config file (default: $XDG_CONFIG_HOME/ocat/config.yaml)")
    options.add_argument("--model", help="LLM model, any name litellm knows (llm.model)")
    options.add_argument(
        "--store",
        metavar="NAME",
        help="the named store to use (vector_store.collection); queries and stats may read several: a,b",
    )
    options.add_argument(
        "--results",
        type=_results,
        metavar="N",
        help=f"results per query, {MIN_RESULTS} to {MAX_RESULTS} (default: vector_store.context_results)",
    )
    options.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="queries: only memories whose metadata matches (repeatable; also KEY>=VALUE, KEY<=VALUE, KEY!=VALUE)",
    )
    options.add_argument(
        "--from",
        dest="history_format",
        choices=("chatgpt", "claude", "llm", "claude-code", "codex", "ocat"),
        help="--import-history: the export's format, when it should not be told from its content",
    )
    options.add_argument(
        "--accept-smaller-store",
        action="store_true",
        help="--repair-store: when the store holds less than its derived files (chroma.sqlite3 emptied or "
        "replaced), keep only what it holds; the derived files are moved aside, not deleted",
    )
    options.add_argument("--yes", action="store_true", help="--redact-secrets: do it without asking")
    options.add_argument("--output", choices=("text", "json"), default="text", help="output format (default: text)")
    options.add_argument("--no-vector-store", action="store_true", help="run without memory: nothing read or stored")
    options.add_argument(
        "--dummy-mode", action="store_true", help="answer with a deterministic fake model; store nothing"
    )
    options.add_argument(
        "--set",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="override a config key, e.g. llm.temperature=0.2",
    )
    options.add_argument(
        "--project", metavar="PATH",
        help="keep to one project's exchanges (a folder: its git root, else itself): queries, --ask and the chat",
    )
    options.add_argument(
        "--now", type=_moment, metavar="DATE",
        help="--query-vector-store, --ask: read time words ('yesterday', 'last week') as if today were DATE "
        "(2025-08-02, or 2025-08-02T09:30; a date alone is its noon)",
    )
    options.add_argument(
        "--allow-tool", action="append", default=[], type=_tool_key, metavar="SERVER.TOOL",
        help="let the model call this MCP server's tool without asking, for this command (repeatable)",
    )
    options.add_argument("--plain", action="store_true", help="chat in line mode (prompt and streamed text)")
    options.add_argument("--version", action="version", version=f"ocat {__version__}")
    return parser


def _results(text: str) -> int:
    # Bounded: a huge N would reach ChromaDB as a C integer and fail there ("int too large").
    try:
        return whole_number(text, MIN_RESULTS, MAX_RESULTS)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _moment(text: str) -> datetime:
    """`--now`: an ISO 8601 date or date and time, as a local moment (a date alone: its noon)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date such as 2025-08-02 (or 2025-08-02T09:30), not {text!r}") \
            from None
    if len(text.strip()) == 10:  # a date alone: the middle of that day, so "yesterday" is the day before it
        moment = moment.replace(hour=12)
    if not 1970 <= moment.year <= 2999:  # the dates a memory can have (as search_memory's after and before)
        raise argparse.ArgumentTypeError(f"expected a date from 1970 to 2999, not {text!r}")
    return moment if moment.tzinfo is not None else moment.astimezone()


def _key_value(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def _tool_key(text: str) -> str:
    server, dot, tool = text.partition(".")
    if not dot or not server or not tool:
        raise argparse.ArgumentTypeError(f"expected SERVER.TOOL (a server of mcp_servers and its tool), got {text!r}")
    return text


def build_mcp_parser() -> argparse.ArgumentParser:
    """The parser of `ocat mcp`: serve the memory to MCP clients over stdio."""
    parser = argparse.ArgumentParser(
        prog="ocat mcp",
        description="Serve ocat's memory over MCP (stdio): search_memory, remember, forget_memory, memory_stats.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 configuration error, "
    "4 --check-store found problems.",
    )
    parser.add_argument("--config", metavar="PATH", help="config file (default: $XDG_CONFIG_HOME/ocat/config.yaml)")
    parser.add_argument("--store", metavar="NAME", help="the named store to serve; several (a,b) are served read-only")
    parser.add_argument("--set", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                        help="override a config key, e.g. vector_store.memory_threshold=0.6")
    return parser
