"""The baseline for bench/startup.py: a Textual app that only shows one line."""

from textual.app import App, ComposeResult
from textual.widgets import Static


class BareApp(App[None]):
    """One line of text, nothing else."""

    def compose(self) -> ComposeResult:
        yield Static("bare textual app ready")


if __name__ == "__main__":
    BareApp().run()
