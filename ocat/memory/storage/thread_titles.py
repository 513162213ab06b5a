"""Thread titles: user data, kept in Chroma on every exchange of the thread, with a copy in the
lexical index for listing that is rebuilt from Chroma whenever the index is.

`/rename` and an import name a thread through `set_thread_title`; a new exchange of a titled
thread carries the title (`carry_titles`, from the store's write path); opening a store keeps
the copy level (`sync_titles`), and moves the titles of a store made by an older ocat, which
kept them in the index alone, into Chroma once.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, cast

from ocat.errors import StoreError
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.remote_sync import log_change
from ocat.records import THREAD_TITLE_KEY

if TYPE_CHECKING:
    from chromadb.api.types import Metadata, Where

    from ocat.memory.storage.batches import Row
    from ocat.memory.storage.parts import StoreParts

# How many exchanges one Chroma update names.
UPDATE_BATCH = 256


def carry_titles(store: StoreParts, rows: list[Row], given: Mapping[str, str] | None = None) -> None:
    """A new exchange of a titled thread carries the title, as the thread's others do (read from
    the lexical index's copy; when that cannot be read, the title stays on the thread's others);
    one of a thread without a title carries the one `given` for it (an import's), if any."""
    try:
        titles = store.threads.titles(list({str(row[2].get("thread_id", "")) for row in rows}))
    except DerivedFileError as exc:
        store.derived_failed(exc)
        titles = {}
    for _, _, metadata in rows:
        thread_id = str(metadata.get("thread_id", ""))
        title = titles.get(thread_id) or (given or {}).get(thread_id)
        if title and THREAD_TITLE_KEY not in metadata:
            metadata[THREAD_TITLE_KEY] = title


def set_thread_title(store: StoreParts, thread_id: str, title: str | None) -> int:
    """Name a thread (None: drop its name) where the thread lives: every exchange of it carries
    the title in Chroma, and the lexical index keeps a copy for listing. Returns how many
    exchanges carry it."""
    try:
        ids = list(store.exchanges.get(where={"thread_id": thread_id}, include=[])["ids"])
        for start in range(0, len(ids), UPDATE_BATCH):
            part = ids[start : start + UPDATE_BATCH]
            # Chroma merges an update into the stored metadata; None removes the key.
            update = cast("list[Metadata]", [{THREAD_TITLE_KEY: title} for _ in part])
            store.exchanges.update(ids=part, metadatas=update)
    except Exception as exc:
        raise StoreError(f"cannot name the thread in the memory store: {exc}") from exc
    store.threads.set_title(thread_id, title)
    log_change(store, "title", "exchange", thread=thread_id, title=title)  # for the other machines of a server
    return len(ids)


# Set in the lexical index once its titles are known to be in Chroma too.
TITLES_IN_STORE = "titles_in_store"


def sync_titles(store: StoreParts, *, rebuilt: bool) -> None:
    """Keep thread titles in the primary store, and their copy in the lexical index level with it.

    A store from before titles lived in Chroma has them only in the index: they are written
    into Chroma once (a title given since, there, is kept). When the index was rebuilt (or
    deleted), its copy is made again from Chroma.
    """
    lexical = store.lexical
    upgrading = lexical.get_meta(TITLES_IN_STORE) is None
    if upgrading:
        present = _stored_titles(store)
        for thread_id, title in lexical.threads.all_titles().items():
            if thread_id not in present:
                set_thread_title(store, thread_id, title)
    if rebuilt or upgrading:
        lexical.threads.replace_titles(_stored_titles(store))
        lexical.set_meta(TITLES_IN_STORE, "1")


def titled_threads(store: StoreParts, thread_ids: list[str]) -> set[str]:
    """Which of these threads have a title in Chroma (one filtered read of ids and metadata)."""
    if not thread_ids:
        return set()
    try:
        got = store.exchanges.get(where=cast("Where", {"$and": [{"thread_id": {"$in": thread_ids}},
                                                               {THREAD_TITLE_KEY: {"$ne": ""}}]}),
                                  include=["metadatas"])
    except Exception as exc:
        raise StoreError(f"cannot read the memory store: {exc}") from exc
    return {str(m.get("thread_id")) for m in got["metadatas"] or [] if m and m.get(THREAD_TITLE_KEY)}


def carry_titles_from_file(store: StoreParts, index: Path) -> int:
    """Before a repair moves or rebuilds a lexical index: the titles an index made by an older
    ocat holds alone (it never recorded TITLES_IN_STORE) are written into Chroma, for the threads
    Chroma has no title for. Read-only, and as far as a damaged file allows; how many were written."""
    if not index.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            carried = db.execute("SELECT value FROM meta WHERE key = ?", (TITLES_IN_STORE,)).fetchone()
            rows = [] if carried else db.execute("SELECT thread_id, title FROM thread_titles").fetchall()
        finally:
            db.close()
    except sqlite3.Error:  # too damaged to tell: whatever it held cannot be read by anyone
        return 0
    present = _stored_titles(store) if rows else {}
    written = 0
    for thread_id, title in rows:
        if str(thread_id) not in present and title:
            written += bool(set_thread_title(store, str(thread_id), str(title)))
    return written


def _stored_titles(store: StoreParts) -> dict[str, str]:
    """Every thread's title as Chroma holds it (the newest exchange's, should they differ)."""
    newest: dict[str, tuple[float, str]] = {}
    for _, metadata in store.iter_metadata("exchange"):
        title, thread_id = metadata.get(THREAD_TITLE_KEY), metadata.get("thread_id")
        if isinstance(title, str) and title and isinstance(thread_id, str):
            when = metadata.get("timestamp")
            stamp = float(when) if isinstance(when, (int, float)) and not isinstance(when, bool) else 0.0
            if thread_id not in newest or stamp >= newest[thread_id][0]:
                newest[thread_id] = (stamp, title)
    return {thread_id: title for thread_id, (_, title) in newest.items()}
