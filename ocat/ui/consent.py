"""Asking the user, in the full-screen chat, whether the model may call an MCP server's tool:
a dialog that shows the server, the tool and its arguments (pretty JSON, every control
character escaped), answered with y (once), a (always) or n / Esc (no).

The question comes from the turn's tool thread; the dialog lives on the app's loop, and the
thread waits for its answer (a closing app answers no, so no thread waits forever).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ocat.mcp_client.consent import Answer, Ask, ConsentRequest
from ocat.text.terminal import printable
from ocat.ui.widgets import plain

if TYPE_CHECKING:
    from textual.app import App


class ConsentDialog(ModalScreen[str]):
    """Allow this call? y once, a always, n no; No is focused, so a stray Enter runs nothing."""

    DEFAULT_CSS = """
    ConsentDialog {
        align: center middle;
    }
    ConsentDialog > Vertical {
        width: 90%;
        max-width: 100;
        height: auto;
        max-height: 90%;
        border: round $warning;
        background: $surface;
        padding: 1 2;
    }
    ConsentDialog VerticalScroll {
        height: auto;
        max-height: 16;
        background: $boost;
        padding: 0 1;
        margin: 1 0 0 0;
    }
    ConsentDialog Horizontal {
        height: auto;
        align: right middle;
        padding: 1 0 0 0;
    }
    ConsentDialog Button {
        margin: 0 0 0 2;
    }
    """
    BINDINGS = [
        Binding("y", "answer('y')", "Yes, once", id="consent.once"),
        Binding("a", "answer('a')", "Always", id="consent.always"),
        Binding("escape,n", "answer('n')", "No", id="consent.no"),
    ]

    def __init__(self, request: ConsentRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(plain(f"The model wants to call {printable(self.request.tool)} "
                               f"on the MCP server {printable(self.request.server)}."), id="consent-question")
            with VerticalScroll():
                yield Static(plain(self.request.arguments_text()), id="consent-arguments")
            with Horizontal():
                yield Button("Yes, once (y)", id="y", variant="success")
                yield Button("Always (a)", id="a", variant="warning")
                yield Button("No (n)", id="n", variant="primary")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Allow this tool call?"
        self.query_one("#n", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id or "n")

    def action_answer(self, letter: str) -> None:
        """Answer from the keyboard."""
        self.dismiss(letter)


def consent_asker(app: App[Any]) -> Ask:
    """An `Ask` for `app`: called from a worker thread, it shows the dialog and waits for it."""

    def ask(request: ConsentRequest) -> Answer | None:
        answered = threading.Event()
        answer: list[Answer | None] = [None]

        def dismissed(letter: str | None) -> None:
            answer[0] = Answer.from_letter(letter or "n")
            answered.set()

        dialog = ConsentDialog(request)
        try:
            app.call_from_thread(app.push_screen, dialog, dismissed)
        except RuntimeError:  # the app is gone: nobody to ask
            return Answer.NO
        while not answered.wait(0.2):
            if not app.is_running:
                return Answer.NO
            if request.abandoned.is_set():  # the turn was cancelled (Ctrl+C): the question goes too
                try:
                    app.call_from_thread(dialog.dismiss, "n")
                except RuntimeError:
                    pass
                return Answer.NO
        return answer[0]

    return ask
