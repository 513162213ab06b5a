"""The registry of slash commands: one table read by the chat app, the line-mode chat and /help.

Each command declares its arguments (`Arg`); `run_command` checks the text after the command
against them and calls the handler with the parsed values, or returns an error result without
calling it. A handler returns a CommandResult (ocat.commands.results): data, and typed requests when it
needs the user; each front end renders results and carries out requests its own way.
Handlers may block (they touch the store), so the app runs them in a thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable
import difflib

from ocat.commands.arguments import Arg, check_declaration, parse_arguments
from ocat.commands.results import CommandResult
from ocat.errors import OcatError, UsageError
from ocat.logs import log_failure

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


# A handler takes the session and one keyword argument per declared argument, already checked.
Handler = Callable[..., CommandResult]


# What commands are for, in the order /help shows them: each group is a column of names.
GROUPS: dict[str, str] = {
    "conversation": "chat and threads",
    "memory": "memory",
    "wake": "wake block",
    "settings": "settings",
}


@dataclass(frozen=True)
class Command:
    """One slash command: its name, aliases, declared arguments, help line, example, its group
    (what it is for: a key of GROUPS) and handler."""

    name: str
    help: str
    handler: Handler
    arguments: tuple[Arg, ...] = ()
    aliases: tuple[str, ...] = ()
    example: str = ""
    group: str = "settings"

    @property
    def usage(self) -> str:
        """`/name ARGS` as shown in /help and completion, made from the declared arguments."""
        return " ".join([f"/{self.name}", *(a.synopsis for a in self.arguments)])

    def explain(self) -> CommandResult:
        """The command's whole usage for `/help NAME`: synopsis, arguments, example, aliases."""
        lines = [f"{self.usage}: {self.help}"]
        if not self.arguments:
            lines.append("It takes no arguments.")
        lines.append(f"Example: {self.example}")
        if self.aliases:
            lines.append("Also: " + ", ".join(f"/{a}" for a in self.aliases))
        rows = [(a.synopsis, a.describe()) for a in self.arguments]
        return CommandResult(text="\n".join(lines), columns=("argument", "what it takes") if rows else (), rows=rows,
                             fit_column=1 if rows else None, fit_wraps=True)


REGISTRY: dict[str, Command] = {}


def command(
    name: str, help: str, *, group: str, arguments: tuple[Arg, ...] = (), aliases: tuple[str, ...] = (),
    example: str = "",
) -> Callable[[Handler], Handler]:
    """Register a handler as a slash command taking the declared `arguments`, listed by /help
    under `group` (a key of GROUPS)."""
    check_declaration(name, arguments)
    if group not in GROUPS:
        raise ValueError(f"/{name}: group {group!r} is not one of {', '.join(GROUPS)}")

    def register(handler: Handler) -> Handler:
        entry = Command(name=name, help=help, handler=handler, arguments=arguments, aliases=aliases,
                        example=example or f"/{name}", group=group)
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
    """Run one input line that starts with '/'; unknown commands, bad arguments and failures become error results.

    The arguments are checked against the command's declaration first: on bad input the
    handler is not called, so nothing is read or changed.
    """
    # Any whitespace ends the name: "/vadd" then a new line is /vadd with the lines after it.
    name, rest = (text[1:].strip().split(maxsplit=1) + ["", ""])[:2]
    entry = REGISTRY.get(name.lower())
    if entry is None:
        near = difflib.get_close_matches(name.lower(), list(REGISTRY), n=1)
        hint = f"; did you mean /{near[0]}?" if near else "; /help lists them"
        return CommandResult(text=f"unknown command /{name}{hint}", error=True)
    try:
        arguments = parse_arguments(entry, rest)
    except OcatError as exc:
        return CommandResult(text=str(exc), error=True)
    return run_step(f"/{entry.name}", lambda: entry.handler(session, **arguments))


def run_step(what: str, step: Callable[[], CommandResult]) -> CommandResult:
    """Run a command, or the step a request carries (`Confirm.then`, `Choose.then`): failures
    become error results, never exceptions, so no front end is left stuck."""
    try:
        return step()
    except OcatError as exc:
        return CommandResult(text=str(exc), error=True)
    except Exception as exc:  # a bug must not end the chat or leave it waiting: say it, log it
        return CommandResult(text=log_failure(what, exc), error=True)


@command("help", "list the commands, or explain one", group="settings", aliases=("h", "?"), example="/help vquery",
         arguments=(Arg("name", "the command to explain", optional=True, metavar="COMMAND"),))
def _help(session: ChatSession, name: str | None) -> CommandResult:
    if name:
        entry = REGISTRY.get(name.lstrip("/").lower())
        if entry is None:
            raise UsageError(f"no command /{name.lstrip('/')}; /help lists them")
        return entry.explain()
    return command_overview()


def command_overview() -> CommandResult:
    """Every command's name, in a column per group (GROUPS): short enough to be seen whole in
    a 80x24 window, where a line per command with its help was not."""
    columns = [[f"/{c.name}" for c in commands() if c.group == group] for group in GROUPS]
    rows = [tuple(column[i] if i < len(column) else "" for column in columns)
            for i in range(max(len(column) for column in columns))]
    return CommandResult(text="Commands by purpose. /help NAME explains one: what it does, its arguments, "
                              "an example.", columns=tuple(GROUPS.values()), rows=rows)


@command("exit", "leave ocat", group="settings", aliases=("quit", "q"))
def _quit(session: ChatSession) -> CommandResult:
    return CommandResult(quit=True)


def require_store(session: ChatSession):  # noqa: ANN201 - MemoryStore, imported lazily
    """The session's store, or an error saying why memory cannot be used."""
    if session.session_memory.store is None:
        session.session_memory.revive()  # after a failure: try the store again (at most every half minute)
    if session.session_memory.store is None:
        raise OcatError(f"memory is off: {session.session_memory.error or 'not ready yet'}")
    return session.session_memory.store


def require_store_and_model(session: ChatSession):  # noqa: ANN201 - MemoryStore, imported lazily
    """The session's store when the embedding model can run too (searching and adding need it)."""
    store = require_store(session)
    if session.session_memory.model_available():
        return store
    if session.session_memory.model_download is not None:
        raise OcatError(
            f"the embedding model is still downloading ({session.session_memory.model_download}); "
            "try again when it is ready"
        )
    raise OcatError(f"memory is off: {session.session_memory.error or 'the embedding model is not ready yet'}")


# Registering the commands is importing them.
