"""The window's themes: the shipped and the user's registered at start, and /theme's list and switch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from textual.theme import Theme

from ocat.config.themes import load_themes
from ocat.errors import OcatError
from ocat.text.terminal import count_of
from ocat.choices import save_choice

if TYPE_CHECKING:
    from textual.app import App


class Themes:
    """The app's themes, and the theme files that could not be loaded (for /theme to list)."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app
        self.problems: list[str] = []

    def load(self, wanted: str) -> None:
        """Register shipped and user themes, then apply `wanted` (display.theme; a bad one is reported)."""
        app = self._app
        specs, problems = load_themes()
        self.problems = problems  # /theme lists them too: a toast goes away
        for spec in specs:
            app.register_theme(Theme(**spec))
        for problem in problems:
            app.notify(problem, severity="warning", timeout=10)
        if wanted in app.available_themes:
            app.theme = wanted
        else:
            app.notify(f"unknown theme {wanted!r} (display.theme); using textual-dark", severity="warning")
            app.theme = "textual-dark"

    def switch(self, name: str) -> str:
        """List the themes (the current one marked, broken theme files after), or switch to one
        and keep it for the next runs (ocat.choices)."""
        app = self._app
        if not name:
            names = [f"{theme} (current)" if theme == app.theme else theme for theme in sorted(app.available_themes)]
            lines = ["Themes: " + ", ".join(names)]
            if self.problems:
                lines.append(f"Not loaded ({count_of(len(self.problems), 'broken theme file')}):")
                lines += [f"  {problem}" for problem in self.problems]
            return "\n".join(lines)
        if name not in app.available_themes:
            raise OcatError(f"no theme {name!r}; /theme lists them")
        app.theme = name
        save_choice("display.theme", name)
        return f"Theme: {name} (kept for next time)"
