"""What opening a store checks and repairs before anything reads it.

Chroma is the record; the lexical index and the prompt vectors are derived from it. A store
made by an older ocat, a crash between two writes, or a Chroma server written by another
client can leave them behind; opening the store brings them level, and settles which
calibration its scores use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from ocat.errors import EmbeddingError, StoreError
from ocat.memory.embedding.embedders import embedder_ready
from ocat.memory.storage.derived import beside_index, DerivedFileError, move_aside
from ocat.memory.storage.primary import StoreShrunk, shrink_findings
from ocat.memory.storage.passages import start_passages
from ocat.memory.storage.prompt_vectors import PromptVectors
from ocat.memory.storage.scoring import Calibration
from ocat.memory.storage.remote_sync import SEEN_KEY, fill_prompts, keep_current, level_by_ids
from ocat.memory.storage.thread_titles import TITLES_IN_STORE, sync_titles
from ocat.records import RECORD_KINDS, RecordKind
from ocat.memory.storage.lexical_index import LexicalIndex

if TYPE_CHECKING:
    from ocat.memory.storage.parts import StoreParts

# A backfill of prompt vectors at least this long is announced: about 4 s of embedding on two
# cores (742 LoCoMo prompts made an open take 6.7 s instead of 0.9 s; a chat's prompts are shorter).
ANNOUNCE_BACKFILL = 500
# Prompts embedded per step of a backfill (each step is one SQLite transaction).
BACKFILL_STEP = 256


def sync_lexical(store: StoreParts, *, force: bool = False, counts: Mapping[RecordKind, int] | None = None) -> bool:
    """Bring the lexical index level with Chroma; with `force` (a repair, where the counts may agree
    over different records) every kind's is emptied and read again. True if the exchanges' index
    was rebuilt so (its titles are then read again from Chroma: ocat.memory.storage.thread_titles).

    A store on a server first applies the changes other machines logged since this one last
    looked (a rename or a delete and add leave the counts as they were). Then a kind whose count
    differs from Chroma's (a store made before the index existed, a crash between the two writes,
    a client that logs nothing, a deleted index file) is levelled by comparing ids, reading only
    the records missing here (ocat.memory.storage.remote_sync). `counts`: Chroma's counts by
    kind, when the caller has read them since the changes were applied.
    """
    joining = not force and store.lexical.count("exchange") == 0 and store.lexical.count("document") == 0
    if store.changes is not None and not force and not joining:
        keep_current(store)
    logged = store.changes.count() if store.changes is not None else None
    for kind in RECORD_KINDS:
        if force:
            store.lexical.clear(kind)
        elif store.lexical.count(kind) == (counts[kind] if counts is not None else store.count(kind)):
            continue
        level_by_ids(store, kind)
    if joining:
        store.lexical.set_meta(TITLES_IN_STORE, "1")  # a new index took its titles with its records
    if logged is not None and (joining or force):
        store.lexical.set_meta(SEEN_KEY, str(logged))  # what was logged before it read Chroma is in it
    return force


def sync_prompts(store: StoreParts, notify: Callable[[str], None] | None = None, *, force: bool = False,
                 exchanges: int | None = None) -> bool:
    """Give every exchange its prompt vector (see ocat.memory.storage.prompt_vectors; its passages
    are left to the background backfill, `start_passages`) and drop the vectors of exchanges that
    are gone, telling `notify` when that is more than a moment's work. False if it failed: the
    store still opens, and scores as it did before.

    Reads Chroma only when the counts differ: a store made before prompt vectors existed (once),
    a crash between the writes, or a server written by an older client. `exchanges`: Chroma's
    count of them, when the caller has read it.
    """
    if not embedder_ready(store.embedder):
        return False  # no model here: nothing derived is worth fetching it for (stats, export)
    try:
        if force or store.prompts.count() != (exchanges if exchanges is not None else store.count("exchange")):
            _sync_prompt_rows(store, notify)
    except DerivedFileError as exc:
        store.derived_failed(exc)
        return False
    except (StoreError, EmbeddingError):
        return False
    return True


def _sync_prompt_rows(store: StoreParts, notify: Callable[[str], None] | None) -> None:
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


def catch_up(store: StoreParts) -> None:
    """Once the embedding model is on this machine (a first-use download): embed the prompts that
    waited for it at open, and start the passages. Cheap when nothing waited (two counts)."""
    if sync_prompts(store, store.notify):
        try:
            start_passages(store)
        except DerivedFileError as exc:
            store.derived_failed(exc)


def settled_calibration(store: StoreParts, shipped: Calibration, *, complete: bool) -> Calibration:
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


def rebuild_derived(store: StoreParts) -> list[str]:
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


def reconcile(store: StoreParts, notify: Callable[[str], None] | None = None) -> None:
    """Bring a newly opened store's derived data level with Chroma (the lexical index, the
    titles it mirrors, the prompt vectors) and settle its calibration.

    Raises StoreShrunk, changing nothing, when a derived file holds more than Chroma: Chroma lost
    records, and levelling would erase the traces of what it held (ocat.memory.storage.primary).
    On a server, the deletes other machines logged meanwhile are applied first: they are not a loss."""
    if store.lexical.count("exchange") or store.lexical.count("document"):
        keep_current(store)
    # Read once for the three steps below, which write only the derived files: six counts were
    # a sixth of an open's CPU (~1.3 ms each).
    counts = {kind: store.count(kind) for kind in RECORD_KINDS}
    findings = shrink_findings(store, counts)
    if findings:
        raise StoreShrunk(store.location.describe(), findings)
    try:
        sync_titles(store, rebuilt=sync_lexical(store, counts=counts))
    except DerivedFileError as exc:  # read-only, or damaged on the way: reads go on from Chroma
        store.derived_failed(exc)
    complete = sync_prompts(store, notify, exchanges=counts["exchange"])
    store.calibration = settled_calibration(store, store.calibration, complete=complete)
    if complete:
        start_passages(store)
