"""The prompt keeps focus: what is typed always reaches it, and the conversation scrolls from it.

A mixin of `OcatApp` (ocat.ui.app). Tab in the prompt never moves focus (ocat.ui.widgets.PromptInput);
a click can still focus something else (a result table, a collapsible), and then a printable
key goes to the prompt, with focus, instead of being dropped, and Esc brings focus back.
PageUp and PageDown scroll the conversation while the prompt keeps focus, so a long result
(`/help NAME`, a big table at 80x24) is read without leaving it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.containers import VerticalScroll

if TYPE_CHECKING:
    from textual.app import App

    from ocat.ui.widgets import PromptInput

    AppBase = App[int]
else:
    AppBase = object  # a mixin of OcatApp (an App) at run time


class PromptFocus(AppBase):
    """Keeping the prompt the place where typing goes."""

    def _chat_prompt(self) -> PromptInput | None:
        """The chat's prompt box, when the chat screen is the one shown (not a dialog, not the
        memory browser, not while the window closes)."""
        from ocat.ui.widgets import PromptInput

        if len(self.screen_stack) != 1:
            return None
        found = self.screen.query(PromptInput)
        return found.first() if found else None

    def refocus_prompt(self) -> bool:
        """Give the prompt focus back if something else has it; True if it had moved."""
        box = self._chat_prompt()
        if box is None or self.focused is box:
            return False
        box.focus()
        return True

    def on_key(self, event: events.Key) -> None:
        """A printable key that reached the app with focus elsewhere (a clicked table) goes into
        the prompt, which takes focus back: nothing typed is dropped."""
        box = self._chat_prompt()
        if box is None or self.focused is box or not event.is_printable or not event.character:
            return
        event.stop()
        box.focus()
        box.insert(event.character)

    def action_scroll_conversation(self, direction: str) -> None:
        """Scroll the conversation a page `up` or `down` (PageUp, PageDown in the prompt)."""
        found = self.screen.query("#conversation")
        if not found:
            return
        conversation = found.first(VerticalScroll)
        if direction == "up":
            conversation.scroll_page_up(animate=False)
        else:
            conversation.scroll_page_down(animate=False)
