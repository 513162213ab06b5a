"""A tool call under the answer: one line (what it did, how many results, how long), expandable
to what the tool gave the model. Expanded from the start with `/showcontext on`, as memories are."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

from ocat.tools.calls import ToolCall
from ocat.ui.plain import plain


# What the title line takes before the call's own words: its padding and the "▶ " symbol.
TITLE_INDENT = 4


class ToolCallView(Collapsible):
    """One tool call of a turn, updated as it runs and when it has its result."""

    DEFAULT_CSS = """
    ToolCallView {
        color: $text-muted;
        margin: 0;
        padding: 0;
        border-top: none;
    }
    ToolCallView.failed {
        color: $error;
    }
    """

    def __init__(self, call: ToolCall, *, expanded: bool = False) -> None:
        self.call = call
        self.body = Static(plain(call.result or "…"), classes="tool-result")
        # The line holds what the model wrote (a query): never markup, never a terminal control.
        super().__init__(self.body, title=plain(call.line()), collapsed=not expanded, classes="tool-call")  # type: ignore[arg-type]

    def _line(self) -> str:
        """The call's line within the title's width (the "▶ " and padding take TITLE_INDENT)."""
        width = self.size.width - TITLE_INDENT
        return self.call.line(width if width > 0 else None)

    def on_resize(self) -> None:
        self.title = plain(self._line())  # type: ignore[assignment]

    def refresh_call(self) -> None:
        """Show the call as it is now (its result, or its error)."""
        self.title = plain(self._line())  # type: ignore[assignment]
        self.body.update(plain(self.call.result or self.call.error or ""))
        self.set_class(self.call.error is not None, "failed")
