"""Editing a prompt before it is sent: /edit (in $EDITOR) and /edit last (edit-and-resend)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command
from ocat.commands.results import CommandResult, Send
from ocat.commands.results import EditPrompt

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


@command("edit", "compose in $EDITOR; (last) edit and resend the last prompt", group="conversation",
         arguments=(Arg("what", "the last prompt, to edit and send again", kind="choice", optional=True,
                        choices=("last",), metavar="last"),),
         example="/edit last")
def _edit(session: ChatSession, what: str | None) -> CommandResult:
    if what != "last":
        return CommandResult(request=EditPrompt())
    if not session.history:
        return CommandResult(text="Nothing to edit yet: this conversation is empty.", error=True)
    last = session.history[-1]
    # Nothing is taken back yet: only sending the edited prompt replaces the exchange.
    return CommandResult(
        text="Edit the last prompt, then send it: its answer is replaced, in memory too. "
        "Clear it (or send a command) to keep the exchange.",
        request=EditPrompt(prompt=last.user_prompt, replaces=last.exchange_id),
    )


def replace_last(session: ChatSession, replaces: str, prompt: str) -> CommandResult:
    """Send `prompt`, the edited last prompt, in place of the exchange `replaces` (taken back,
    from memory too, as /retry does). When the conversation has moved on since /edit last,
    nothing is taken back and `prompt` goes as a new turn."""
    if not session.history or session.history[-1].exchange_id != replaces:
        return CommandResult(text="The conversation has moved on since /edit last: this goes as a new prompt "
                             "and nothing is replaced.", request=Send(prompt))
    session.take_back_last()
    return CommandResult(text="Sending the edited prompt; the earlier exchange is forgotten.",
                         conversation_replaced=True, request=Send(prompt))
