"""The chat's memory, as the window shows it: loading it after the first frame, the model's
first download, the header's memory state, and giving the store up when the window closes.

`MemoryView` is a component the app owns (ocat.ui.app): a widget that is never displayed, so
that it can own the worker that opens memory and handle that worker's messages itself. It is
given what it uses (the session, the conversation pane); the app reads its `status`.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Callable
from textual.worker import get_current_worker

from textual import work
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from ocat.errors import Cancelled, OcatError
from ocat.config.locations import display_path
from ocat.text.terminal import count_of
from ocat.ui.widgets import NoticeMessage, TaskProgress, plain
from ocat import memory
from ocat.chat.consolidation import LinksChecked
from ocat.chat.outcomes import remembered_words, secrets_words
from ocat.logs import log_failure
from ocat.chat.memory_loading import load_memory, warm_memory
from ocat.chat.outcomes import MemoryLoaded
from ocat.process_end import keep_on_signals, leave_now

if TYPE_CHECKING:
    from ocat.chat.turn import Turn
    from ocat.chat.session import ChatSession
    from ocat.ui.conversation import Conversation

# Seconds a window given SIGHUP has to leave on its own before it leaves without Textual: a
# terminal that is still there (`kill -HUP`) is given back in that time; one that is gone never is.
HANGUP_GRACE = 2.0


class MemoryState(Enum):
    """Where the chat's memory is. The header's words are rendered from it (`memory_words`),
    never compared in its place."""

    LOADING = "loading"  # opening the store, or a one-time upgrade of it
    WAITING = "waiting"  # for another process that holds the store
    DOWNLOADING = "downloading"  # the embedding model's first download
    READY = "ready"
    OFF = "off"

    @property
    def pending(self) -> bool:
        """True while memory is still opening or its model downloading."""
        return self in (MemoryState.LOADING, MemoryState.WAITING, MemoryState.DOWNLOADING)


@dataclass(frozen=True)
class MemoryStatus:
    """Memory's state and the numbers the header shows beside it."""

    state: MemoryState
    exchanges: int = 0  # READY: the store's exchange count, as last read
    downloaded: int = 0  # DOWNLOADING: bytes of the model so far
    download_size: int | None = None  # DOWNLOADING: the model's size, when known

    @property
    def percent(self) -> int | None:
        """How much of the model has downloaded, in whole percent (None: its size is unknown)."""
        return self.downloaded * 100 // self.download_size if self.download_size else None


def memory_words(status: MemoryStatus) -> str:
    """The header's words for memory's status: `3 exchanges`, `memory off`, `downloading model 49%`."""
    if status.state is MemoryState.READY:
        return count_of(status.exchanges, "exchange")
    if status.state is MemoryState.DOWNLOADING:
        if status.percent is not None:
            return f"downloading model {status.percent}%"
        return f"downloading model {memory.progress_words(status.downloaded, None)}"
    if status.state is MemoryState.WAITING:
        return "memory waiting…"
    if status.state is MemoryState.OFF:
        return "memory off"
    return "memory loading…"


class MemoryView(Widget):
    """Memory's life in the window: opening, downloading, failing, coming back, closing."""

    DEFAULT_CSS = "MemoryView { display: none; }"

    class MemoryReady(Message):
        """Opening memory has ended: `loaded` says how (ocat.chat.memory_loading)."""

        def __init__(self, loaded: MemoryLoaded) -> None:
            self.loaded = loaded
            super().__init__()

    class MemoryNote(Message):
        """What opening memory is waiting for (another process holding the store) or doing (a
        one-time upgrade), to show meanwhile."""

        def __init__(self, text: str) -> None:
            self.text = text
            super().__init__()

    class ModelProgress(Message):
        """The embedding model's first download has come this far (`total` None: unknown)."""

        def __init__(self, done: int, total: int | None) -> None:
            self.done = done
            self.total = total
            super().__init__()

    def __init__(self, session: ChatSession, *, serve: bool, conversation: Conversation) -> None:
        """`serve`: the store may be served to other processes (ocat.chat.memory_loading)."""
        super().__init__()
        self.session = session
        self.serve = serve
        self.conversation = conversation
        opening = session.settings.vector_store.enabled
        self.status = MemoryStatus(MemoryState.LOADING if opening else MemoryState.OFF)
        if opening:  # from now, not from the worker's start: a prompt sent meanwhile waits for it too
            session.session_memory.opening.begin()
        # The embedding model's download bar, while the first download runs.
        self._download: TaskProgress | None = None
        # What memory is waiting for (another process's store), while it waits.
        self._memory_note: NoticeMessage | None = None
        # Giving the store up, once the window has closed (see give_up_store).
        self.closing: threading.Thread | None = None
        # Puts back the signal handlers the window replaced (see on_mount).
        self._restore_signals: Callable[[], None] = lambda: None

    def on_mount(self) -> None:
        # SIGTERM, or the terminal closing (SIGHUP): what memory has not taken is kept in a file at
        # once, then the window closes as if the user quit (ocat.process_end).
        loop = asyncio.get_running_loop()

        def leave(signum: int) -> None:
            loop.call_soon_threadsafe(self.app.exit, 128 + signum)
            # Only the real chat, which ends its process itself (a test's window ends with its test).
            if signum == signal.SIGHUP and getattr(self.app, "quick_exit", False):
                threading.Thread(target=self._leave_if_stuck, args=(128 + signum,), name="ocat-hangup",
                                 daemon=True).start()

        self._restore_signals = keep_on_signals(self.session.session_memory, leave)

    def _leave_if_stuck(self, code: int) -> None:
        """After SIGHUP: if the window has not left within HANGUP_GRACE, leave without it. The
        terminal closed, and Textual's way out writes to it: its output thread ends on the first
        write that fails, then its queue fills and the closing waits for ever (seen closing tmux).
        What memory has not taken was kept in a file by then; this gives the store up and waits
        for a write under way, as the window's own way out does (ocat.process_end.leave_now)."""
        time.sleep(HANGUP_GRACE)
        self.give_up_store()
        leave_now(code, self.closing, self.session)

    @property
    def state(self) -> MemoryState:
        """Where memory is now (opening, waiting, downloading its model, ready or off)."""
        return self.status.state

    def show(self, status: MemoryStatus) -> None:
        """Memory's status is now `status`: keep it and show it in the header."""
        self.status = status
        self.refresh_header()

    @work(thread=True, exclusive=True, group="memory")
    def load_in_background(self) -> None:
        """Open the store, then ready the embedding model (downloading it on first use), off the
        UI thread: chromadb and the model load here, after first paint. The chat is usable
        meanwhile; its exchanges are kept and written once memory is ready."""
        try:
            def waiting(text: str) -> None:
                # Waiting for another process's store is said on screen, not only "memory loading…".
                self.post_message(self.MemoryNote(text))

            loaded = load_memory(
                self.session.session_memory,
                serve=self.serve,
                notify=waiting,
                progress=self._download_progress(),
            )
        except Exception as exc:  # a bug in opening memory turns memory off, never the chat
            self.session.session_memory.error = log_failure("opening memory", exc)
            loaded = MemoryLoaded(self.session.session_memory.error)
        self.post_message(self.MemoryReady(loaded))
        if loaded.error is None:
            warm_memory(self.session.session_memory)
        self.session.prepare_turns()  # the thread's wake block and the tools offered: not left to the first turn

    def _download_progress(self) -> Callable[[int, int | None], None]:
        """The model download's progress as messages (one per percent); stops the download once
        the app is closing."""
        worker = get_current_worker()
        shown = [-1]

        def progress(done: int, total: int | None) -> None:
            if worker.is_cancelled:
                # The app is closing: stop the download now (it leaves nothing behind) rather
                # than keep the process alive until it ends.
                raise Cancelled("the chat closed before the embedding model was downloaded")
            step = done * 100 // total if total else done // 1_000_000
            if step != shown[0]:
                shown[0] = step
                self.post_message(self.ModelProgress(done, total))

        return progress

    async def on_memory_view_model_progress(self, message: ModelProgress) -> None:
        if self._download is None:
            self._download = TaskProgress(hint="the chat works meanwhile")
            await self.conversation.append(self._download)
        label = "Downloading the embedding model, first use"
        self._download.show(label, message.done, message.total or 0)
        self.show(MemoryStatus(MemoryState.DOWNLOADING, downloaded=message.done, download_size=message.total))

    def on_memory_view_memory_note(self, message: MemoryNote) -> None:
        if isinstance(message.text, LinksChecked):  # a background check of versions: a line of its own
            pane = self.conversation.pane()
            if pane is not None:
                pane.mount(NoticeMessage(message.text))
            return
        # One notice, updated in place as the wait goes on.
        if self._memory_note is None:
            self._memory_note = NoticeMessage(message.text)
            pane = self.conversation.pane()
            if pane is not None:
                pane.mount(self._memory_note)
        else:
            self._memory_note.update(plain(message.text))
        # A wait for another process is said in the header too; other notes (a store's one-time
        # upgrade) are work under way, still "loading".
        if self.state is MemoryState.LOADING and isinstance(message.text, memory.StoreWait):
            self.show(MemoryStatus(MemoryState.WAITING))

    async def on_memory_view_memory_ready(self, message: MemoryReady) -> None:
        if self._download is not None:
            await self._download.remove()
            self._download = None
        store = self.session.session_memory.store
        if self._memory_note is not None:
            await self._memory_note.remove()  # what it said (a wait, an upgrade) is over
            self._memory_note = None
        loaded = message.loaded
        if loaded.error:
            status = MemoryStatus(MemoryState.OFF)
        else:
            assert store is not None
            status = MemoryStatus(MemoryState.READY, exchanges=store.count("exchange"))
        notice = loaded.notice(len(self.session.session_memory.unsaved))
        if notice is not None:
            text, error = notice
            self.conversation.notice(text, error=error)
        self.show(status)

    def header_text(self, width: int | None = None) -> str:
        """The header line fitted to `width` columns (the window's, less the padding, when None)."""
        settings = self.session.settings
        config = display_path(settings.config_path) if settings.config_path else "default config"
        vector_store = settings.vector_store
        if vector_store.url:  # never the headers: a token is not shown
            where = vector_store.url
        elif vector_store.host:
            where = f"{'https' if vector_store.ssl else 'http'}://{vector_store.host}:{vector_store.port}"
        else:
            where = display_path(str(settings.store_path))
        model = "dummy" if self.session.dummy else settings.llm.model
        if width is None:
            width = self.app.size.width - 2  # the header's padding
        return fit_header(model, memory_words(self.status), [where, config], width)

    def refresh_header(self, width: int | None = None) -> None:
        """Fit the header to `width` columns (the window's, less the padding, when None) and show it."""
        found = self.app.query("#header")  # gone once the window is closing
        if found:
            found.first(Static).update(plain(self.header_text(width)))

    async def refresh_count(self) -> None:
        """Show the store's exchange count, read off the UI thread (it may be a server round trip)."""
        store = self.session.session_memory.store
        if store is None or not self.session.session_memory.on:
            return
        try:
            count = await asyncio.to_thread(store.count, "exchange")
        except OcatError:
            return  # the header keeps its last count; the failing command says what went wrong
        self.show(MemoryStatus(MemoryState.READY, exchanges=count))

    def say_what_was_remembered(self, turn: Turn) -> None:
        """Say what `remembered_words` says of the turn's exchange (nothing while memory is
        still loading: it is kept quietly, and written once memory is ready); the header
        follows memory going off and coming back."""
        recorded = turn.recorded
        if recorded is None:
            return
        said = remembered_words(recorded)
        if (secrets := secrets_words(recorded)) is not None:
            self.conversation.notice(secrets)
        if recorded.memory_off and self.state.pending:
            return  # still loading, or its model downloading: the header says so already
        if said is not None:
            self.conversation.notice(said[0], error=said[1])
        if recorded.memory_off:
            self.show(MemoryStatus(MemoryState.OFF))

    def on_unmount(self) -> None:
        self.give_up_store()

    def give_up_store(self) -> None:
        """Close the session (its store) in a thread of its own, once: the app calls this as soon
        as the user quits, and it runs again, doing nothing, when this component leaves."""
        # Stopping a served store's server takes a moment: it starts as soon as the user
        # quits, alongside the window's own closing, and `ocat.cli` gives it a short while
        # more before the process leaves. An exchange being written is finished first.
        self._restore_signals()  # from now on a signal ends the process: closing keeps what waits first
        if self.closing is None:
            self.closing = threading.Thread(target=self.session.close, name="ocat-close-store")
            self.closing.start()


def fit_header(model: str, state: str, paths: list[str], width: int) -> str:
    """`ocat · model · memory state · paths`, within `width` columns (0: no limit).

    The model and the memory state are what a narrow window must still show: the paths go
    first (the last one first; the one that half fits is cut at its start, with an ellipsis),
    then `ocat`, and only then is the model shortened. /vstats shows the paths in full.
    """
    def line(parts: list[str]) -> str:
        return " · ".join(parts)

    parts = ["ocat", model, state, *paths]
    if width <= 0 or len(line(parts)) <= width:
        return line(parts)
    while len(parts) > 3 and len(line(parts)) > width:
        dropped = parts.pop()
        room = width - len(line(parts)) - len(" · ")
        if room >= 12:  # enough of a path's end to recognise it
            return line([*parts, "…" + dropped[len(dropped) - room + 1:]])
    if len(line(parts)) > width:
        parts = parts[1:]  # the name of the program is the least needed
    room = width - len(line(parts)) + len(model)
    if room < len(model):
        parts[-2] = model[: max(room - 1, 8)] + "…"
    return line(parts)  # narrower still: the header's CSS cuts the end with an ellipsis
