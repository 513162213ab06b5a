"""The chat screen's widgets: the prompt box and the messages of the conversation.

All text that comes from people, models or memory is shown as plain text or Markdown,
never as Rich markup, so a stored "[bold]" or "[link=...]" stays literal.
"""

from __future__ import annotations


from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option

from ocat.commands import REGISTRY, CommandResult, commands
from ocat.history import append_history, load_history
from ocat.models import SearchHit
from ocat.text import printable

if TYPE_CHECKING:
    from textual.widgets import Collapsible, DataTable

# Collapsible, DataTable and ProgressBar are imported where used, and the answer widget lives
# in answer.py: what the first frame does not show loads after it.


def plain(text: str, **style: object) -> Text:
    """Untrusted text (prompts, answers, memories) for the screen: never markup, never a terminal control."""
    return Text(printable(text), **style)  # type: ignore[arg-type]


class CommandSuggestions(OptionList):
    """The slash commands that match what is being typed, each with what it does."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.display = False
        self.can_focus = False  # the prompt keeps the focus; it steers this list

    def show_for(self, text: str) -> None:
        """Offer the commands whose name starts with the typed `/word`; hide otherwise."""
        typed = partial_command(text)
        if typed is None and not self.display:
            return  # ordinary typing: nothing to rebuild on every key
        matches = [] if typed is None else [c for c in commands() if any(
            n.startswith(typed) for n in (c.name, *c.aliases))]
        self.clear_options()
        if not matches:
            self.display = False
            return
        width = max(len(c.usage) for c in matches)
        self.add_options(
            Option(Text(f"{c.usage:<{width}}  {c.help}", no_wrap=True, overflow="ellipsis"), id=c.name)
            for c in matches
        )
        self.highlighted = 0
        self.display = True

    def chosen(self) -> str | None:
        """The highlighted command's name."""
        if not self.display or self.highlighted is None:
            return None
        return self.get_option_at_index(self.highlighted).id


def partial_command(text: str) -> str | None:
    """The command name being typed (`/vq` gives `vq`), or None once it is more than a name."""
    if not text.startswith("/") or text.startswith("//") or any(ch.isspace() for ch in text):
        return None
    return text[1:].lower()



class PromptInput(TextArea):
    """Multi-line input: Enter sends, Ctrl+J inserts a newline, Up/Down at the edges walk history.

    While a command name is being typed, the matching commands are listed above the box:
    Up/Down choose, Tab (or Enter on a partial name) completes, Esc hides the list.
    """

    BINDINGS = [
        Binding("enter", "submit", "Send", show=True, priority=True, id="prompt.submit"),
        Binding("ctrl+j,shift+enter", "newline", "Newline", show=True, id="prompt.newline"),
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

    def _suggestions(self) -> CommandSuggestions | None:
        found = self.screen.query(CommandSuggestions)
        return found.first() if found else None

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        suggestions = self._suggestions()
        if suggestions is not None:
            suggestions.show_for(self.text)

    def _complete(self, suggestions: CommandSuggestions) -> bool:
        """Replace the typed name with the chosen command; False when there is nothing to complete."""
        name = suggestions.chosen()
        if name is None:
            return False
        self.text = f"/{name} " if REGISTRY[name].arguments else f"/{name}"
        self.move_cursor(self.document.end)
        return True

    def action_submit(self) -> None:
        """Send the text, unless it is blank; on a partial command name, complete it first."""
        text = self.text
        suggestions = self._suggestions()
        typed = partial_command(text.strip())
        if suggestions is not None and typed is not None and typed not in REGISTRY and self._complete(suggestions):
            return
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
        suggestions = self._suggestions()
        if key == "ctrl+d" and not self.text:
            self.app.exit(0)  # as in a shell: Ctrl+D on an empty line leaves
            event.prevent_default()  # type: ignore[attr-defined]
        elif suggestions is not None and suggestions.display and key in ("up", "down", "tab", "escape"):
            if key == "tab":
                self._complete(suggestions)
            elif key == "escape":
                suggestions.display = False
            else:
                suggestions.action_cursor_up() if key == "up" else suggestions.action_cursor_down()
            event.prevent_default()  # type: ignore[attr-defined]
            event.stop()  # type: ignore[attr-defined]
        elif key == "up" and row == 0 and self.prompt_history:
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
        super().__init__(plain(text), classes="message user")


class NoticeMessage(Static):
    """A line from ocat itself: errors, cancellations, memory state."""

    def __init__(self, text: str, *, error: bool = False) -> None:
        super().__init__(plain(text), classes="notice error" if error else "notice")


class TaskProgress(Horizontal):
    """A long command's progress: what it is doing, a bar, and how to stop it."""

    def __init__(self, *, hint: str = "Esc stops") -> None:
        super().__init__(classes="task-progress")
        self.hint = hint

    def compose(self):  # noqa: ANN201 - ComposeResult
        from textual.widgets import ProgressBar

        yield Static("", classes="task-label")
        yield ProgressBar(show_eta=False)

    def show(self, label: str, done: int, total: int) -> None:
        """Move the bar to `done` of `total`."""
        from textual.widgets import ProgressBar

        self.query_one(".task-label", Static).update(plain(f"{label}  ({self.hint})"))
        self.query_one(ProgressBar).update(total=max(total, 1), progress=done)


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
        return Static(plain(title), classes="memory")
    lines = []
    for hit in memories:
        lines.append(f"{hit.score:.2f}  {hit.origin}  {hit.when()}\n{hit.excerpt(200)}")
    return Collapsible(Static(plain("\n\n".join(lines))), title=title, collapsed=False, classes="memory")


def command_view(result: CommandResult) -> Vertical:
    """A command's result: its message and, if any, a table."""
    from textual.widgets import DataTable

    parts: list[Static | DataTable[str]] = []
    if result.text:
        parts.append(NoticeMessage(result.text, error=result.error))
    if result.rows:
        table: DataTable[str] = DataTable(show_cursor=False, zebra_stripes=True, classes="result-table")
        table.add_columns(*result.columns)
        table.add_rows([tuple(plain(cell) for cell in row) for row in result.rows])  # type: ignore[misc]
        parts.append(table)
    return Vertical(*parts, classes="command-result")
