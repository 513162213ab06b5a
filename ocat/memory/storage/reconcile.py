"""What opening a store checks and repairs before anything reads it.

Chroma is the record; the lexical index and the prompt vectors are derived from it. A store
made by an older ocat, a crash between two writes, or a Chroma server written by another
client can leave them behind; opening the store brings them level, and settles which
calibration its scores use.
"""

from __future__ import annotations

import atexit
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ocat.errors import EmbeddingError, StoreError
from ocat.memory.embedding.embedders import embedder_ready, passages_of
from ocat.memory.storage.derived import beside_index, DerivedFileError, move_aside
from ocat.memory.storage.primary import StoreShrunk, shrink_findings
from ocat.memory.storage.prompt_vectors import PromptVectors, regroup
from ocat.memory.storage.scoring import Calibration
from ocat.memory.storage.remote_sync import SEEN_KEY, fill_prompts, keep_current, level_by_ids, share
from ocat.memory.storage.thread_titles import TITLES_IN_STORE, sync_titles
from ocat.records import RECORD_KINDS
from ocat.memory.storage.foreground import lowest_priority
from ocat.memory.storage.lexical_index import LexicalIndex

if TYPE_CHECKING:
    from ocat.memory.storage.store import MemoryStore

# A backfill of prompt vectors at least this long is announced: about 4 s of embedding on two
# cores (742 LoCoMo prompts made an open take 6.7 s instead of 0.9 s; a chat's prompts are shorter).
ANNOUNCE_BACKFILL = 500
# Prompts embedded per step of a backfill (each step is one SQLite transaction).
BACKFILL_STEP = 256
# Exchanges whose passages one step of the background backfill embeds (one transaction; a
# stop waits for at most one step, well under a second).
PASSAGE_STEP = 16
# Passages the backfill embeds between two looks for a search (about 50 ms of the model on two cores).
PASSAGE_SLICE = 8


def sync_lexical(store: MemoryStore, *, force: bool = False) -> bool:
    """Bring the lexical index level with Chroma; with `force` (a repair, where the counts may agree
    over different records) every kind's is emptied and read again. True if the exchanges' index
    was rebuilt so (its titles are then read again from Chroma: ocat.memory.storage.thread_titles).

    A store on a server first applies the changes other machines logged since this one last
    looked (a rename or a delete and add leave the counts as they were). Then a kind whose count
    differs from Chroma's (a store made before the index existed, a crash between the two writes,
    a client that logs nothing, a deleted index file) is levelled by comparing ids, reading only
    the records missing here (ocat.memory.storage.remote_sync).
    """
    joining = not force and store.lexical.count("exchange") == 0 and store.lexical.count("document") == 0
    if store.changes is not None and not force and not joining:
        keep_current(store)
    logged = store.changes.count() if store.changes is not None else None
    for kind in RECORD_KINDS:
        if force:
            store.lexical.clear(kind)
        elif store.lexical.count(kind) == store.count(kind):
            continue
        level_by_ids(store, kind)
    if joining:
        store.lexical.set_meta(TITLES_IN_STORE, "1")  # a new index took its titles with its records
    if logged is not None and (joining or force):
        store.lexical.set_meta(SEEN_KEY, str(logged))  # what was logged before it read Chroma is in it
    return force


def sync_prompts(store: MemoryStore, notify: Callable[[str], None] | None = None, *, force: bool = False) -> bool:
    """Give every exchange its prompt vector (see ocat.memory.storage.prompt_vectors; its passages
    are left to the background backfill, `start_passages`) and drop the vectors of exchanges that
    are gone, telling `notify` when that is more than a moment's work. False if it failed: the
    store still opens, and scores as it did before.

    Reads Chroma only when the counts differ: a store made before prompt vectors existed (once),
    a crash between the writes, or a server written by an older client.
    """
    if not embedder_ready(store.embedder):
        return False  # no model here: nothing derived is worth fetching it for (stats, export)
    try:
        if force or store.prompts.count() != store.count("exchange"):
            _sync_prompt_rows(store, notify)
    except DerivedFileError as exc:
        store.derived_failed(exc)
        return False
    except (StoreError, EmbeddingError):
        return False
    return True


def _sync_prompt_rows(store: MemoryStore, notify: Callable[[str], None] | None) -> None:
    have = store.prompts.ids()
    seen: set[str] = set()
    todo: list[str] = []  # ids only: a large store's texts are never all held
    for record_id in store.iter_ids("exchange"):
        seen.add(record_id)
        if record_id not in have:
            todo.append(record_id)
    if notify and len(todo) >= ANNOUNCE_BACKFILL:
        notify(f"reading the vectors of {len(todo):,} exchanges from the memory server…" if store.sides is not None
               else f"embedding the prompts of {len(todo):,} earlier exchanges (once, for the memory gate)…")
    for start in range(0, len(todo), BACKFILL_STEP):
        fill_prompts(store, todo[start : start + BACKFILL_STEP])
    store.prompts.delete(list(have - seen))


def sync_passages(store: MemoryStore, stop: threading.Event | None = None) -> bool:
    """Make the passage vectors of exchanges stored before passages existed (or whose step a
    crash cut short), PASSAGE_STEP exchanges per transaction, until done or `stop` is set;
    False if it failed (those exchanges score by their first window and prompt until the next open).
    With `stop` (the background backfill), each step waits until no search has run for a moment:
    searches come first (ocat.memory.storage.foreground)."""
    try:
        while not (stop is not None and stop.is_set()):
            if stop is not None:
                store.foreground.wait_quiet(stop)
                if stop.is_set():
                    break
            todo = store.prompts.without_passages(PASSAGE_STEP)
            if not todo:
                break
            _embed_passages(store, todo, stop)
    except StoreError:
        return False
    return True


class PassageBackfill:
    """`sync_passages` in a background thread, so that opening an older store stays instant:
    until it is done, an exchange without passages scores by its first window and prompt, as
    before. `stop` (called by MemoryStore.close, and at exit) waits for the current step."""

    def __init__(self, store: MemoryStore) -> None:
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(store,), name="ocat-passages", daemon=True)
        atexit.register(self.stop)

    def _run(self, store: MemoryStore) -> None:
        lowest_priority()  # the chat's own threads first, even between two searches
        # A thread's exception would be printed over the chat's screen: it is logged instead,
        # and the exchanges left score as before until the next open tries again.
        try:
            sync_passages(store, self._stop)
        except Exception:
            logging.getLogger(__name__).warning("making passage vectors stopped", exc_info=True)
        finally:
            atexit.unregister(self.stop)  # done: nothing to wait for at exit, nor the store to keep

    def start(self) -> PassageBackfill:
        """Start the thread; returns self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Ask the backfill to stop after its current step, and wait for that."""
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()
        atexit.unregister(self.stop)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the backfill to finish; True if it has."""
        self.thread.join(timeout)
        return not self.thread.is_alive()


def _embed_passages(store: MemoryStore, ids: list[str], stop: threading.Event | None = None) -> None:
    """Embed some exchanges' passages from their text in Chroma and write them (one transaction).
    With `stop` (the background backfill), a search that comes meanwhile is waited for between
    slices of PASSAGE_SLICE passages; a stop then leaves the step to be made again."""
    # Those another machine made are read from the server (ocat.memory.storage.shared_sides).
    shared = store.sides.get(ids) if store.sides is not None else {}
    ready = [i for i in ids if i in shared and shared[i][1] is not None]
    if ready:
        store.prompts.write_passages(ready, [shared[i][1] or [] for i in ready])
        ids = [i for i in ids if i not in set(ready)]
        if not ids:
            return
    got = store.fetch("exchange", ids, vectors=False)
    done = list(got["ids"])
    texts = [passages_of(store.embedder, text or "") for text in got["documents"]]
    flat = [t for side in texts for t in side]
    vectors: list[list[float]] = []
    for start in range(0, len(flat), PASSAGE_SLICE):
        if stop is not None:
            store.foreground.wait_quiet(stop)
            if stop.is_set():
                return
        vectors += store.embedder.embed(flat[start : start + PASSAGE_SLICE])
    passages = regroup(vectors, texts)
    # An id Chroma no longer holds (deleted meanwhile) is marked done with none.
    gone = [i for i in ids if i not in set(done)]
    store.prompts.write_passages(done + gone, passages + [[] for _ in gone])
    prompts = store.prompts.vectors(done)
    made = [n for n, i in enumerate(done) if i in prompts]
    share(store, [done[n] for n in made], [prompts[done[n]] for n in made], [passages[n] for n in made])


def start_passages(store: MemoryStore) -> None:
    """Start the background backfill if some exchange still lacks its passages."""
    if store.prompts.without_passages(1):
        store.start_backfill()


def catch_up(store: MemoryStore) -> None:
    """Once the embedding model is on this machine (a first-use download): embed the prompts that
    waited for it at open, and start the passages. Cheap when nothing waited (two counts)."""
    if sync_prompts(store, store.notify):
        try:
            start_passages(store)
        except DerivedFileError as exc:
            store.derived_failed(exc)


def settled_calibration(store: MemoryStore, shipped: Calibration, *, complete: bool) -> Calibration:
    """The calibration the store's scores use: the one recorded when it was made, so scores keep
    their meaning; a fit ocat shipped before is replaced by `shipped` (and recorded) once every
    exchange has its prompt vector (`complete`)."""
    recorded = Calibration.from_metadata(store.exchanges.metadata or {})
    if recorded is None:
        return shipped
    settled = recorded.upgraded(shipped) if complete else recorded
    if settled != recorded:
        try:
            # Chroma replaces the whole dict: keep the model's name and the rest.
            store.exchanges.modify(metadata={**(store.exchanges.metadata or {}), **settled.to_metadata()})
        except Exception:
            return recorded  # not recorded, so not used: the next open tries again
    return settled


def rebuild_derived(store: MemoryStore) -> list[str]:
    """Move aside the derived files a search found failing (`store.damaged`) and build them again
    from Chroma; returns what was rebuilt, in words. The store's floor goes with the prompt
    file, and is measured again when next needed."""
    index = Path(store.lexical.path)
    files = {str(index): "lexical index", str(beside_index(index, "prompts")): "prompt vector file"}
    chosen = {path: (files[path], why) for path, why in store.damaged.items() if path in files}
    if not chosen:
        return []
    if store.backfill is not None:
        store.backfill.stop()
    store.lexical.close()
    store.prompts.close()
    for path in chosen:
        if Path(path).exists():
            move_aside(Path(path))
    store.damaged = {}
    store.lexical = LexicalIndex(index)
    # The floor was kept in the old prompt file: the gate measures it again (it reads
    # `store.prompts` afresh when that is a new file).
    store.prompts = PromptVectors(beside_index(index, "prompts"), store.embedder)
    sync_titles(store, rebuilt=sync_lexical(store))
    sync_prompts(store, store.notify)
    start_passages(store)
    return [f"the {what} {path} ({why})" for path, (what, why) in chosen.items()]


def reconcile(store: MemoryStore, notify: Callable[[str], None] | None = None) -> None:
    """Bring a newly opened store's derived data level with Chroma (the lexical index, the
    titles it mirrors, the prompt vectors) and settle its calibration.

    Raises StoreShrunk, changing nothing, when a derived file holds more than Chroma: Chroma lost
    records, and levelling would erase the traces of what it held (ocat.memory.storage.primary).
    On a server, the deletes other machines logged meanwhile are applied first: they are not a loss."""
    if store.lexical.count("exchange") or store.lexical.count("document"):
        keep_current(store)
    findings = shrink_findings(store)
    if findings:
        raise StoreShrunk(store.location.describe(), findings)
    try:
        sync_titles(store, rebuilt=sync_lexical(store))
    except DerivedFileError as exc:  # read-only, or damaged on the way: reads go on from Chroma
        store.derived_failed(exc)
    complete = sync_prompts(store, notify)
    store.calibration = settled_calibration(store, store.calibration, complete=complete)
    if complete:
        start_passages(store)
