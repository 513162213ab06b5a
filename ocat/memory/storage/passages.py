"""Passage vectors made in the background: those of exchanges stored before passages existed, of
a bulk write that left them for later (ocat.memory.storage.writes.PASSAGES_INLINE), or of a step a
crash cut short.

The backfill embeds PASSAGE_STEP exchanges per transaction, in a thread of its own
(ocat.memory.storage.foreground.PassageBackfill) that steps aside for searches; until it is done,
an exchange without passages scores by its first window and prompt, as before.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ocat.errors import StoreError
from ocat.memory.embedding.embedders import passages_of
from ocat.memory.storage.foreground import PassageBackfill
from ocat.memory.storage.prompt_vectors import regroup
from ocat.memory.storage.remote_sync import share

if TYPE_CHECKING:
    from ocat.memory.storage.parts import StoreParts

# Exchanges whose passages one step of the background backfill embeds (one transaction; a
# stop waits for at most one step, well under a second).
PASSAGE_STEP = 16
# Passages the backfill embeds between two looks for a search (about 50 ms of the model on two cores).
PASSAGE_SLICE = 8


def start_backfill(store: StoreParts) -> None:
    """Make the passages still missing in a background thread (`store.backfill`), unless one is running."""
    if store.backfill is None or not store.backfill.thread.is_alive():
        store.backfill = PassageBackfill(lambda stop: sync_passages(store, stop)).start()


def start_passages(store: StoreParts) -> None:
    """Start the background backfill if some exchange still lacks its passages."""
    if store.prompts.without_passages(1):
        start_backfill(store)


def finish_passages(store: StoreParts, timeout: float | None = None) -> bool:
    """Wait for the background backfill, if one runs; True when none is left running. Without a
    timeout the caller makes what is left itself, at its own priority: the backfill's thread runs at
    the lowest, and on a busy machine a bench that waited for it waited minutes for seconds of work
    (docs/PERFORMANCE.md, "Fourth round"). The same steps make the same vectors, bit for bit."""
    backfill = store.backfill
    if backfill is None or not backfill.thread.is_alive():
        return True
    if timeout is not None:
        return backfill.wait(timeout)
    backfill.stop()  # after its current step: the next ones are made here
    try:
        sync_passages(store)
    except Exception:  # as the backfill's thread does: those exchanges score as before
        logging.getLogger(__name__).warning("making passage vectors stopped", exc_info=True)
    return True


def sync_passages(store: StoreParts, stop: threading.Event | None = None) -> bool:
    """Make the passage vectors of exchanges stored without them, PASSAGE_STEP exchanges per
    transaction, until done or `stop` is set; False if it failed (those exchanges score by their
    first window and prompt until the next open).
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


def _embed_passages(store: StoreParts, ids: list[str], stop: threading.Event | None = None) -> None:
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
