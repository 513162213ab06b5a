"""The prompt keeps focus: what is typed always reaches it, and the conversation scrolls from it.

Tab in the prompt never moves focus (ocat.ui.widgets.PromptInput); a click can still focus
something else (a result table, a collapsible), and then a printable key goes to the prompt,
with focus, instead of being dropped, and Esc brings focus back. PageUp and PageDown scroll
the conversation while the prompt keeps focus, so a long result (`/help NAME`, a big table at
80x24) is read without leaving it.

A helper the app owns, not a component of its own: keys and actions reach the app (a key
typed with a table focused bubbles to it, PageUp runs `app.scroll_conversation`), so the app
keeps the handlers and hands each to this object, which is given the app and uses only its
public API (the screen stack, the focused widget).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.containers import VerticalScroll
from ocat.ui.widgets import PromptInput

if TYPE_CHECKING:
    from textual import events
    from textual.app import App



class PromptFocus:
    """Keeping the prompt the place where typing goes."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app

    def _chat_prompt(self) -> PromptInput | None:
        """The chat's prompt box, when the chat screen is the one shown (not a dialog, not the
        memory browser, not while the window closes)."""
        if len(self._app.screen_stack) != 1:
            return None
        found = self._app.screen.query(PromptInput)
        return found.first() if found else None

    def refocus(self) -> bool:
        """Give the prompt focus back if something else has it; True if it had moved."""
        box = self._chat_prompt()
        if box is None or self._app.focused is box:
            return False
        box.focus()
        return True

    def take_key(self, event: events.Key) -> None:
        """A printable key that reached the app with focus elsewhere (a clicked table) goes into
        the prompt, which takes focus back: nothing typed is dropped."""
        box = self._chat_prompt()
        if box is None or self._app.focused is box or not event.is_printable or not event.character:
            return
        event.stop()
        box.focus()
        box.insert(event.character)

    def scroll(self, direction: str) -> None:
        """Scroll the conversation a page `up` or `down` (PageUp, PageDown in the prompt)."""
        found = self._app.screen.query("#conversation")
        if not found:
            return
        conversation = found.first(VerticalScroll)
        if direction == "up":
            conversation.scroll_page_up(animate=False)
        else:
            conversation.scroll_page_down(animate=False)
