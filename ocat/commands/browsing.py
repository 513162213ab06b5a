"""/memory: open the memory browser (a screen of the full-screen chat)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command
from ocat.commands.results import CommandResult
from ocat.commands.results import BrowseMemory

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


@command("memory", "browse, search and manage all of memory (Ctrl+R)", group="memory",
         arguments=(Arg("query", "words to search for as it opens", kind="rest", optional=True),),
         aliases=("browse",), example="/memory garden plans")
def _memory(session: ChatSession, query: str | None) -> CommandResult:
    return CommandResult(request=BrowseMemory(query or ""))
