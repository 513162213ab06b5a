"""The chat's footer: Textual's, fitted to the window, so the chat's own keys stay whole at 80 columns.

Textual cuts what does not fit at the right edge, which at 80 columns was the chat's own keys
(`^o Copy answer` became `^o Copy`, `^b Copy code` was gone). When every key does not fit, the
footer leaves out first what is said elsewhere or known to all: `esc Cancel answer` (the status
line says "Esc cancels" while an answer runs), then `⏎ Send`. A wide window shows them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from textual import events
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

if TYPE_CHECKING:
    from textual.app import ComposeResult
    from textual.widget import Widget

# The actions whose keys are left out of a footer too narrow for all, first to last.
LEFT_OUT_FIRST = ("cancel", "submit")
# What a key takes beyond its key and description: a space on each side of the key, one after
# the description; the command palette's key has the separator before it too.
KEY_PADDING = 3


def width_of(widgets: list[Widget]) -> int:
    """How many columns the footer's keys take side by side."""
    keys = [w for w in widgets if isinstance(w, FooterKey)]
    return sum(cell_len(k.key_display) + cell_len(k.description) + KEY_PADDING + k.has_class("-command-palette")
               for k in keys)


class ChatFooter(Footer):
    """The footer, leaving out the keys said elsewhere when the window is too narrow for all."""

    def __init__(self) -> None:
        super().__init__()
        self._width = 0

    def compose(self) -> ComposeResult:
        shown = list(super().compose())
        room = self.app.size.width
        for action in LEFT_OUT_FIRST:
            if width_of(shown) <= room:
                break
            shown = [w for w in shown if not (isinstance(w, FooterKey) and w.action == action)]
        yield from shown

    def on_resize(self, event: events.Resize) -> None:
        # Fitted again whenever the width changes: a key left out at 80 columns comes back at 120.
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)
