"""Untrusted text for the screen: plain (never Rich markup), with terminal controls shown, not obeyed."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from ocat.text.terminal import hanging, printable


def plain(text: str, **style: object) -> Text:
    """Untrusted text (prompts, answers, memories) for the screen: never markup, never a terminal control."""
    return Text(printable(text), **style)  # type: ignore[arg-type]


class Hanging:
    """Untrusted plain text whose indented lines stay indented when they wrap, at whatever width
    the screen gives it (`/tools`' lines ran back to column 1): ocat.text.terminal.hanging, at
    render time; the text itself is kept whole (`str()`), as written."""

    def __init__(self, text: str) -> None:
        self.text = printable(text)

    def __str__(self) -> str:
        return self.text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(hanging(self.text, options.max_width, cell_len))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, Text(self.text))
