"""The store-health operations: `ocat --check-store` and `ocat --repair-store`.

Both open the configured store's Chroma side alone (its lock taken as for any command), so a
damaged derived file is reported by the check as it is, and replaced by the repair. A store
whose primary file is missing or empty is reported by the check, and repaired only when the
user accepts the smaller store.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any, Callable
from ocat import memory
from ocat.errors import StoreError

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import PartialDocument
    from ocat.memory import Finished
    from ocat.memory import StoreHealth
    from ocat.memory import RepairResult
    from ocat.memory import MemoryStore
    from ocat.memory import CacheCheck

# The exit code of `--check-store` when it found something to repair, and of `--repair-store`
# when the store is still not healthy or the repair stopped (docs/cli.md).
PROBLEMS_FOUND = 4


def check(settings: Settings, *, notify: Callable[[str], None] | None = None) -> StoreHealth:
    """What is wrong with the configured store, changing nothing in it; the embedding model's
    cached graph (no memory: a cache) is checked too, and made again when damaged."""
    graph = _model_graph(settings)
    try:
        found = _store_health(settings, notify)
    except StoreError as failed:
        # Chroma failed on a page it needed: the check then names the damage, as it does for a
        # page Chroma never reads, rather than failing as any other command does.
        unread = memory.unreadable_health(memory.location_for(settings), settings.vector_store.collection, failed)
        if unread is None:
            raise
        found = unread
    return replace(found, model_graph=graph.line() if graph is not None else None)


def _store_health(settings: Settings, notify: Callable[[str], None] | None) -> StoreHealth:
    """The configured store's findings, opened without upkeep (one whose chroma.sqlite3 is missing
    or empty is not opened, so not made anew)."""
    try:
        store = memory.open_store(settings, notify=notify, upkeep=False)
    except memory.StoreShrunk as refused:
        return memory.unopened_health(memory.location_for(settings), settings.vector_store.collection, refused)
    try:
        return memory.check_store(store)
    finally:
        store.close()


def _model_graph(settings: Settings) -> CacheCheck | None:
    """The model's cached graph checked thoroughly (made again when damaged); None when ocat
    keeps none for the configured model, or the model is not on this machine."""
    found = memory.check_model_graph(settings.embedding)
    return found if found is not None and found.path is not None else None


def repair(
    settings: Settings, *, notify: Callable[[str], None] | None = None, accept_smaller: bool = False
) -> RepairResult:
    """Repair the configured store additively (ocat.memory.store_repair): derived files rebuilt,
    partial documents finished or kept; nothing the user kept is deleted."""
    def finish(store: MemoryStore, partial: PartialDocument) -> Finished:
        return memory.finish_document(store, partial, settings.chunking)

    moved: list[str] = []
    graph = _model_graph(settings)
    try:
        store = memory.open_store(settings, notify=notify, upkeep=False)
    except memory.StoreShrunk:
        folder = memory.location_for(settings).path
        if not accept_smaller or folder is None:
            raise
        moved = memory.set_aside_derived(folder)
        store = memory.open_store(settings, notify=notify, upkeep=False)
    try:
        done = memory.repair_store(store, finish, notify=notify, accept_smaller=accept_smaller, moved_before=moved)
    finally:
        store.close()
    if graph is not None and graph.problem is not None:
        return replace(done, done=[graph.line(), *done.done])
    return done


def health_record(found: StoreHealth) -> dict[str, Any]:
    """A check's findings as JSON."""
    return asdict(found) | {"healthy": found.healthy}


def repair_record(done: RepairResult) -> dict[str, Any]:
    """A repair's report as JSON."""
    return {"done": done.done, "finished_documents": done.finished_documents,
            "kept_documents": done.kept_documents, "moved_aside": done.moved_aside,
            "before": health_record(done.before), "after": health_record(done.after), "healthy": done.after.healthy}
