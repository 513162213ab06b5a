"""The conversation pane as the app and its components write to it: append a widget, say a notice, redraw a thread.

The pane is looked up each time, never kept: a worker (a queued command, a turn's last step,
memory opening) may finish after the window has closed, and must not fail for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from textual.containers import VerticalScroll

from ocat.text.terminal import printable
from ocat.ui.widgets import NoticeMessage, UserMessage

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

    from ocat.records import Exchange


class Conversation:
    """The chat screen's `#conversation`, for whoever has something to show in it."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app

    def pane(self) -> VerticalScroll | None:
        """The conversation, or None once the window is closing."""
        found = self._app.query("#conversation")
        return found.first(VerticalScroll) if found else None

    async def append(self, widget: Widget) -> None:
        """Show `widget` at the end of the conversation, scrolled to."""
        pane = self.pane()
        if pane is not None:
            await pane.mount(widget)
            pane.scroll_end(animate=False)

    def notice(self, text: str, *, error: bool = False) -> None:
        """Say `text` at the end of the conversation (in the error's colour when `error`)."""
        pane = self.pane()
        # A turn cancelled by the window closing (Ctrl+Q mid-call) has nowhere left to say so.
        if pane is not None and pane.is_attached:
            pane.mount(NoticeMessage(text, error=error))
            pane.scroll_end(animate=False)

    async def redraw(self, history: Sequence[Exchange]) -> None:
        """Show `history` afresh (after /continue or /clear, or its thread deleted in the browser)."""
        from ocat.ui.answer import AssistantMessage  # noqa: PLC0415 - Markdown loads with the first answer

        pane = self._app.query_one("#conversation", VerticalScroll)
        await pane.remove_children()
        for exchange in history:
            answer = AssistantMessage(exchange.exchange_id)
            await pane.mount_all([UserMessage(exchange.user_prompt, exchange.exchange_id), answer])
            await answer.update(printable(exchange.assistant_response))
        pane.scroll_end(animate=False)
