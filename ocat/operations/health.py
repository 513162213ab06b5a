"""The store-health operations: `ocat --check-store` and `ocat --repair-store`.

Both open the configured store's Chroma side alone (its lock taken as for any command), so a
damaged derived file is reported by the check as it is, and replaced by the repair.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ocat.config import Settings
    from ocat.memory.store_check import RepairResult, StoreHealth
    from ocat.memory.storage.store import MemoryStore

# The exit code of `--check-store` when it found something to repair (docs/cli.md).
PROBLEMS_FOUND = 4


def check(settings: Settings, *, notify: Callable[[str], None] | None = None) -> StoreHealth:
    """What is wrong with the configured store, changing nothing."""
    from ocat.memory import open_store
    from ocat.memory.store_check import check_store

    store = open_store(settings, notify=notify, upkeep=False)
    try:
        return check_store(store)
    finally:
        store.close()


def repair(settings: Settings, *, notify: Callable[[str], None] | None = None) -> RepairResult:
    """Rebuild every derived file of the configured store, and finish or remove its partial documents."""
    from ocat.memory import add_path, open_store
    from ocat.memory.store_check import repair_store

    def finish(store: MemoryStore, source: Path) -> None:
        add_path(store, source, settings.chunking)

    store = open_store(settings, notify=notify, upkeep=False)
    try:
        return repair_store(store, finish, notify=notify)
    finally:
        store.close()


def health_record(found: StoreHealth) -> dict[str, Any]:
    """A check's findings as JSON."""
    return asdict(found) | {"healthy": found.healthy}


def repair_record(done: RepairResult) -> dict[str, Any]:
    """A repair's report as JSON."""
    return {"rebuilt": done.rebuilt, "finished_documents": done.finished_documents,
            "removed_documents": done.removed_documents, "before": health_record(done.before),
            "after": health_record(done.after), "healthy": done.after.healthy}
