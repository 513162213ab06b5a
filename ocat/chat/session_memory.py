"""A chat session's hold on memory: opening it, readying the model, searching it for a turn and
writing its exchange, keeping what memory could not take, giving the store up on failure and on close.

`ocat.chat.session.ChatSession` owns one (`session.session_memory`); a turn hands it its search (as
data: an `ocat.chat.outcomes.MemorySearch`) and its exchange.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from ocat.chat.outcomes import Recall, Recorded, Remembered
from ocat.errors import OcatError
from ocat import memory
from ocat.chat.consolidation import Consolidator, model_judge
from ocat.chat.opening_gate import OpeningGate
from ocat.chat.unsaved import Spooled, save_unsaved_files, spool_exchanges, spooled_words
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.chat.outcomes import MemoryLoaded, MemorySearch
    from ocat.config.loading import Settings
    from ocat.memory import DownloadProgress, FetchResult, MemoryStore
    from ocat.records import Exchange, SearchHit


# After a store failure the store is given up at once (so another ocat process can take it
# over), opened again right away once, and after that at most every REVIVE_SECONDS, on the
# next turn or command; a reopening waits at most REOPEN_WAIT_SECONDS for the store's lock.
REVIVE_SECONDS = 30.0
REOPEN_WAIT_SECONDS = 5.0


class SessionMemory:
    """Memory as one chat session holds it: the store, the embedding model's readiness, the
    exchanges memory could not take yet, and what went wrong. `ChatSession` owns one (`session.session_memory`)."""

    def __init__(self, settings: Settings, *, session_id: str, store: MemoryStore | None = None,
                 dummy: bool = False) -> None:
        self.settings = settings
        self.session_id = session_id
        self.store = store
        self.dummy = dummy
        # Why memory is off (None while it is on, or still loading).
        self.error: str | None = None
        # What went wrong with memory on the last turn while memory stayed on (a search that
        # failed, an exchange not written yet); None when nothing did. Faces show it.
        self.problem: str | None = None
        # The embedding model can run (False while it downloads, or when it cannot be had);
        # a store handed in comes with its embedder.
        self.model_ready = store is not None
        # How far the model's download has come ("34% of 90.4 MB") while it runs, else None.
        self.model_download: str | None = None
        # What readying the model found or downloaded, and how opening memory went (set by
        # `ocat.chat.memory_loading.load_memory`, for the faces to report).
        self.fetched: FetchResult | None = None
        self.loaded: MemoryLoaded | None = None
        # Exchanges not yet in memory (made while memory loaded, or a write failed): tried again on
        # every turn, and kept in a file if the chat ends first (ocat.chat.unsaved).
        self.unsaved: list[Exchange] = []
        # Exchanges whose answer was shown in full and whose write has not committed yet, by id
        # (`hold`): with `unsaved`, what every way out keeps in a file first (`spool`).
        self._pending: dict[str, Exchange] = {}
        # Each exchange as memory keeps it (`memory.secrets`) and what was taken, by id: made once.
        self._kept: dict[str, tuple[Exchange, tuple[str, ...]]] = {}
        # What closing did with the exchanges still unsaved, in words; None if none were.
        self.unsaved_note: str | None = None
        # What the session's kept file holds, as last written by `spool`.
        self.spooled = Spooled()
        self._unsaved_lock = threading.Lock()
        # Re-entrant: a signal handler may keep the exchanges while this thread was doing so.
        self._spool_lock = threading.RLock()
        self._writing = threading.RLock()  # held while an exchange is written: closing waits for it
        self._closed = False
        self._opens_its_store = False  # True once `open` ran: a store handed in is never reopened
        self._serve = False  # how the store was opened (to open it again after a failure), and when
        self._notify: Callable[[str], None] | None = None
        self._revive_at: float | None = None
        # Whether memory is opening (load_memory): the first turn's wake block waits for it.
        self.opening = OpeningGate(lambda: self.model_download is not None)
        # The chat model's background checks of versions (memory.consolidate: model), made on first use.
        self.consolidator: Consolidator | None = None
        # Held while idle memory is given back (`release_idle`): one at a time.
        self._releasing = threading.Lock()

    def open(
        self, *, serve: bool, notify: Callable[[str], None] | None = None, wait_seconds: float = 600.0
    ) -> bool:
        """Open the configured store (the model is not needed for that); False, with
        `error` set, when memory is disabled or the store cannot open."""
        self._serve, self._notify = serve, notify
        self._opens_its_store = True
        if not self.settings.vector_store.enabled:
            return False
        try:
            # The chat is long-lived: it shares the store, so a CLI add meanwhile goes
            # through it instead of racing it (ocat.memory.sharing.owner_lock).
            store = memory.open_store(self.settings, serve=serve, notify=notify, wait_seconds=wait_seconds)
            try:
                store.count("exchange")
            except BaseException:
                store.close()
                raise
        except OcatError as exc:
            self.error = str(exc)
            return False
        if self._closed:  # the chat ended while the store opened (another process held it): hand it back
            store.close()
            return False
        self.store = store
        return True

    def revive(self) -> bool:
        """True when memory is on; after a store failure, opens the store again (at most every
        REVIVE_SECONDS) and writes what was kept meanwhile."""
        if self.store is not None or self._revive_at is None:
            return self.on
        if time.monotonic() < self._revive_at:
            return False
        return self._reopen()

    def _reopen(self) -> bool:
        # A client whose owner went away finds the next owner or becomes it; an owner whose
        # server child died serves the store again.
        self._revive_at = time.monotonic() + REVIVE_SECONDS
        if self._closed or not self._opens_its_store:
            return False  # closing, or a store handed in by the caller, which is not ours to reopen
        if not self.open(serve=self._serve, notify=self._notify, wait_seconds=REOPEN_WAIT_SECONDS):
            return False
        self._revive_at = None
        self.error = None
        self.save_unsaved()
        return self.on

    def ready_model(
        self, *, progress: DownloadProgress | None = None, notify: Callable[[str], None] | None = None
    ) -> FetchResult | None:
        """Make the embedding model ready, downloading it on first use (then `save_unsaved`
        writes the exchanges kept meanwhile); `notify` hears that its cached graph was damaged
        and made again. On failure `error` says what to do and memory stays off."""
        def downloading(done: int, total: int | None) -> None:
            self.model_download = memory.progress_words(done, total)
            if progress is not None:
                progress(done, total)

        try:
            fetched = memory.prepare_model(self.settings.embedding, progress=downloading, notify=notify)
        except OcatError as exc:
            self.error = str(exc)
            return None
        finally:
            self.model_download = None
        self.fetched = fetched
        self._model_is_ready()
        return fetched

    def _model_is_ready(self) -> None:
        # Under the lock that `record` holds while it decides, so no exchange falls between
        # "not ready: keep it" and the caller's save_unsaved.
        with self._unsaved_lock:
            self.model_ready = True
            self.error = None

    @property
    def on(self) -> bool:
        """True while memory is being read and written."""
        return self.store is not None and self.model_ready

    def model_available(self) -> bool:
        """True once the store is open and the model ready; picks up a model fetched meanwhile by another process
        (`ocat --fetch-model` after a failed download) with a look at the disk, never a download."""
        if self.store is None:
            return self.revive()
        if self.model_ready:
            return self.on
        if memory.uses_local_model(self.settings.embedding) and memory.find_model(self.settings.embedding) is not None:
            self._model_is_ready()
            self.save_unsaved()
        return self.model_ready

    def recall(self, search: MemorySearch) -> Recall:
        """Memories for a turn: `search` runs on the store (once memory is on), after what memory
        could not take before is written and failing derived files are rebuilt. A failed search
        leaves memory on and says so; a store that stopped answering is opened again once."""
        self.problem = None
        had_memory = self.on
        if not self.model_available():
            return Recall()
        if self.unsaved:
            self.save_unsaved()  # every turn tries again what memory could not take before
            if self.store is None:
                return Recall(memory_lost=self.error if had_memory else None)
        rebuilt = tuple(self._rebuild_damaged())
        for attempt in (1, 2):
            store = self.store
            assert store is not None
            try:
                hits = _admitted(store, search)
                if store.damaged:
                    failed = "; ".join(store.damaged.values())
                    self.problem = (f"{failed}; this turn's memories were found by their vectors alone, "
                                    "and the file is rebuilt from the store on the next turn")
                elif rebuilt:
                    self.problem = f"{'; '.join(rebuilt)} rebuilt from the store"
                return Recall(hits, self.problem, rebuilt)
            except OcatError as exc:
                if self._reachable():
                    # A failed search is a failed search: this turn goes on without memories and
                    # says so, and memory stays on for the exchange and the next turn.
                    self.problem = f"memories were not searched for this turn: {exc}"
                    return Recall(problem=self.problem, rebuilt=rebuilt)
                self._memory_failed(exc)
                # Once: the owner this process reached the store through may just have closed.
                if attempt == 2 or not self._reopen():
                    return Recall(rebuilt=rebuilt, memory_lost=self.error if had_memory else None)
        return Recall(rebuilt=rebuilt)

    def hold(self, exchange: Exchange) -> None:
        """An answer was shown in full: its exchange is kept by every way out (`spool`) from now
        until its write has committed (`keep`). Nothing is held in dummy mode or with memory disabled."""
        if not self.dummy and self.settings.vector_store.enabled:
            self._pending[exchange.exchange_id] = self._redacted(exchange)[0]

    def _redacted(self, exchange: Exchange) -> tuple[Exchange, tuple[str, ...]]:
        """The exchange as memory keeps it, and the kinds of the secrets taken out of it."""
        found = self._kept.get(exchange.exchange_id) or memory.kept_exchange(exchange, self.settings.memory.secrets)
        return self._kept.setdefault(exchange.exchange_id, found)

    def waiting(self) -> list[Exchange]:
        """The exchanges not in memory yet: those being written, then those kept for later, each once."""
        # Without a lock (a signal handler reads this): each copy is one step under the GIL, and an
        # exchange moving from pending to unsaved is added there before it leaves pending.
        found = {e.exchange_id: e for e in list(self._pending.values())}
        for exchange in list(self.unsaved):
            found.setdefault(exchange.exchange_id, exchange)
        return list(found.values())

    def spool(self) -> Spooled:
        """Make this session's kept file (ocat.chat.unsaved) hold what is not in memory yet, synced
        to disk, or remove it when nothing is; quick, never raises. Every way out of a chat runs
        it first; the next start on this store writes the file (ids are kept: a write that also
        lands is not made twice)."""
        if self.dummy or not self.settings.vector_store.enabled:
            return self.spooled
        with self._spool_lock:
            self.spooled = spool_exchanges(self.settings, self.waiting(), self.session_id)
        return self.spooled

    def keep(self, exchange: Exchange) -> Recorded:
        """Write a finished exchange to memory (not in dummy mode or with memory off) without its secrets
        (the conversation keeps it as typed); whether it was stored, kept or not, and why."""
        if self.dummy or not self.settings.vector_store.enabled:
            return Recorded(exchange, Remembered.NOT_STORED)
        said, (exchange, found) = exchange, self._redacted(exchange)
        taken = found if self.settings.memory.secrets != "keep" else ()
        self.hold(said)  # a face that did not hold it when the answer ended (redacted once, above)
        self._kept.pop(exchange.exchange_id, None)
        with self._unsaved_lock:
            if not self.on:
                self.unsaved.append(exchange)  # written once the store and the model are ready
                self._pending.pop(exchange.exchange_id, None)
                return Recorded(said, Remembered.KEPT, self.error, memory_off=self.error is not None, secrets=taken)
        try:
            with self._writing:
                if self.store is None:
                    raise OcatError("memory was closed")  # the chat is closing: keep it, as for any failure
                self.store.add_exchange(exchange)
                self._pending.pop(exchange.exchange_id, None)
        except OcatError as exc:
            with self._unsaved_lock:
                self.unsaved.append(exchange)
            self._pending.pop(exchange.exchange_id, None)
            if self._write_failed(exc):
                return Recorded(said, Remembered.KEPT, self.problem, secrets=taken)
            self._reopen()  # once, at once: writes the kept exchange if the store comes back
            if exchange not in self.unsaved:
                return Recorded(said, Remembered.STORED, secrets=taken)
            return Recorded(said, Remembered.KEPT, self.error or "memory is off", memory_off=True, secrets=taken)
        self._check_links(exchange.exchange_id)
        self.release_idle()  # the exchange's embedding grew the model's arena; the chat now waits
        return Recorded(said, Remembered.STORED, secrets=taken)

    def release_idle(self, *, wait: bool = False) -> None:
        """Give back what the model and the C heap hold past what a waiting chat needs
        (`memory.release_idle_memory`: the vectors stay the same), once its turn, command or
        warm-up is done; in a thread of its own unless `wait`. Only for a chat (a session that
        serves its store): a one-shot command ends instead."""
        store = self.store
        if not self._serve or store is None or self.dummy:
            return
        if not self._releasing.acquire(blocking=False):
            return  # one is under way; what is left is given back after the next turn

        def release() -> None:
            try:
                memory.release_idle_memory(store.embedder)
            except Exception:  # memory not given back costs memory, never the chat
                pass
            finally:
                self._releasing.release()

        if wait:
            release()
        else:
            # Not a daemon: quitting waits for its one short run rather than abort inside ONNX Runtime.
            threading.Thread(target=release, name="ocat-release", daemon=False).start()

    def _check_links(self, exchange_id: str) -> None:
        """With memory.consolidate: model, queue the stored exchange for the model's check of its versions."""
        if self.settings.memory.consolidate == "model" and not self.dummy:
            if self.consolidator is None:
                self.consolidator = Consolidator(lambda: self.store, model_judge(self.settings.llm), self._notify)
            self.consolidator.submit(exchange_id)

    def forget(self, exchange_id: str) -> None:
        """Drop an exchange that waits to be written (it was deleted meanwhile)."""
        with self._unsaved_lock:
            self.unsaved = [e for e in self.unsaved if e.exchange_id != exchange_id]
        self._pending.pop(exchange_id, None)

    def save_unsaved(self) -> int:
        """Write the exchanges kept while memory could not take them; returns how many were written."""
        with self._writing:
            with self._unsaved_lock:
                if self.store is None or self.dummy:
                    return 0
                # They stay in `unsaved` until written: a way out meanwhile keeps them (`spool`).
                waiting = list(self.unsaved)
            if not waiting:
                return 0
            try:
                written = self.store.add_exchanges(waiting)
            except OcatError as exc:
                self._write_failed(exc)
                return 0
            done = {e.exchange_id for e in waiting}
            with self._unsaved_lock:
                self.unsaved = [e for e in self.unsaved if e.exchange_id not in done]
        return written

    def save_unsaved_files(self) -> str | None:
        """Write what earlier chats on this store kept in a file (ocat.chat.unsaved); what was done, in
        words, or None when there was nothing."""
        if self.store is None or self.dummy:
            return None
        with self._writing:
            store = self.store
            return save_unsaved_files(self.settings, store).sentence() if store is not None else None

    def close(self, *, wait_seconds: float | None = None) -> str | None:
        """Give the store up (its lock, and its server if this process serves it), once any
        write under way has finished (or `wait_seconds` have passed: the store is then left as a
        crashed process leaves it, and the kept file holds that write's exchange).

        What is not in memory yet (kept for later, or being written) is first kept in a file
        that the next start writes (`spool`), then what was kept is tried once more; the file
        goes once all of it is written. Returns what became of the exchanges memory had not
        taken, in words (also kept as `unsaved_note`), or None when there were none.
        """
        self.spool()  # first, and quickly: a window closing may not wait for a slow store
        if self.consolidator is not None:
            self.consolidator.close()  # a check under way ends on the closed store, changing nothing
        with self._unsaved_lock:
            left = list(self.unsaved) if not self.dummy and self.settings.vector_store.enabled else []
        if left and self.on:
            self.save_unsaved()
        if self._writing.acquire(timeout=-1 if wait_seconds is None else wait_seconds):
            try:
                self._closed = True
                store, self.store = self.store, None
                if store is not None:
                    store.close()
            finally:
                self._writing.release()
        else:
            self._closed = True
        kept = self.spool()  # now what is still not in memory: none, and the file goes
        self.unsaved_note = self._closing_words(len(left), kept)
        return self.unsaved_note

    def _closing_words(self, left: int, kept: Spooled) -> str | None:
        """What closing did with the exchanges that were not in memory yet (`left` of them were
        kept for later as it began; `kept`: what the kept file holds now)."""
        if kept.count:
            return spooled_words(kept, self.error or self.problem)
        if not left:
            return None
        return f"the {count_of(left, 'exchange')} this chat kept {'is' if left == 1 else 'are'} now in memory."

    def leaving_words(self) -> str | None:
        """What a way out that could not wait for closing to end says of the exchanges it kept."""
        return spooled_words(self.spooled, self.error or self.problem) if self.spooled.count else None

    def _rebuild_damaged(self) -> list[str]:
        """Rebuild the derived files an earlier search found failing (ocat.memory.storage.derived); what
        was rebuilt, in words. A rebuild that fails leaves the search to degrade again."""
        store = self.store
        if store is None or not store.damaged:
            return []
        try:
            with self._writing:
                return memory.rebuild_derived(store)
        except OcatError:
            return []

    def _reachable(self) -> bool:
        """Whether the store still answers (a count): a failure of one search or one write is
        then that request's, and memory stays on."""
        store = self.store
        if store is None:
            return False
        try:
            store.count("exchange")
        except Exception:
            return False
        return True

    def _write_failed(self, exc: OcatError) -> bool:
        """A write failed: when the store still answers, keep memory on (the exchange waits in
        `unsaved` for the next turn) and return True; else memory is off."""
        if self._reachable():
            self.problem = f"not written to memory yet ({exc}); this chat keeps it and tries again on the next turn"
            return True
        self._memory_failed(exc)
        return False

    def _memory_failed(self, exc: OcatError) -> None:
        """Memory is off: say why, and give the store up at once (its lock and server with it), so
        another ocat process is not left waiting for a store this one cannot use."""
        self.error = str(exc)
        store, self.store = self.store, None
        self._revive_at = time.monotonic() + REVIVE_SECONDS
        if store is not None:
            try:
                store.close()
            except Exception:  # giving up a broken store must not fail in turn
                pass


def _admitted(store: MemoryStore, search: MemorySearch) -> list[SearchHit]:
    """The memories `search` admits from `store`, within its token budget."""
    found = memory.retrieve_any(store, list(search.queries), search.limits, exclude_ids=set(search.in_view),
                                now=search.now)
    return memory.within_budget(memory.admitted(found), search.token_budget)
