"""ocat's slash commands in Textual's command palette (Ctrl+P), read from the one registry.

Choosing a command that takes arguments puts `/name ` in the prompt box for the user to
finish; one that takes none is sent as if typed, so it runs (or waits its turn) the same way.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from ocat.ui.widgets import PromptInput

if TYPE_CHECKING:
    from ocat.commands import Command


class SlashCommands(Provider):
    """Every slash command with its help line; the chosen one goes to the prompt box."""

    def _prompt_box(self) -> PromptInput | None:
        found = self.app.query(PromptInput)  # the chat screen's box, whichever screen is on top
        return found.first() if found else None

    def _choose(self, entry: Command) -> None:
        box = self._prompt_box()
        if box is None:
            return
        if entry.arguments:
            box.text = f"/{entry.name} "
            box.move_cursor(box.document.end)
            box.focus()
        else:
            box.text = f"/{entry.name}"
            box.action_submit()  # as if typed and sent: history, queueing and all

    @staticmethod
    def _label(entry: Command) -> str:
        return entry.usage

    async def discover(self) -> Hits:
        from ocat.commands import commands  # noqa: PLC0415 - commands load after the first frame

        for entry in commands():
            yield DiscoveryHit(self._label(entry), partial(self._choose, entry), help=entry.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query.lstrip("/"))
        from ocat.commands import commands  # noqa: PLC0415 - commands load after the first frame

        for entry in commands():
            # Aliases match too (/resume finds /continue); the best of them ranks the entry.
            names = [entry.usage, *(f"/{alias}" for alias in entry.aliases)]
            score = max(matcher.match(name) for name in names)
            if score > 0:
                label = self._label(entry)
                yield Hit(score, matcher.highlight(label), partial(self._choose, entry), text=label, help=entry.help)
