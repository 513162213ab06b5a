"""Handing the terminal to the user's editor ($VISUAL, $EDITOR) and taking it back (/edit, Ctrl+G, /profile)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar
from textual.app import SuspendNotSupported

from ocat.logs import failure_text

if TYPE_CHECKING:
    from textual.app import App

T = TypeVar("T")


def in_editor(app: App[Any], step: Callable[[], T]) -> tuple[T | None, str]:
    """Run `step` (which runs the editor): its result, or None and why it failed. The terminal
    is the editor's meanwhile (App.suspend); a driver that cannot hand it over (headless, the
    web) runs the editor as it is, which suits a GUI editor (`code --wait`)."""
    def edit() -> tuple[T | None, str]:
        # Nothing may leave App.suspend() by an exception: it would not resume the screen.
        try:
            return step(), ""
        except Exception as exc:
            return None, failure_text("the editor", exc)

    try:
        with app.suspend():
            return edit()
    except SuspendNotSupported:
        return edit()
