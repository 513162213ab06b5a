"""Keeping one machine's derived data level with a store that other machines write: by reading
what changed, never the whole store again.

Three ways, cheapest first:
- each search asks the change log's count (one small request); when other machines logged
  changes, it reads those entries and applies them: the records added or updated are read by id
  into the lexical index and the thread catalogue, with their vectors from the shared collection
  (ocat.memory.storage.shared_sides); deleted ids leave both; a thread's new title is copied;
- opening a store whose index counts differ from Chroma's compares ids (ids alone are cheap to
  read) and reads only the records missing here, and drops those gone there;
- a prompt vector missing here is read from the shared collection, and embedded only when no
  machine shared it (then shared, for the next one).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ocat.errors import StoreError
from ocat.memory.storage.batches import Row, batches
from ocat.memory.storage.derived import DerivedFileError
from ocat.records import RecordKind

if TYPE_CHECKING:
    from ocat.memory.storage.change_log import Change
    from ocat.memory.storage.parts import StoreParts

# The lexical index's record of how many change log entries it has applied.
SEEN_KEY = "changes_seen"
# Records read from Chroma per request when levelling.
LEVEL_PAGE = 500

_log = logging.getLogger(__name__)


def keep_current(store: StoreParts) -> bool:
    """Catch up with what other machines changed since this one last looked (before a search);
    True if something was applied. One small request when nothing changed; a store without a change
    log (a local folder) costs nothing. A failure is logged and left for the next search: the search
    goes on with what this machine has."""
    log = store.changes
    if log is None or not log.following.acquire(blocking=False):
        return False  # another search of this process is catching up already
    try:
        total = log.count()
        seen = seen_changes(store)
        if total == seen:
            return False
        if total < seen:  # the log was made again (a server restored): compare ids instead
            for kind in ("exchange", "document"):
                level_by_ids(store, kind)
        else:
            apply_changes(store, log.since(seen, total))
        store.lexical.set_meta(SEEN_KEY, str(total))
        return True
    except DerivedFileError as exc:
        store.derived_failed(exc)
    except StoreError:
        _log.warning("catching up with the memory server failed; the next search tries again", exc_info=True)
    finally:
        log.following.release()
    return False


def seen_changes(store: StoreParts) -> int:
    """How many change log entries this machine's derived data has applied."""
    value = store.lexical.get_meta(SEEN_KEY)
    return int(value) if value and value.isdigit() else 0


def mark_level(store: StoreParts) -> None:
    """Record that this machine's derived data holds every change logged so far (after opening
    levelled it by ids): the log's count is read before, so a change logged meanwhile is applied
    again by the next search, which is harmless (applying is idempotent)."""
    if store.changes is not None:
        store.lexical.set_meta(SEEN_KEY, str(store.changes.count()))


def apply_changes(store: StoreParts, changes: Iterable[Change]) -> None:
    """Apply logged changes in order (each is idempotent: this machine's own come back too)."""
    for change in changes:
        if change.kind not in ("exchange", "document"):
            continue
        kind: RecordKind = "exchange" if change.kind == "exchange" else "document"
        if change.op == "delete":
            if kind == "exchange":
                store.prompts.delete(list(change.ids))
            store.lexical.delete(kind, list(change.ids))
        elif change.op in ("add", "update"):
            take_records(store, kind, list(change.ids), replace=change.op == "update")
        elif change.op == "title":
            store.threads.set_title(change.thread, change.title or None)


def take_records(store: StoreParts, kind: RecordKind, ids: Sequence[str], *, replace: bool = False) -> None:
    """Read records by id from Chroma into this machine's derived data (those it has already are
    skipped, unless `replace`: an update, which takes their new text and vectors)."""
    if not replace:
        ids = store.lexical.missing(kind, ids) + (store.prompts.missing(ids) if kind == "exchange" else [])
        ids = list(dict.fromkeys(ids))
    for part in batches(ids, LEVEL_PAGE):
        got = store.fetch(kind, part, vectors=False)
        rows = _rows(got)
        if replace:
            store.lexical.delete(kind, got["ids"])
            if kind == "exchange":
                store.prompts.delete(got["ids"])
        store.lexical.add(kind, rows)
        if kind == "exchange":
            fill_prompts(store, store.prompts.missing(got["ids"]), rows)


def level_by_ids(store: StoreParts, kind: RecordKind) -> None:
    """Make the lexical index hold exactly the records Chroma holds, by comparing ids: the records
    missing here are read, those gone there are dropped; nothing else is read."""
    local = store.lexical.ids(kind)
    there: set[str] = set()
    missing: list[str] = []
    for record_id in store.iter_ids(kind):
        there.add(record_id)
        if record_id not in local:
            missing.append(record_id)
    store.lexical.delete(kind, list(local - there))
    for part in batches(missing, LEVEL_PAGE):
        store.lexical.add(kind, _rows(store.fetch(kind, part, vectors=False)))


def fill_prompts(store: StoreParts, ids: Sequence[str], rows: Sequence[Row] | None = None) -> int:
    """Give exchanges their prompt vectors: read from the shared collection where a machine shared
    them (with their passages, when made), else embedded here from their prompts (read from
    Chroma unless `rows` hold them) and shared. Returns how many were embedded here."""
    if not ids:
        return 0
    shared = store.sides.get(ids) if store.sides is not None else {}
    made = [i for i in ids if i in shared and shared[i][1] is not None]
    waiting = [i for i in ids if i in shared and shared[i][1] is None]
    if made:
        store.prompts.write(made, [shared[i][0] for i in made], [shared[i][1] or [] for i in made])
    if waiting:
        store.prompts.write(waiting, [shared[i][0] for i in waiting])
    todo = [i for i in ids if i not in shared]
    if not todo:
        return 0
    known = {row[0]: row for row in rows or []}
    if any(i not in known for i in todo):
        known.update((row[0], row) for row in _rows(store.fetch("exchange", todo, vectors=False)))
    todo = [i for i in todo if i in known]
    vectors = store.embedder.embed([str(known[i][2].get("user_prompt", "")) for i in todo])
    store.prompts.write(todo, vectors)
    share(store, todo, vectors, [None] * len(todo))
    return len(todo)


def _rows(got: dict[str, Any]) -> list[Row]:
    """A fetch's records as rows (id, text, metadata)."""
    return [(i, t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])]


def share(store: StoreParts, ids: Sequence[str], prompts: Sequence[Sequence[float]],
          passages: Sequence[Sequence[Sequence[float]] | None]) -> None:
    """Put vectors made here in the shared collection, when the store has one. A failure costs the
    write nothing (the records are stored): another machine then embeds them for itself."""
    if store.sides is None or not ids:
        return
    try:
        store.sides.put(ids, prompts, passages)
    except StoreError:
        _log.warning("sharing vectors with the memory server failed", exc_info=True)


def log_change(store: StoreParts, op: str, kind: RecordKind, ids: Sequence[str] = (), *, thread: str = "",
               title: str | None = None) -> None:
    """Log a change for the other machines, when the store has a change log. A failure costs the
    change nothing: the others find it when they next open (by ids) instead of at their next search."""
    if store.changes is None:
        return
    try:
        store.changes.record(op, kind, ids, thread=thread, title=title)
    except StoreError:
        _log.warning("logging a change on the memory server failed", exc_info=True)
