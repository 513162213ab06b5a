"""Asking the user, in the full-screen chat, whether the model may call an MCP server's tool:
a dialog that shows the server, the tool and each argument (its name always in view, a long
value scrolling in a box of its own, every control character escaped), answered with y (once),
a (always) or n / Esc (no); the arguments scroll between the question and the buttons, so no
argument can push the buttons off screen.

Nothing typed ahead answers it. The question arrives while the user may be typing: a key only
counts as an answer once the dialog is armed, ARMING_DELAY after it was painted and after the
last key typed into it; until then the buttons are disabled, and what is typed (and pasted)
goes on into the prompt box beneath, in order, so nothing typed is lost.

The question comes from the turn's tool thread; the dialog lives on the app's loop, and the
thread waits for its answer (a closing app answers no, so no thread waits forever).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import ComposeResult
from textual.app import active_app
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ocat.mcp_client.consent import Answer, ConsentRequest
from ocat.text.terminal import count_of, printable
from ocat.ui.widgets import PromptInput, plain

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

# Seconds the dialog waits, after it is painted and after each key typed into it, before a key
# or a click answers it. A question that opens under a typing user would otherwise take the
# next letter ("a" of "about") as "Always": browsers guard their permission prompts the same
# way (Chromium ignores input for ~0.5 s after a prompt shows, Firefox delays its buttons by
# 1 s). Long enough for a typist to notice, short enough not to be felt by a reader.
ARMING_DELAY = 0.75
# Keys that edit the prompt box: typed while the dialog is not armed, they go on to the box.
_EDITING_KEYS = frozenset({"enter", "ctrl+j", "backspace", "delete", "left", "right", "home", "end"})


class ConsentDialog(ModalScreen[str]):
    """Allow this call? y once, a always, n no; No is focused once armed, so a stray Enter runs nothing."""

    DEFAULT_CSS = """
    ConsentDialog {
        align: center middle;
    }
    ConsentDialog > Vertical {
        width: 90%;
        max-width: 100;
        height: auto;
        max-height: 100%;
        border: round $warning;
        background: $surface;
        padding: 0 2;
    }
    ConsentDialog #consent-names {
        color: $text-muted;
    }
    ConsentDialog #consent-arguments {
        height: auto;
        background: $boost;
        padding: 0 1;
        margin: 1 0;
    }
    /* Taller than the screen: the box takes the screen's height, the arguments what the
       question and the buttons leave (ConsentDialog.fit), so the buttons are never pushed off. */
    ConsentDialog.-tall > Vertical {
        height: 100%;
    }
    ConsentDialog.-tall #consent-arguments {
        height: 1fr;
    }
    ConsentDialog .consent-name {
        text-style: bold;
    }
    ConsentDialog .consent-value {
        height: auto;
        max-height: 4;
        margin: 0 0 0 2;
    }
    ConsentDialog #consent-buttons {
        height: auto;
        align: right middle;
        padding: 0 0 1 0;
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
    # Focus is given by hand: nothing until armed (the buttons are disabled), then No.
    AUTO_FOCUS = None

    def __init__(self, request: ConsentRequest, *, arming_delay: float | None = None) -> None:
        """`arming_delay`: seconds before answers count (default ARMING_DELAY; tests pass a
        large one and call `arm` themselves, so no test waits on the clock)."""
        super().__init__()
        self.request = request
        self.arming_delay = ARMING_DELAY if arming_delay is None else arming_delay
        self.armed = False
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        rows = self.request.argument_rows()
        with Vertical():
            yield Static(plain(f"The model wants to call {printable(self.request.tool)} "
                               f"on the MCP server {printable(self.request.server)}."), id="consent-question")
            # Every name in view whatever the values' sizes: a second argument cannot hide below a long first.
            yield Static(plain(_names_line(rows)), id="consent-names")
            with VerticalScroll(id="consent-arguments"):
                for name, value in rows:
                    yield Static(plain(f"{name}  ({count_of(len(value), 'character')})" if len(value) > 200 else name),
                                 classes="consent-name")
                    with VerticalScroll(classes="consent-value"):
                        yield Static(plain(value))
            with Horizontal(id="consent-buttons"):
                yield Button("Yes, once (y)", id="y", variant="success")
                yield Button("Always (a)", id="a", variant="warning")
                yield Button("No (n)", id="n", variant="primary")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Allow this tool call?"
        self._show_armed(False)
        # The delay counts from the first frame that shows the question, not from its creation.
        self.call_after_refresh(self._restart_arming)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """Mark the dialog `-tall` when its natural height (all the arguments shown) passes the
        screen's: then the arguments scroll in what the question and the buttons leave."""
        box = self.query_one(Vertical)
        arguments = self.query_one("#consent-arguments", VerticalScroll)
        natural = box.outer_size.height - arguments.outer_size.height + arguments.virtual_size.height + 2
        self.set_class(natural > self.size.height, "-tall")

    def _restart_arming(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.arming_delay, self.arm)

    def arm(self) -> None:
        """From now on a key or a click answers (the timer calls this)."""
        self.armed = True
        self._show_armed(True)
        self.query_one("#n", Button).focus()

    def _disarm(self) -> None:
        """A key that is not an answer was typed: answers wait ARMING_DELAY again."""
        if self.armed:
            self.armed = False
            self._show_armed(False)
            self.set_focus(None)
        self._restart_arming()

    def _show_armed(self, armed: bool) -> None:
        for button in self.query(Button):
            button.disabled = not armed
        self.query_one(Vertical).border_subtitle = "" if armed else "typing goes to the prompt"

    def _answer_keys(self) -> set[str]:
        """The keys bound to an answer, as `keys.*` remap them."""
        return {key for key, active in self.active_bindings.items()
                if active.node is self and active.binding.action.startswith("answer")}

    def on_key(self, event: events.Key) -> None:
        # Runs before the bindings (they are checked once the key has bubbled to the App).
        key = event.key
        if self.armed and (key in self._answer_keys() or (key == "enter" and isinstance(self.focused, Button))):
            return  # an answer, given while the question was on screen and armed
        if event.is_printable or key in _EDITING_KEYS:
            event.stop()
            event.prevent_default()
            box = self._prompt_box()
            if box is not None:
                # Into the box's own queue, behind the keys typed before it: typing order is kept.
                box.post_message(events.Key(key, event.character))
            self._disarm()
        elif key in self._answer_keys():  # Esc typed ahead: it answers nothing
            event.stop()
            event.prevent_default()
            self._disarm()

    def on_paste(self, event: events.Paste) -> None:
        """A paste never answers: its text goes to the prompt box, after what was typed before it."""
        event.stop()
        event.prevent_default()
        box = self._prompt_box()
        if box is not None:
            box.call_later(box.insert, event.text)
        self._disarm()

    def _prompt_box(self) -> PromptInput | None:
        """The prompt box on the screen beneath (None: a host without one)."""
        for screen in reversed(self.app.screen_stack[:-1]):
            found = screen.query(PromptInput)
            if found:
                return found.first()
        return None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.armed:
            self.dismiss(event.button.id or "n")

    def action_answer(self, letter: str) -> None:
        """Answer from the keyboard (only once armed: on_key sends earlier keys to the prompt)."""
        if self.armed:
            self.dismiss(letter)


def _names_line(rows: list[tuple[str, str]]) -> str:
    if not rows:
        return "No arguments."
    return f"{count_of(len(rows), 'argument')}: " + ", ".join(name for name, _ in rows)


def ask_in_window(request: ConsentRequest) -> Answer | None:
    """The full-screen chat's `Ask`, given to the session when it is made: called from the turn's
    tool thread, it shows the dialog in the window the turn runs in and waits for it. Without a
    window (none is running in this context) nobody is asked, and the answer is no."""
    app = active_app.get(None)
    if app is None:
        return Answer.NO
    return _ask(app, request)


def _ask(app: App[Any], request: ConsentRequest) -> Answer | None:
    """Show the dialog for `request` in `app` and wait for its answer."""
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
