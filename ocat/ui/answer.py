"""The model's answer on screen: a Markdown widget that streams, and whose code blocks copy on a click.

Apart from widgets.py so that Markdown (and markdown-it) load with the first answer,
not before the first frame (bench/startup.py, docs/PERFORMANCE.md).
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

from ocat.ui.message_focus import MESSAGE_BINDINGS, MessageKeys


class AssistantMessage(MessageKeys, Markdown, can_focus=True):
    """The model's answer, rendered as Markdown as it streams in; a click on a code block copies it;
    focused, it forks there (ocat.ui.message_focus)."""

    BINDINGS = MESSAGE_BINDINGS

    class CodeClicked(Message):
        """The user clicked a code block of an answer."""

        def __init__(self, code: str) -> None:
            self.code = code
            super().__init__()

    def __init__(self, exchange_id: str = "") -> None:
        super().__init__("", classes="message assistant")
        self.exchange_id = exchange_id

    def on_click(self, event: events.Click) -> None:
        widget = event.widget
        while widget is not None and widget is not self:
            if isinstance(widget, MarkdownFence):
                self.post_message(self.CodeClicked(widget.code))
                return
            widget = widget.parent  # type: ignore[assignment]


def last_code_block(markdown: str) -> str | None:
    """The text of the last fenced or indented code block in some Markdown, if any."""
    from markdown_it import MarkdownIt

    blocks = [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type in ("fence", "code_block")]
    return blocks[-1].rstrip("\n") if blocks else None
