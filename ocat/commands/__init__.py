"""Slash commands as data: one registry read by the chat app, the line-mode chat and /help.

A handler takes the session and the text after the command and returns a CommandResult;
each front end renders results its own way. Handlers may block (they touch the store), so
the app runs them in a thread.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ocat.errors import OcatError, UsageError

if TYPE_CHECKING:
    from ocat.session import ChatSession


@dataclass(frozen=True)
class CommandResult:
    """What a command did: a message, optional table rows, and whether the chat should end."""

    text: str = ""
    columns: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    error: bool = False
    quit: bool = False


Handler = Callable[["ChatSession", str], CommandResult]


@dataclass(frozen=True)
class Command:
    """One slash command: its name, aliases, argument synopsis, help line and handler."""

    name: str
    help: str
    handler: Handler
    arguments: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        """`/name ARGS` as shown in /help and completion."""
        return f"/{self.name} {self.arguments}".rstrip()


REGISTRY: dict[str, Command] = {}


def command(name: str, help: str, *, arguments: str = "", aliases: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
    """Register a handler as a slash command."""

    def register(handler: Handler) -> Handler:
        entry = Command(name=name, help=help, handler=handler, arguments=arguments, aliases=aliases)
        for key in (name, *aliases):
            REGISTRY[key] = entry
        return handler

    return register


def commands() -> list[Command]:
    """Every command once, in name order."""
    return sorted({id(c): c for c in REGISTRY.values()}.values(), key=lambda c: c.name)


def is_command(text: str) -> bool:
    """True when the input is a slash command rather than a prompt."""
    return text.startswith("/") and not text.startswith("//")


def run_command(session: ChatSession, text: str) -> CommandResult:
    """Run one input line that starts with '/'; unknown commands and failures become error results."""
    name, _, rest = text[1:].strip().partition(" ")
    entry = REGISTRY.get(name.lower())
    if entry is None:
        return CommandResult(text=f"unknown command /{name}; /help lists them", error=True)
    try:
        return entry.handler(session, rest.strip())
    except OcatError as exc:
        return CommandResult(text=str(exc), error=True)


@command("help", "list the commands", aliases=("h", "?"))
def _help(session: ChatSession, rest: str) -> CommandResult:
    rows = [(c.usage, c.help) for c in commands()]
    return CommandResult(text="Commands", columns=("command", "what it does"), rows=rows)


@command("quit", "leave ocat", aliases=("exit", "q"))
def _quit(session: ChatSession, rest: str) -> CommandResult:
    return CommandResult(quit=True)


def _store(session: ChatSession):  # noqa: ANN202 - MemoryStore, imported lazily
    if session.store is None:
        raise OcatError(f"memory is off: {session.memory_error or 'not ready yet'}")
    return session.store


@command("vquery", "search memory: rank, score, kind, date, excerpt", arguments='"QUERY" [K]')
def _vquery(session: ChatSession, rest: str) -> CommandResult:
    from datetime import datetime

    from ocat.memory import RetrievalLimits, retrieve

    try:
        parts = shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"/vquery: {exc}") from exc
    count = session.settings.vector_store.context_results
    if len(parts) > 1 and parts[-1].isdigit():
        count = max(1, int(parts.pop()))
    query = " ".join(parts)
    if not query:
        raise UsageError('/vquery needs a query: /vquery "what did we decide" 5')
    limits = RetrievalLimits.from_settings(session.settings.vector_store, results=count)
    hits = retrieve(_store(session), query, limits, limit=count)
    rows = []
    for rank, hit in enumerate(hits, start=1):
        when = datetime.fromtimestamp(hit.timestamp).strftime("%Y-%m-%d") if hit.timestamp else "-"
        origin = str(hit.metadata.get("thread_id", ""))[:8] if hit.kind == "exchange" else hit.kind
        mark = "*" if hit.admitted else ""
        rows.append((str(rank), f"{hit.score:.2f}{mark}", origin, when, hit.excerpt(70)))
    text = f"{len(hits)} result(s) for {query!r} (* = given to the model in a chat)" if hits else "No memories found."
    return CommandResult(text=text, columns=("#", "score", "thread/kind", "date", "excerpt"), rows=rows)


@command("vadd", "store text as a memory", arguments="TEXT")
def _vadd(session: ChatSession, rest: str) -> CommandResult:
    from dataclasses import asdict

    from ocat.chunking import ChunkingOptions
    from ocat.memory import add_text

    if not rest:
        raise UsageError("/vadd needs the text to remember")
    options = ChunkingOptions(**asdict(session.settings.chunking))
    outcome = add_text(_store(session), rest, options, source="vadd_command", manual_entry=True)
    if outcome.added_chunks == 0:
        return CommandResult(text="Already remembered.")
    return CommandResult(text=f"Remembered ({outcome.added_chunks} chunk(s)).")


@command("vstats", "show the store's location and counts")
def _vstats(session: ChatSession, rest: str) -> CommandResult:
    from dataclasses import asdict

    from ocat.memory import store_stats

    stats = asdict(store_stats(_store(session), session.settings))
    return CommandResult(text="Memory", columns=("key", "value"), rows=[(k, str(v)) for k, v in stats.items()])
