"""A conversation's messages that take focus: step through them, and fork at one (`keys.fork`).

`keys.messages` (Alt+Up) in the prompt focuses the latest message; Up and Down step from
message to message, `keys.fork` forks the conversation at the focused one's
exchange (the app runs `/fork` for it), and Esc or a printable key goes back to the prompt
(ocat.ui.prompt_focus). Each message knows its exchange once the answer has come in full.
A click never focuses a message: one made to select text must not turn the next `f` typed into a fork.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding, BindingType
from textual.message import Message

from ocat.ui.keys import default_keys

if TYPE_CHECKING:
    from textual import events
    from textual.widget import Widget


# The keys of a focused message: each a binding with an id (keys.fork remaps it), shown in the footer.
MESSAGE_BINDINGS: list[BindingType] = [
    Binding(default_keys().fork, "fork_here", "Fork here", id="message.fork"),
    Binding("up", "step(-1)", "Previous", show=False, id="message.previous"),
    Binding("down", "step(1)", "Next", show=False, id="message.next"),
]


class ForkHere(Message):
    """The user asked to fork at a message: `exchange_id` is its exchange's ("" while it has none)."""

    def __init__(self, exchange_id: str) -> None:
        self.exchange_id = exchange_id
        super().__init__()


def messages_of(widget: Widget) -> list[Widget]:
    """The conversation's messages that take focus, in order."""
    return [w for w in widget.screen.query(".message") if w.focusable]


async def message_key(widget: Widget, event: events.Key) -> None:
    """Run a focused message's own binding for this key, here, and stop it: a printable key left to
    bubble would go to the prompt (ocat.ui.prompt_focus), a fork key with it."""
    active = widget.screen.active_bindings.get(event.key)
    if active is None or active.node is not widget or not active.enabled:
        return
    event.prevent_default()
    event.stop()
    await widget.run_action(active.binding.action)


def step(widget: Widget, by: int) -> None:
    """Focus the message `by` places from this one (past the last: the prompt again)."""
    shown = messages_of(widget)
    if widget not in shown:
        return
    there = shown.index(widget) + by
    if there >= len(shown):
        widget.screen.query_one("#prompt").focus()
    elif there >= 0:
        shown[there].focus()
        shown[there].scroll_visible(animate=False)


class MessageKeys:
    """The keys of a message that takes focus (a prompt or an answer on screen): fork here, step on.
    Mixed into the message widgets before their Textual base, which declare `BINDINGS =
    MESSAGE_BINDINGS` themselves (Textual reads bindings from its own classes only); `exchange_id`
    is set once known."""

    exchange_id = ""
    FOCUS_ON_CLICK = False  # only keys.messages reaches the messages: a click selects text, as before

    async def _on_key(self, event: events.Key) -> None:
        await message_key(self, event)  # type: ignore[arg-type]

    def action_fork_here(self) -> None:
        """Fork the conversation at this message's exchange."""
        self.post_message(ForkHere(self.exchange_id))  # type: ignore[attr-defined]

    def action_step(self, by: int) -> None:
        """Focus the previous (-1) or next (1) message."""
        step(self, by)  # type: ignore[arg-type]
