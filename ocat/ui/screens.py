"""Dialogs over the chat: pick one of several choices (a thread to continue), confirm a deletion.

Both are modal screens that dismiss with the user's answer; the app decides what to run.
Labels come from stored prompts, so they are shown as plain Text, never as markup.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from ocat.ui.widgets import plain


class ChoicePicker(ModalScreen[str | None]):
    """A list to pick from: Enter or a click picks, Esc closes with None."""

    DEFAULT_CSS = """
    ChoicePicker {
        align: center middle;
    }
    ChoicePicker > Vertical {
        width: 90%;
        max-width: 110;
        height: auto;
        max-height: 80%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ChoicePicker .title {
        padding: 0 0 1 0;
        color: $text-muted;
    }
    ChoicePicker OptionList {
        height: auto;
        max-height: 20;
        border: none;
    }
    """
    BINDINGS = [Binding("escape", "dismiss_none", "Close", id="picker.close")]

    def __init__(self, title: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(plain(self.title_text), classes="title")
            yield OptionList(*(Option(plain(label), id=value) for value, label in self.choices))

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        """Close without picking."""
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question; No is focused, so an absent-minded Enter does not delete."""

    DEFAULT_CSS = """
    ConfirmDialog {
        align: center middle;
    }
    ConfirmDialog > Vertical {
        width: 70;
        height: auto;
        border: round $error;
        background: $surface;
        padding: 1 2;
    }
    ConfirmDialog Horizontal {
        height: auto;
        align: right middle;
        padding: 1 0 0 0;
    }
    ConfirmDialog Button {
        margin: 0 0 0 2;
    }
    """
    BINDINGS = [
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
    ]

    def __init__(self, question: str, *, yes: str = "Delete") -> None:
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(plain(self.question))
            with Horizontal():
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("Keep it (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        """Answer from the keyboard."""
        self.dismiss(yes)
