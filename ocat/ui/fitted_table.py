"""A command's table whose one wide column (/vquery's excerpt) takes the width the others leave,
cut with "…", fitted again whenever the table's width changes."""

from __future__ import annotations

from typing import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable

from ocat.text import printable, shorten

# The fitted column never gets narrower than this: at such widths a few letters say more than none.
MIN_FIT_WIDTH = 12


def _cut(text: str, width: int) -> str:
    """`text` cut to `width` cells (wide characters take two), ending in "…" when cut."""
    if cell_len(text) <= width:
        return text
    cut = shorten(text, width)
    while cell_len(cut) > width and len(cut) > 1:
        cut = cut[:-2].rstrip() + "…"
    return cut


class FittedTable(DataTable[Text]):
    """A DataTable of untrusted cells (shown as plain text, controls escaped) in which column
    `fit` is as wide as the table's width allows, its cells cut to that width with "…"."""

    def __init__(self, columns: Sequence[str], rows: Sequence[tuple[str, ...]], fit: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._columns = tuple(columns)
        self._rows = [tuple(" ".join(printable(cell).split()) if i == fit else printable(cell)
                            for i, cell in enumerate(row)) for row in rows]
        self._fit = fit
        self._room: int | None = None
        # The other columns are as wide as their widest cell, header included.
        self._widths = [max([cell_len(self._columns[i]), *(cell_len(row[i]) for row in self._rows)])
                        for i in range(len(self._columns))]

    def room(self, width: int) -> int:
        """How wide the fitted column can be in a table `width` cells wide."""
        padding = 2 * self.cell_padding
        others = sum(w + padding for i, w in enumerate(self._widths) if i != self._fit)
        return max(MIN_FIT_WIDTH, min(self._widths[self._fit], width - others - padding))

    def on_resize(self, event: events.Resize) -> None:
        self.refit()

    def refit(self) -> None:
        """Fit the rows to the width now available (again only when it changed)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        room = self.room(width)
        if room == self._room:
            return
        self._room = room
        self.clear(columns=True)
        for i, label in enumerate(self._columns):
            self.add_column(label, width=room if i == self._fit else self._widths[i])
        self.add_rows([
            tuple(Text(_cut(cell, room) if i == self._fit else cell) for i, cell in enumerate(row))
            for row in self._rows
        ])
        # The rows may bring a vertical scrollbar, which takes width: fit once more after the layout.
        self.call_after_refresh(self.refit)
