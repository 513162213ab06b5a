"""The memory browser: a screen of its own to see, search and manage everything in memory.

A list of threads, exchanges, notes and documents (newest first, or best first while a search
is typed), filtered by kind, date, source and project; a preview of the highlighted entry, whole; and
actions on it: open a thread (continue it), delete (several at once, after a confirmation),
export a thread as Markdown, copy, unlink a memory from a newer version (the preview shows its
versions). What it reads and changes is ocat.operations.browse; this module only draws and
runs those operations in threads, so the window never waits for the store.

Opened with `/memory [QUERY]` or a key (`keys.memory`, Ctrl+R). It dismisses with the thread
to continue, or None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Markdown, Static

from ocat.operations.browse import (
    browse,
    delete_entries,
    described,
    Entry,
    entry_markdown,
    export_entry,
    Filters,
    KIND_WORDS,
    search_entries,
    unlink_entry,
)
from ocat.text.terminal import count_of, printable, shorten
from ocat.ui.widgets import plain
from ocat.config.locations import display_path
from ocat.logs import failure_text
from ocat.operations.search import marked_score
from ocat.ui.screens import ConfirmDialog

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.operations.browse import Deleted
    from ocat.chat.session import ChatSession

_T = TypeVar("_T")

# How long typing must pause before the search runs (each key would otherwise start one).
SEARCH_PAUSE = 0.3
# The most of an entry's text the preview renders (a whole book would take seconds to lay out);
# copying and exporting always take the whole text.
PREVIEW_CHARS = 12_000
# From this width the preview sits beside the list; narrower, below it.
SIDE_BY_SIDE = 120


class EntryList(DataTable[Text]):
    """The browser's list: one row per entry, keyed by its position in the screen's entries."""

    BINDINGS = [
        Binding("space", "screen.toggle_mark", "Mark", id="browser.mark"),
        Binding("d,delete", "screen.delete", "Delete", id="browser.delete"),
        Binding("e", "screen.export", "Export", id="browser.export"),
        Binding("c", "screen.copy", "Copy", id="browser.copy"),
        Binding("u", "screen.unlink", "Unlink", id="browser.unlink"),
        Binding("slash", "screen.focus_search", "Search", id="browser.search"),
    ]


class MemoryBrowser(Screen[str | None]):
    """Everything in memory, searchable, with a preview and actions."""

    DEFAULT_CSS = """
    MemoryBrowser #browser-title { height: 1; background: $panel; color: $text; padding: 0 1; }
    MemoryBrowser #browser-search { margin: 0 1; }
    MemoryBrowser #browser-filters { height: 1; padding: 0 1; color: $text-muted; }
    MemoryBrowser #browser-body { layout: horizontal; height: 1fr; }
    MemoryBrowser.-narrow #browser-body { layout: vertical; }
    MemoryBrowser EntryList { width: 3fr; height: 1fr; }
    MemoryBrowser #browser-preview { width: 2fr; height: 1fr; border-left: tall $panel; padding: 0 1; }
    MemoryBrowser.-narrow EntryList { width: 1fr; }
    MemoryBrowser.-narrow #browser-preview { width: 1fr; border-left: none; border-top: tall $panel; }
    MemoryBrowser #browser-empty { padding: 1 2; color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="browser.close"),
        Binding("f2", "step('kind')", "Kind", id="browser.kind"),
        Binding("f3", "step('period')", "Date", id="browser.period"),
        Binding("f4", "step('source')", "Source", id="browser.source"),
        Binding("f5", "step('project')", "Project", id="browser.project"),
    ]

    class ThreadsDeleted(Message):
        """Whole threads were deleted: the chat starts a new thread if it was on one of them."""

        def __init__(self, threads: tuple[str, ...]) -> None:
            self.threads = threads
            super().__init__()

    def __init__(self, session: ChatSession, query: str = "") -> None:
        super().__init__()
        self.session = session
        self.first_query = query
        self.filters = Filters(here=session.project)
        self.entries: list[Entry] = []
        # Keys of the marked entries: delete acts on them all (else on the highlighted one).
        self.marked: set[str] = set()
        self.searching = False
        # Each listing has a number; a slower, older one that finishes late is dropped.
        self._generation = 0
        self._pending: Timer | None = None
        self._note = ""

    def compose(self) -> ComposeResult:
        yield Static(plain(self._title()), id="browser-title")
        yield Input(self.first_query, placeholder="Search memory (empty: the newest first)", id="browser-search")
        yield Static("", id="browser-filters")
        with Container(id="browser-body"):
            yield EntryList(id="browser-list", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="browser-preview"):
                yield Markdown("", id="browser-text")
        yield Footer()

    def on_mount(self) -> None:
        self._fit(self.size.width)
        if self.session.session_memory.store is None:
            reason = self.session.session_memory.error or "memory is still loading"
            self._note = f"Memory is off: {reason}."
            self._show_filters()
            self.query_one(EntryList).display = False
            self.query_one("#browser-preview").display = False
            self.query_one("#browser-body", Container).mount(
                Static(plain(f"{self._note} Nothing to browse until it opens."), id="browser-empty"))
            return
        self.query_one("#browser-search", Input).focus()
        self.reload()

    def on_resize(self) -> None:
        self._fit(self.size.width)
        self._fill_list()  # titles are cut to the list's new width

    def _fit(self, width: int) -> None:
        self.set_class(width < SIDE_BY_SIDE, "-narrow")

    def _title(self) -> str:
        store = self.session.session_memory.store
        where = f" · {store.name} store" if store is not None and store.name != "default" else ""
        return f"Memory{where}: Enter opens a thread, Space marks, Esc goes back to the chat"

    # -- listing ---------------------------------------------------------------------

    @on(Input.Changed, "#browser-search")
    def _typed(self) -> None:
        if self._pending is not None:
            self._pending.stop()
        self._pending = self.set_timer(SEARCH_PAUSE, self.reload)

    @on(Input.Submitted, "#browser-search")
    def _search_now(self) -> None:
        if self._pending is not None:
            self._pending.stop()
        self.reload()
        self.query_one(EntryList).focus()

    def reload(self) -> None:
        """List again for the search box and the filters (in a thread; the newest listing wins)."""
        if self.session.session_memory.store is None:
            return
        self._generation += 1
        self._list(self._generation, self.query_one("#browser-search", Input).value.strip(), self.filters)

    @work(thread=True, group="browser-list")
    def _list(self, generation: int, query: str, filters: Filters) -> None:
        store = self.session.session_memory.store
        if store is None:
            return
        note = ""
        try:
            if query and self.session.session_memory.model_available():
                entries = search_entries(store, query, filters, self.session.settings.vector_store)
            else:
                if query:
                    note = "search waits for the embedding model; the newest are listed"
                entries = browse(store, filters)
        except Exception as exc:  # a store that fails is said here; the chat behind stays as it was
            self.app.call_from_thread(self._listed, generation, [], failure_text("listing memory", exc), False)
            return
        self.app.call_from_thread(self._listed, generation, entries, note, bool(query) and not note)

    def _listed(self, generation: int, entries: list[Entry], note: str, searching: bool) -> None:
        if generation != self._generation:
            return  # an older listing, overtaken while it read
        self.entries = entries
        self.searching = searching
        self._note = note
        keys = {e.key for e in entries}
        self.marked &= keys
        self._fill_list()
        self._show_filters()
        self._preview()

    def _fill_list(self) -> None:
        table = self.query_one(EntryList)
        row = table.cursor_row
        table.clear(columns=True)
        table.add_column(" ", width=1, key="mark")
        table.add_column("kind", width=8, key="kind")
        table.add_column("date", width=10, key="date")
        if self.searching:
            table.add_column("score", width=5, key="score")
        fixed = 1 + 8 + 10 + (5 if self.searching else 0)
        # Each column takes its width plus two cells of padding; the scrollbar takes two.
        room = max(12, table.size.width - fixed - 2 * (5 if self.searching else 4) - 2)
        table.add_column("title", width=room, key="title")
        for index, entry in enumerate(self.entries):
            cells = ["●" if entry.key in self.marked else "", entry.kind, entry.date[:10]]
            if self.searching:
                cells.append(_score(entry))
            cells.append(_titled(entry, room))
            table.add_row(*(plain(c) for c in cells), key=str(index))
        if self.entries:
            table.move_cursor(row=min(max(row, 0), len(self.entries) - 1))

    def _show_filters(self) -> None:
        shown = count_of(len(self.entries), "entry", "entries")
        marked = f", {len(self.marked)} marked" if self.marked else ""
        note = f" · {self._note}" if self._note else ""
        kind, period, source = KIND_WORDS[self.filters.kind], self.filters.period, self.filters.source
        line = f"F2 {kind} · F3 {period} · F4 {source} · F5 {self.filters.project}"
        self.query_one("#browser-filters", Static).update(plain(f"{line} · {shown}{marked}{note}"))

    # -- the preview -------------------------------------------------------------------

    def _current(self) -> Entry | None:
        table = self.query_one(EntryList)
        if not self.entries or not 0 <= table.cursor_row < len(self.entries):
            return None
        return self.entries[table.cursor_row]

    @on(DataTable.RowHighlighted, "#browser-list")
    def _highlighted(self) -> None:
        self._preview()

    def _preview(self) -> None:
        entry = self._current()
        if entry is None:
            self.query_one("#browser-text", Markdown).update(
                "Nothing here yet." if not self.searching else "Nothing found: try other words, or F2 F3 F4.")
            return
        self._read_preview(entry)

    @work(thread=True, exclusive=True, group="browser-preview")
    def _read_preview(self, entry: Entry) -> None:
        store = self.session.session_memory.store
        if store is None:
            return
        try:
            text = entry_markdown(store, entry)
        except Exception as exc:  # deleted meanwhile by another process, or the store failed
            text = f"Cannot show this entry: {exc}"
        if len(text) > PREVIEW_CHARS:
            text = text[:PREVIEW_CHARS] + "\n\n*… the rest is not shown here: c copies it whole.*"
        # Textual's stubs cannot type an async callback's None result ("Awaitable[Never]").
        self.app.call_from_thread(self._show_preview, entry, printable(text))  # type: ignore[arg-type]

    async def _show_preview(self, entry: Entry, text: str) -> None:
        if entry is not self._current():
            return  # the cursor moved on while it read
        await self.query_one("#browser-text", Markdown).update(text)
        self.query_one("#browser-preview", VerticalScroll).scroll_home(animate=False)

    # -- actions -------------------------------------------------------------------------

    def action_close(self) -> None:
        """Back to the chat."""
        self.dismiss(None)

    def action_focus_search(self) -> None:
        """Type a search."""
        self.query_one("#browser-search", Input).focus()

    def action_step(self, which: str) -> None:
        """Move one filter (kind, period, source or project) on to its next value and list again."""
        self.filters = self.filters.stepped(which)
        self.reload()

    @on(DataTable.RowSelected, "#browser-list")
    def _open(self) -> None:
        entry = self._current()
        if entry is None:
            return
        if entry.opens_thread:
            self.dismiss(entry.opens_thread)
        else:
            self.query_one("#browser-preview", VerticalScroll).focus()  # a note or document: read it

    def action_toggle_mark(self) -> None:
        """Mark the highlighted entry (or unmark it), then go to the next one."""
        entry = self._current()
        if entry is None:
            return
        self.marked ^= {entry.key}
        table = self.query_one(EntryList)
        table.update_cell(str(self.entries.index(entry)), "mark", plain("●" if entry.key in self.marked else ""))
        table.action_cursor_down()
        self._show_filters()

    def action_delete(self) -> None:
        """Delete the marked entries (or the highlighted one), after a confirmation."""
        chosen = [e for e in self.entries if e.key in self.marked] or [e for e in [self._current()] if e]
        if not chosen:
            return
        question = "This deletes " + described(chosen) + " from memory, for good."

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(chosen)

        self.app.push_screen(ConfirmDialog(question), answered)

    def _delete(self, chosen: list[Entry]) -> None:
        def done(deleted: Deleted) -> None:
            self.marked.clear()
            self.notify(deleted.sentence())
            if deleted.threads:
                self.app.post_message(self.ThreadsDeleted(deleted.threads))
            self.reload()

        self._change("deleting", lambda store: delete_entries(store, chosen), done)

    def action_export(self) -> None:
        """Write the highlighted thread (or an exchange's thread) as Markdown into the current folder."""
        entry = self._current()
        if entry is not None:
            self._change("exporting", lambda store: export_entry(store, entry), lambda written: self.notify(
                f"Wrote {count_of(written[1], 'exchange')} to {display_path(str(written[0]))}."))

    def action_unlink(self) -> None:
        """Undo the highlighted memory's link to a newer version (a wrong "updated by"); the preview shows it."""
        entry = self._current()
        if entry is not None:
            self._change("unlinking", lambda store: unlink_entry(store, entry), self._unlinked)

    def _unlinked(self, said: str) -> None:
        self.notify(said)
        self._preview()

    def action_copy(self) -> None:
        """Copy the highlighted entry's whole text (Markdown) to the clipboard."""
        entry = self._current()
        if entry is None:
            return

        def copied(text: str) -> None:
            self.app.copy_to_clipboard(text)
            self.notify(f"Copied the {entry.kind} ({count_of(len(text), 'character')}).")

        self._change("copying", lambda store: entry_markdown(store, entry), copied)

    @work(thread=True, group="browser-change")
    def _change(self, what: str, operation: Callable[[MemoryStore], _T], done: Callable[[_T], None]) -> None:
        """Run `operation` on the store in a thread, then `done` with its result on the screen;
        a failure is a notification (the browser and the chat behind it stay as they were)."""
        store = self.session.session_memory.store
        if store is None:
            return
        try:
            result = operation(store)
        except Exception as exc:
            self.app.call_from_thread(self.notify, failure_text(what, exc), severity="error")
            return
        self.app.call_from_thread(done, result)


def _score(entry: Entry) -> str:
    return "" if entry.score is None else marked_score(entry.score, entry.admitted)


def _titled(entry: Entry, width: int) -> str:
    """The list's title cell, cut to `width`: a thread's title with its size, a document's name
    with its size (the size is never the part cut)."""
    size = {"thread": "exchange", "document": "chunk"}.get(entry.kind)
    suffix = f" ({count_of(entry.size, size)})" if size else ""
    title = printable(" ".join(entry.title.split()))
    return shorten(title, max(width - len(suffix), 8)) + suffix
