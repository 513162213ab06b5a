"""The chat screen's widgets: the prompt box and the messages of the conversation.

All text that comes from people, models or memory is shown as plain text or Markdown,
never as Rich markup, so a stored "[bold]" or "[link=...]" stays literal.
"""

from __future__ import annotations


from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static, TextArea

from ocat.commands import CommandResult
from ocat.history import append_history, load_history
from ocat.models import SearchHit

if TYPE_CHECKING:
    from textual.widgets import Collapsible, DataTable

# Collapsible and DataTable are imported where used, and the answer widget lives in
# answer.py: what the first frame does not show loads after it.


class PromptInput(TextArea):
    """Multi-line input: Enter sends, Ctrl+J inserts a newline, Up/Down at the edges walk history."""

    BINDINGS = [
        Binding("enter", "submit", "Send", show=True, priority=True, id="prompt.submit"),
        Binding("ctrl+j", "newline", "Newline", show=True, id="prompt.newline"),
    ]

    class Submitted(Message):
        """The user sent the text in the box."""

        def __init__(self, text: str) -> None:
            self.text = text
            super().__init__()

    def __init__(self, *, history: list[str] | None = None, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)  # type: ignore[arg-type]
        self.prompt_history = history if history is not None else load_history()
        self._history_index: int | None = None

    def action_submit(self) -> None:
        """Send the text, unless it is blank."""
        text = self.text
        if text.strip():
            if not self.prompt_history or self.prompt_history[-1] != text:
                self.prompt_history.append(text)
                append_history(text)
            self._history_index = None
            self.post_message(self.Submitted(text))

    def action_newline(self) -> None:
        """Insert a line break where the cursor is."""
        self.insert("\n")

    def _on_key(self, event: object) -> None:
        key = getattr(event, "key", "")
        row, _ = self.cursor_location
        if key == "up" and row == 0 and self.prompt_history:
            self._walk_history(-1)
            event.prevent_default()  # type: ignore[attr-defined]
        elif key == "down" and row == self.document.line_count - 1 and self._history_index is not None:
            self._walk_history(1)
            event.prevent_default()  # type: ignore[attr-defined]

    def _walk_history(self, step: int) -> None:
        index = len(self.prompt_history) if self._history_index is None else self._history_index
        index = max(0, min(len(self.prompt_history), index + step))
        self._history_index = None if index == len(self.prompt_history) else index
        self.text = "" if self._history_index is None else self.prompt_history[index]
        self.move_cursor(self.document.end)


class UserMessage(Static):
    """What the user sent, as literal text."""

    def __init__(self, text: str) -> None:
        super().__init__(Text(text), classes="message user")


class NoticeMessage(Static):
    """A line from ocat itself: errors, cancellations, memory state."""

    def __init__(self, text: str, *, error: bool = False) -> None:
        super().__init__(Text(text), classes="notice error" if error else "notice")


def memory_indicator(memories: list[SearchHit], mode: str) -> Static | Collapsible | None:
    """What the user is shown of the memories given to the model (display.context_mode)."""
    from textual.widgets import Collapsible

    if mode == "off" or not memories:
        return None
    noun = "exchange" if len(memories) == 1 else "exchanges"
    title = f"Using context from {len(memories)} previous {noun}"
    if any(m.kind == "document" for m in memories):
        title = f"Using context from {len(memories)} memories"
    if mode == "summary":
        return Static(Text(title), classes="memory")
    lines = []
    for hit in memories:
        lines.append(f"{hit.score:.2f}  {hit.origin}  {hit.when()}\n{hit.excerpt(200)}")
    return Collapsible(Static(Text("\n\n".join(lines))), title=title, collapsed=False, classes="memory")


def command_view(result: CommandResult) -> Vertical:
    """A command's result: its message and, if any, a table."""
    from textual.widgets import DataTable

    parts: list[Static | DataTable[str]] = []
    if result.text:
        parts.append(NoticeMessage(result.text, error=result.error))
    if result.rows:
        table: DataTable[str] = DataTable(show_cursor=False, zebra_stripes=True, classes="result-table")
        table.add_columns(*result.columns)
        table.add_rows([tuple(Text(cell) for cell in row) for row in result.rows])  # type: ignore[misc]
        parts.append(table)
    return Vertical(*parts, classes="command-result")
