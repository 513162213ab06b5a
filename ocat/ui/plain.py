"""Untrusted text for the screen: plain (never Rich markup), with terminal controls shown, not obeyed."""

from __future__ import annotations

from rich.text import Text

from ocat.text.terminal import printable


def plain(text: str, **style: object) -> Text:
    """Untrusted text (prompts, answers, memories) for the screen: never markup, never a terminal control."""
    return Text(printable(text), **style)  # type: ignore[arg-type]
