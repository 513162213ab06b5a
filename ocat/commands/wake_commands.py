"""The wake commands: /wake, /pin, /unpin, /pins, /remember, /profile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command, require_store, require_store_and_model
from ocat.commands.results import CommandResult, EditFile
from ocat.config.locations import display_path
from ocat.operations.lookup import short_id
from ocat.operations.wake import pin, pins, remember, unpin

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.chat.session import ChatSession


@command("wake", "show what the model knows at the start of every thread: pins, profile, recent threads", group="wake",
         example="/wake")
def _wake(session: ChatSession) -> CommandResult:
    # This thread's: what the model is given with every turn of it.
    block = session.wake.for_turn(session.session_memory, session.scope().project)
    if block is None:
        return CommandResult(text="The wake block is off (wake.enabled: false).")
    if block.empty:
        return CommandResult(text=(
            "The wake block is empty: /pin ID or /remember TEXT pins a memory, /profile writes your "
            f"profile ({block.profile_path}), and your threads are listed once you have some."
        ))
    return CommandResult(text=f"{block.text()}\n\n({block.tokens} of {session.settings.wake.tokens} "
                              "tokens; given to the model with every turn of this thread)")


@command("pin", "pin a memory: the model is given it at the start of every thread", group="wake",
         arguments=(Arg("id", "a memory's id (or its start)", metavar="ID"),), example="/pin 3f2a9c1e")
def _pin(session: ChatSession, id: str) -> CommandResult:
    store = require_store(session)
    record_id = pin(store, id)
    session.wake.forget()  # the next turn gives the model the new block
    return CommandResult(text=f"Pinned {_shown(store, record_id)}: the model is given it in every thread (/pins).")


@command("unpin", "unpin a memory", arguments=(Arg("id", "a pinned memory's id (or its start)", metavar="ID"),),
         group="wake",
         example="/unpin 3f2a9c1e")
def _unpin(session: ChatSession, id: str) -> CommandResult:
    store = require_store(session)
    record_id = unpin(store, id)
    session.wake.forget()
    return CommandResult(text=f"Unpinned {_shown(store, record_id)}; it stays in memory.")


@command("pins", "list the pinned memories", group="wake", example="/pins")
def _pins(session: ChatSession) -> CommandResult:
    found = pins(require_store(session))
    if not found:
        return CommandResult(text="No pinned memories: /pin ID pins one, /remember TEXT stores a note and pins it.")
    return CommandResult(text="\n".join(line for _, line in found))


@command("remember", "store a note and pin it: the model is given it at the start of every thread", group="wake",
         arguments=(Arg("text", "what to remember", kind="rest"),), example="/remember I prefer metric units")
def _remember(session: ChatSession, text: str) -> CommandResult:
    store = require_store_and_model(session)
    done = remember(store, text, session.settings)
    session.wake.forget()
    said = f"Remembered and pinned ({', '.join(_shown(store, i) for i in done.ids)}{done.secrets})."
    if done.had_replaced_it is not None:
        said += (f" These words were a note replaced by {_shown(store, done.had_replaced_it)}; "
                 "they are given to the model again.")
    return CommandResult(text=said)


def _shown(store: MemoryStore, record_id: str) -> str:
    """The id as the other commands show it: its shortest unique start (ocat.operations.lookup.short_id)."""
    return short_id(store, record_id)


@command("profile", "edit your profile (who you are, how you like answers) in $EDITOR", example="/profile",
         group="wake")
def _profile(session: ChatSession) -> CommandResult:
    path = session.settings.profile_path
    session.wake.forget()
    return CommandResult(
        text=f"Your profile is {display_path(str(path))}; the model reads it at the start of every thread.",
        request=EditFile(path),
    )
