"""The versions commands: /supersede (a certain link between two versions of a fact) and /unlink (undo one).

`/vget ID` shows a memory's versions (ocat.operations.versions.versions_markdown), as the memory browser does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command, require_store
from ocat.commands.results import CommandResult
from ocat.operations.lookup import short_id
from ocat.operations.versions import supersede, unlink

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


@command(
    "supersede",
    "say that a memory is an outdated version of a newer one: the model is then given the newer with it",
    group="memory",
    arguments=(
        Arg("older", "the outdated memory's id (or its start)", metavar="OLD"),
        Arg("newer", "the newer memory's id (or its start)", metavar="NEW"),
        Arg("evidence", "what changed, in words (default: the words that differ)", kind="text", optional=True),
    ),
    example="/supersede 3f2a9c1e 7b1d0e42 dose 500 mg -> 850 mg",
)
def _supersede(session: ChatSession, older: str, newer: str, evidence: str | None) -> CommandResult:
    store = require_store(session)
    done = supersede(store, older, newer, evidence or "")
    old, new = short_id(store, done.older), short_id(store, done.newer)
    said = f" ({done.evidence})" if done.evidence else ""
    return CommandResult(text=f"{old} is now an outdated version of {new}{said}: whenever {old} is given to the "
                              f"model, {new} comes with it. /vget {old} shows the versions; /unlink {old} undoes it.")


@command(
    "unlink",
    "undo a memory's link to a newer version (a wrong 'updated by')",
    group="memory",
    arguments=(Arg("id", "the older memory's id (or its start)", metavar="ID"),),
    example="/unlink 3f2a9c1e",
)
def _unlink(session: ChatSession, id: str) -> CommandResult:
    store = require_store(session)
    done = unlink(store, id)
    shown = short_id(store, done.id)
    if done.newer is None:
        return CommandResult(text=f"{shown} is not linked to a newer version; nothing was changed.")
    return CommandResult(text=f"{shown} is no longer an outdated version of {short_id(store, done.newer)}: it is "
                              "given to the model on its own again.")
