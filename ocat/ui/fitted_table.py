"""A command's table whose one wide column (/vquery's excerpt) takes the width the others leave,
cut with "…" (or wrapped onto more lines, where it must be read whole: /help's descriptions),
fitted again whenever the table's width changes. When that leaves it too narrow to read (a
80-column window), each row is stacked: its other cells on one line, the wide one under them, as
wide as the table."""

from __future__ import annotations

import textwrap
from typing import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable

from ocat.text.terminal import packed_columns, printable, shorten

# The fitted column never gets narrower than this: at such widths a few letters say more than none.
MIN_FIT_WIDTH = 12
# With less room than this for the fitted column, rows are stacked (an excerpt of 11
# characters said nothing: the /vquery table at 80 columns).
STACK_BELOW = 30
SEPARATOR = "  "


def _cut(text: str, width: int) -> str:
    """`text` cut to `width` cells (wide characters take two), ending in "…" when cut."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    cut = shorten(text, width)
    while cell_len(cut) > width and len(cut) > 1:
        cut = cut[:-2].rstrip() + "…"
    return cut


def _lines(text: str, width: int, wrap: bool) -> list[str]:
    """`text` wrapped to `width` cells (`wrap`), or cut to one line of them."""
    if not wrap:
        return [_cut(text, width)]
    return [_cut(line, width) for line in textwrap.wrap(text, max(1, width))] or [""]


def _padded(cells: Sequence[str], widths: Sequence[int]) -> str:
    """Cells side by side, each padded to its width, two spaces apart."""
    return SEPARATOR.join(cell + " " * (width - cell_len(cell)) for cell, width in zip(cells, widths)).rstrip()


class FittedTable(DataTable[Text]):
    """A DataTable of untrusted cells (shown as plain text, controls escaped) in which column
    `fit` is as wide as the table's width allows, its cells cut to that width with "…" (or, with
    `wrap`, wrapped onto as many lines as they take); or, when that is too narrow, each row stacked
    with the fitted cell under the others, as wide as the table."""

    def __init__(
        self, columns: Sequence[str], rows: Sequence[tuple[str, ...]], fit: int, *, wrap: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._wrap = wrap
        self._columns = tuple(columns)
        self._rows = [tuple(" ".join(printable(cell).split()) if i == fit else printable(cell)
                            for i, cell in enumerate(row)) for row in rows]
        self._fit = fit
        self._layout: tuple[bool, int] | None = None
        # The other columns are as wide as their widest cell, header included.
        self._widths = [max([cell_len(self._columns[i]), *(cell_len(row[i]) for row in self._rows)])
                        for i in range(len(self._columns))]

    def room(self, width: int) -> int:
        """How wide the fitted column can be, side by side with the others, in a table `width` cells wide."""
        padding = 2 * self.cell_padding
        others = sum(w + padding for i, w in enumerate(self._widths) if i != self._fit)
        return max(MIN_FIT_WIDTH, min(self._widths[self._fit], width - others - padding))

    @property
    def stacked(self) -> bool:
        """Whether rows are shown stacked (the fitted cell under the others) at the current width."""
        return self._layout is not None and self._layout[0]

    def on_resize(self, event: events.Resize) -> None:
        self.refit()

    def refit(self) -> None:
        """Fit the rows to the width now available (again only when it changed)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        room = self.room(width)
        stack = room < min(STACK_BELOW, self._widths[self._fit]) and self._fit > 0
        layout = (stack, width if stack else room)
        if layout == self._layout:
            return
        self._layout = layout
        self.clear(columns=True)
        if stack:
            self._stack(width)
        else:
            for i, label in enumerate(self._columns):
                self.add_column(label, width=room if i == self._fit else self._widths[i])
            for row in self._rows:
                fitted = _lines(row[self._fit], room, self._wrap)
                self.add_row(*(Text("\n".join(fitted) if i == self._fit else cell) for i, cell in enumerate(row)),
                             height=len(fitted))
        # The rows may bring a vertical scrollbar, which takes width: fit once more after the layout.
        self.call_after_refresh(self.refit)

    def _stack(self, width: int) -> None:
        """Two columns: the first cell, then the others on as few lines as hold them whole (a
        cell is never cut while it fits a line of its own) and the fitted cell under them."""
        inner = max(MIN_FIT_WIDTH, width - self._widths[0] - 4 * self.cell_padding)
        lines = packed_columns([i for i in range(1, len(self._columns)) if i != self._fit], self._widths, inner)

        def stacked(cells: Sequence[str]) -> str:
            return "\n".join(_cut(_padded([cells[i] for i in line], [self._widths[i] for i in line]), inner)
                             for line in lines)

        self.header_height = len(lines)
        self.add_column(self._columns[0], width=self._widths[0])
        self.add_column(Text(stacked(self._columns)), width=inner)
        for row in self._rows:
            fitted = _lines(row[self._fit], inner, self._wrap)
            self.add_row(Text(row[0]), Text("\n".join([stacked(row), *fitted])), height=len(lines) + len(fitted))
