"""The chat screen's widgets: the prompt box and the messages of the conversation.

All text that comes from people, models or memory is shown as plain text or Markdown,
never as Rich markup, so a stored "[bold]" or "[link=...]" stays literal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Collapsible, ProgressBar, Static, TextArea

from ocat.chat.prompt_history import append_history, load_history
from ocat.records import SearchHit
from ocat.ui.keys import default_keys
from ocat.ui.message_focus import MESSAGE_BINDINGS, MessageKeys, messages_of
from ocat.ui.plain import Hanging, plain
from ocat.ui.suggestions import CommandSuggestions, partial_command
from ocat.text.terminal import printable
from ocat.editor import edit_text
from ocat.ui.external_editor import in_editor

if TYPE_CHECKING:
    from textual.app import RenderResult
    from textual.widgets import DataTable

    from ocat.commands.results import CommandResult
    from ocat.operations.wake import WakeBlock

# DataTable and Markdown are imported where used, and the answer widget lives in answer.py:
# what the first frame does not show loads after it.


# What Tab says when there is nothing to complete (it never takes focus from the prompt).
TAB_HINT = "Tab completes a command: type / to list them. PageUp and PageDown scroll the conversation."


class PromptInput(TextArea):
    """Multi-line input: Enter sends, Ctrl+J inserts a newline, Up/Down at the edges walk history.

    While a command name is being typed, the matching commands are listed above the box (and
    while /model's or /vdoc's argument is typed, the matching models or paths):
    Up/Down choose, Tab (or Enter on a partial name) completes, Esc hides the list. Tab never
    moves focus out of the box; PageUp/PageDown scroll the conversation above it.

    Every key acts in the order it was typed, however fast the keys come (see `_on_key`).
    Prompts sent while the app is busy wait in `held` until the app sends them.
    """

    # Not priority bindings: a priority binding runs in the App's queue the moment the key is
    # read, before the characters typed ahead of it (already forwarded to this box's queue) are
    # inserted. `_on_key` runs them here instead, in typing order, and before TextArea turns
    # Enter into a line break. They stay Bindings for the footer and for `keys.*` remapping.
    BINDINGS = [
        Binding(default_keys().send, "submit", "Send", show=True, id="prompt.submit"),
        Binding(default_keys().newline, "newline", "Newline", show=True, id="prompt.newline"),
        Binding(default_keys().messages, "to_messages", "Messages", show=False, id="prompt.messages"),
    ]

    class Submitted(Message):
        """The user sent the text in the box (it has already left the box); `replaces`: the id
        of the exchange it was the edited prompt of (/edit last), else ""."""

        def __init__(self, text: str, replaces: str = "") -> None:
            self.text = text
            self.replaces = replaces
            super().__init__()

    def __init__(self, *, history: list[str] | None = None, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)  # type: ignore[arg-type]
        self.prompt_history = history if history is not None else load_history()
        # Where Up/Down stand in history: None is the draft, below the newest entry.
        self._history_index: int | None = None
        # What the box held at each place walked away from (the draft at len(history), edits
        # to recalled entries at theirs): walking back shows it again instead of losing it.
        self._walked_away: dict[int, str] = {}
        # Prompts sent while an answer or a command runs, oldest first; the app sends them.
        self.held: list[str] = []
        # The exchange whose prompt the box holds for editing (/edit last): sending replaces it.
        self.editing_last = ""

    def _suggestions(self) -> CommandSuggestions | None:
        found = self.screen.query(CommandSuggestions)
        return found.first() if found else None

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self.editing_last and not self.text.strip():
            self.edit_last("", "")  # cleared: the last exchange is kept
        suggestions = self._suggestions()
        if suggestions is not None:
            suggestions.show_for(self.text)

    def _complete(self, suggestions: CommandSuggestions) -> bool:
        """Replace the typed name (or argument) with the chosen entry; False when there is nothing to complete."""
        completed = suggestions.completion()
        if completed is None:
            return False
        self.text = completed
        self.move_cursor(self.document.end)
        return True

    def action_submit(self) -> None:
        """Send the text, unless it is blank; on a partial command name, complete it first."""
        text = self.text
        suggestions = self._suggestions()
        typed = partial_command(text.strip())
        from ocat.commands import REGISTRY  # noqa: PLC0415 - commands load after the first frame

        if suggestions is not None and typed is not None and typed not in REGISTRY and self._complete(suggestions):
            return
        if suggestions is not None and suggestions.enter_completes(text) and self._complete(suggestions):
            return  # a value listed for the argument (/model NAME, /vdoc PATH)
        if text.strip():
            if not self.prompt_history or self.prompt_history[-1] != text:
                self.prompt_history.append(text)
                append_history(text)
            self._history_index = None
            self._walked_away.clear()
            replaces = self.editing_last
            self.edit_last("", "")
            # Emptied here, in typing order, not by whoever handles Submitted: keys typed after
            # this Enter may already wait in this box's queue, and belong to the next prompt.
            self.text = ""
            self.post_message(self.Submitted(text, replaces))

    def action_to_messages(self) -> None:
        """Focus the conversation's latest message (ocat.ui.message_focus): Up steps back from there."""
        shown = messages_of(self)
        if shown:
            shown[-1].focus()
            shown[-1].scroll_visible(animate=False)

    def action_newline(self) -> None:
        """Insert a line break where the cursor is."""
        self.insert("\n")

    def put_back(self, text: str) -> None:
        """Put back a prompt that got no answer, ready to retry, the cursor at its end.

        Held prompts come back with it, after it, and are not sent: the next prompt usually
        builds on the answer that failed, and a failing model would fail it too. Whatever the
        box holds stays too, last; nothing typed is dropped.
        """
        parts = [part for part in (text, *self.held, self.text) if part.strip()]
        self.held.clear()
        self.border_subtitle = ""
        self._history_index = None
        self._walked_away.clear()
        self.text = "\n\n".join(parts)
        self.move_cursor(self.document.end)

    def edit_last(self, prompt: str, exchange_id: str) -> None:
        """Hold `prompt`, the last exchange's, for editing: sending it replaces that exchange
        (the box's title says so). An empty `exchange_id` ends the editing, leaving the text."""
        self.editing_last = exchange_id
        self.border_title = "editing the last prompt: Enter replaces its answer" if exchange_id else ""
        if prompt:
            self.text = "\n\n".join(part for part in (prompt, self.text) if part.strip())
            self.move_cursor(self.document.end)

    def edit_in_editor(self) -> str:
        """Open the box's text in $VISUAL / $EDITOR (ocat.editor); what is saved comes back in
        the box, to send with Enter. A failed editor leaves the box as it was: returns why ("": it worked)."""
        edited, problem = in_editor(self.app, lambda: edit_text(self.text))
        if edited is not None:
            self.text = edited
            self.move_cursor(self.document.end)
        self.focus()
        return problem

    def hold(self, text: str) -> None:
        """Keep a prompt sent while the app is busy, after any already waiting."""
        self.held.append(text)
        self.border_subtitle = f"{len(self.held)} queued"

    def next_held(self) -> str | None:
        """Take the oldest held prompt out of the queue, or None when none waits."""
        text = self.held.pop(0) if self.held else None
        self.border_subtitle = f"{len(self.held)} queued" if self.held else ""
        return text

    def _own_action(self, key: str) -> str | None:
        """The action this box's bindings (TextArea's included) give `key`, as remapped by `keys.*`."""
        # active_bindings is the footer's own view: keymap applied, the focused widget first.
        active = self.screen.active_bindings.get(key)
        if active is None or active.node is not self or not active.enabled:
            return None
        return active.binding.action

    async def _on_key(self, event: events.Key) -> None:
        # This runs in the box's own queue, where Key events arrive in the order they were
        # typed: each key acts on exactly the text typed before it, even when a whole burst was
        # read at once (typing ahead, `tmux send-keys`, a laggy SSH link).
        key = event.key
        suggestions = self._suggestions()
        if suggestions is not None:
            # The list follows the text through TextArea.Changed, which is queued behind the
            # rest of a burst: bring it up to date before Enter, Tab or an arrow reads it.
            suggestions.show_for(self.text)
        if key == "ctrl+d" and not self.text:
            self._handled(event)
            self.app.exit(0)  # as in a shell: Ctrl+D on an empty line leaves
        elif suggestions is not None and suggestions.display and key in ("up", "down", "tab", "escape"):
            self._handled(event)
            if key == "tab":
                self._complete(suggestions)
            elif key == "escape":
                suggestions.display = False
            else:
                suggestions.action_cursor_up() if key == "up" else suggestions.action_cursor_down()
        elif key in ("tab", "shift+tab"):
            # Never a move of focus away from the prompt (what is typed next would go elsewhere):
            # Tab completes what can be completed, else says what it is for.
            self._handled(event)
            if key == "shift+tab" or suggestions is None or not self._complete(suggestions):
                self.app.notify(TAB_HINT, timeout=6)
        elif key in ("pageup", "pagedown"):
            # The conversation scrolls, the prompt keeps focus (a long result at 80x24).
            self._handled(event)
            await self.run_action(f"app.scroll_conversation('{'up' if key == 'pageup' else 'down'}')")
        elif key == "up" and self.prompt_history and self.navigator.is_first_wrapped_line(self.cursor_location):
            self._handled(event)
            self._walk_history(-1)
        elif key == "down" and self._history_index is not None and self.navigator.is_last_wrapped_line(
                self.cursor_location):
            self._handled(event)
            self._walk_history(1)
        elif not event.is_printable and (action := self._own_action(key)) is not None:
            # Send, newline, and TextArea's own keys (arrows, Backspace...) run here too, in
            # order; left to bubble, a binding runs at the App, after keys typed later.
            self._handled(event)
            await self.run_action(action)

    @staticmethod
    def _handled(event: events.Key) -> None:
        """Nothing else acts on this key: not TextArea (Enter would insert a line break), and not
        the App, where it would bubble to and run a binding a second time, out of order."""
        event.prevent_default()
        event.stop()

    def _walk_history(self, step: int) -> None:
        """Show the history entry `step` away (past the newest: the draft), cursor at its end."""
        newest = len(self.prompt_history)
        here = newest if self._history_index is None else self._history_index
        there = max(0, min(newest, here + step))
        if there == here:
            return
        self._walked_away[here] = self.text
        self._history_index = None if there == newest else there
        original = "" if there == newest else self.prompt_history[there]
        self.text = self._walked_away.pop(there, original)
        self.move_cursor(self.document.end)


class UserMessage(MessageKeys, Static, can_focus=True):
    """What the user sent, as literal text; focused, it forks there (ocat.ui.message_focus)."""

    BINDINGS = MESSAGE_BINDINGS

    def __init__(self, text: str, exchange_id: str = "") -> None:
        super().__init__(plain(text), classes="message user")
        self.exchange_id = exchange_id


class NoticeMessage(Static):
    """A line from ocat itself: errors, cancellations, memory state."""

    def __init__(self, text: str, *, error: bool = False) -> None:
        # Indented lines (a listing's items, /tools') stay indented when they wrap, at any width;
        # a notice without one is laid out as any text.
        indented = any(line[:1] in (" ", "\t") for line in text.split("\n"))
        super().__init__(Hanging(text) if indented else plain(text), classes="notice error" if error else "notice")

    def render(self) -> RenderResult:
        """What it says, as given (its text whole: `str()` of it), laid out at render time."""
        return self.content


class TaskProgress(Horizontal):
    """A long command's progress: what it is doing, a bar, and how to stop it."""

    def __init__(self, *, hint: str = "Esc stops") -> None:
        super().__init__(classes="task-progress")
        self.hint = hint

    def compose(self):  # noqa: ANN201 - ComposeResult
        yield Static("", classes="task-label")
        yield ProgressBar(show_eta=False)

    def show(self, label: str, done: int, total: int) -> None:
        """Move the bar to `done` of `total`."""
        self.query_one(".task-label", Static).update(plain(f"{label}  ({self.hint})"))
        self.query_one(ProgressBar).update(total=max(total, 1), progress=done)


def memory_indicator(memories: list[SearchHit], mode: str) -> Static | Collapsible | None:
    """What the user is shown of the memories given to the model (display.context_mode)."""
    if mode == "off" or not memories:
        return None
    from ocat.operations.search import used_memories  # noqa: PLC0415 - loads after the first frame

    title, words = used_memories(memories)
    if mode == "summary":
        return Static(plain(title), classes="memory")
    lines = [f"{line.heading()}\n{hit.excerpt(200)}" for hit, line in zip(memories, words)]
    return Collapsible(Static(plain("\n\n".join(lines))), title=title, collapsed=False, classes="memory")


def wake_indicator(block: WakeBlock) -> Static:
    """One line on what the model was given as this thread started (`/showcontext on`; `/wake` shows it whole)."""
    return Static(plain(f"Wake block for this thread: {block.summary()} ({block.tokens} tokens; /wake shows it)"),
                  classes="memory")


def command_view(result: CommandResult) -> Vertical:
    """A command's result: its message and, if any, a table and a memory's text as Markdown."""
    from textual.widgets import DataTable, Markdown  # noqa: PLC0415 - after the first frame: a command's table and text

    parts: list[Static | DataTable[str] | DataTable[Text] | Markdown] = []
    if result.text:
        parts.append(NoticeMessage(result.text, error=result.error))
    if result.rows and result.fit_column is not None:
        from ocat.ui.fitted_table import FittedTable  # noqa: PLC0415 - DataTable loads with the first table

        parts.append(FittedTable(result.columns, result.rows, result.fit_column, wrap=result.fit_wraps,
                                 show_cursor=False, zebra_stripes=True, classes="result-table"))
    elif result.rows:
        table: DataTable[str] = DataTable(show_cursor=False, zebra_stripes=True, classes="result-table")
        table.add_columns(*result.columns)
        table.add_rows([tuple(plain(cell) for cell in row) for row in result.rows])  # type: ignore[misc]
        parts.append(table)
    if result.markdown:
        # Rendered like an answer (Markdown, never Rich markup), terminal controls shown as escapes.
        parts.append(Markdown(printable(result.markdown), classes="result-markdown"))
    return Vertical(*parts, classes="command-result")
