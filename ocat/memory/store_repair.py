"""`ocat --repair-store`: making a store whole, additively.

Like `sqlite3 .recover` and `git fsck`, a repair never deletes what the user kept. It writes the
titles an older ocat kept only in its lexical index into Chroma first; moves a damaged derived
file aside (kept, named in its output) and builds it again from Chroma; brings sound ones level
in place; finishes a document whose add was cut short when its file still holds the same text,
and otherwise keeps it as it is. A primary store that holds less than its derived files is
damaged, not a reason to shrink them: the repair stops and says what to do, unless the user
accepts the smaller store (`--accept-smaller-store`), and even then the files are moved aside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ocat.errors import StoreError
from ocat.memory.ingest.documents import PartialDocument
from ocat.memory.ingest.finishing import Finished
from ocat.memory.store_check import StoreHealth, check_store
from ocat.memory.storage.derived import DerivedFileError, move_aside
from ocat.memory.storage.primary import StoreShrunk
from ocat.memory.storage.reconcile import sync_lexical, sync_prompts
from ocat.memory.storage.link_records import clear_links
from ocat.memory.storage.store import MemoryStore
from ocat.memory.storage.thread_titles import carry_titles_from_file, sync_titles
from ocat.records import RECORD_KINDS
from ocat.text.terminal import count_of

# Adds the chunks a partial document lacks, or says why it is kept as it is (ocat.memory.ingest.finishing).
Finish = Callable[[MemoryStore, PartialDocument], Finished]
# Dangling links a repair names one by one; the rest are counted.
NAMED_LINKS = 20


@dataclass(frozen=True)
class RepairResult:
    """What `--repair-store` did: no line of it deleted a memory."""

    # What was done to the derived files and titles, in words.
    done: list[str]
    finished_documents: list[str]
    # Partial documents kept as they are, each with why ("label: kept as it is: its file is gone").
    kept_documents: list[str]
    before: StoreHealth
    after: StoreHealth
    # Derived files moved aside (kept whole), by their new names.
    moved_aside: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What was done, in words."""
        lines = list(self.done)
        lines += [f"finished the partial document {name}" for name in self.finished_documents]
        lines += [f"the partial document {kept}" for kept in self.kept_documents]
        lines.append("healthy" if self.after.healthy else "still not healthy: " + "; ".join(self.after.lines()[1:]))
        return lines


def repair_store(
    store: MemoryStore,
    finish: Finish,
    *,
    notify: Callable[[str], None] | None = None,
    accept_smaller: bool = False,
    moved_before: list[str] | None = None,
) -> RepairResult:
    """Repair a store opened with `upkeep=False` (see the module's docstring); returns the
    repaired store's findings too. Raises StoreShrunk, changing nothing, when Chroma holds less
    than a derived file and `accept_smaller` is False; StoreError when a derived file cannot be
    moved or written (another user's, immutable), naming it."""
    before = check_store(store)
    if before.shrunk and not accept_smaller:
        raise StoreShrunk(before.path, before.shrunk)
    done: list[str] = []
    moved = list(moved_before or [])
    index = Path(before.derived[0].path)
    carried = carry_titles_from_file(store, index)
    if carried:
        done.append(f"wrote {count_of(carried, 'thread title')} that only the lexical index held into the store")
    for d in before.derived:
        if d.exists and (d.damaged or (before.shrunk and d.records)):
            why = "damaged" if d.damaged else "smaller-store"
            target = _moved(Path(d.path), why, d.what)
            moved.append(str(target))
            done.append(f"moved the {d.what} aside to {target} ({d.damaged or 'it listed records the store lost'})"
                        "; built it again from the store")
    whole = MemoryStore.reconciled(store.client, store.embedder, name=store.name, location=store.location,
                                   notify=notify)
    whole.lease, store.lease = store.lease, None
    try:
        done += _level(whole, before, moved)
        done += _clear_dangling(whole, before)
        finished, kept = [], []
        for partial in before.partial_documents:
            outcome = finish(whole, partial)
            if outcome.finished:
                finished.append(partial.label)
            else:
                kept.append(f"{partial.label} ({partial.stored_chunks} of {partial.total_chunks} chunks): "
                            f"{outcome.value}")
        after = check_store(whole)
    finally:
        whole.close()
    return RepairResult(done, finished, kept, before, after, moved)


def _clear_dangling(store: MemoryStore, before: StoreHealth) -> list[str]:
    """Clear the links whose newer version is gone (the older memory itself is kept, as it was),
    naming each; what was cleared in words."""
    dangling = before.links.dangling if before.links is not None else ()
    for kind in RECORD_KINDS:
        clear_links(store, kind, [old for of, old in dangling if of == kind])
    said = [f"cleared the link of the {kind} {old} to a newer version that is gone (the {kind} is kept)"
            for kind, old in dangling[:NAMED_LINKS]]
    if len(dangling) > NAMED_LINKS:
        said.append(f"cleared {count_of(len(dangling) - NAMED_LINKS, 'more dangling link')} the same way")
    return said


def _moved(path: Path, why: str, what: str) -> Path:
    try:
        return move_aside(path, why=why)
    except OSError as exc:
        raise StoreError(
            f"cannot move the {what} {path} aside: {exc.strerror or exc}; it may belong to another user "
            "(`ls -l`) or be immutable (`lsattr`): fix that and run the repair again (nothing was deleted)"
        ) from exc


def _level(store: MemoryStore, before: StoreHealth, moved: list[str]) -> list[str]:
    """Bring the sound derived files that disagreed with Chroma level, in place; what was done."""
    done = []
    for d in before.derived:
        if not d.exists or d.damaged or d.healthy or any(m.startswith(d.path) for m in moved):
            continue
        try:
            if d.what == "lexical index":
                sync_titles(store, rebuilt=sync_lexical(store, force=True))
                done.append(f"rebuilt the {d.what} {d.path} in place ({d.orphans} orphaned, {d.missing} missing)")
            elif sync_prompts(store, store.notify, force=True):
                done.append(f"brought the {d.what} {d.path} level ({d.orphans} orphaned, {d.missing} missing)")
            else:
                done.append(f"left the {d.what} {d.path} as it is: the embedding model is not on this machine "
                            "(`ocat --fetch-model`, then repair again)")
        except DerivedFileError as exc:
            done.append(f"could not bring the {d.what} level: {exc}")
    return done


def set_aside_derived(folder: Path) -> list[str]:
    """A folder whose chroma.sqlite3 is missing or empty, the user having accepted the smaller
    store: move every derived file beside it aside (kept whole, as the traces of what the store
    held), so the store opens empty. Returns the new names."""
    moved = []
    for path in sorted([*folder.glob("ocat-lexical-*.sqlite3"), *folder.glob("ocat-prompts-*.sqlite3")]):
        moved.append(str(_moved(path, "smaller-store", "derived file")))
    return moved
