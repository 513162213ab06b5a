"""The memory browser's operations: list or search what a store holds, show one entry whole,
delete entries, export a thread.

The full-screen memory browser (ocat.ui.memory_browser) calls these and only renders. An
entry is what a person thinks of as one thing: a thread, an exchange, a note, a document
(every chunk of one file), or, when searching, the passage of a document that matched.

Listing reads the lexical index for threads and the newest exchanges (indexed, no Chroma
scan); notes and documents are read page by page from the store and grouped by document.
Searching is the explicit search `/vquery` uses (ocat.operations.search), with the browser's
filters as the search's own filters, so the scores agree with `/vquery`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ocat.records import DocumentChunk, Exchange, RecordKind, SearchHit, source_word
from ocat.text.terminal import count_of, local_time, shorten
from ocat import memory
from ocat.errors import UsageError
from ocat.operations.forks import link_lines
from ocat.operations.versions import shown_record, unlink, versions_markdown
from ocat.operations.lookup import get_record, recent_threads, record_details, record_markdown
from ocat.operations.search import search
from ocat.operations.threads import (
    conversation_markdown,
    default_title,
    delete_thread,
    export_conversation,
    thread_title,
)

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.config.settings import VectorStoreSettings

# What the browser can show, in the order the kind filter steps through them.
KINDS = ("all", "thread", "exchange", "note", "document")
KIND_WORDS = {"all": "everything", "thread": "threads", "exchange": "exchanges", "note": "notes",
              "document": "documents"}
# How far back the date filter reaches, in the order it steps through them.
PERIODS = {"any time": None, "today": 1, "this week": 7, "this month": 31, "this year": 366}
# Where a memory came from, in words (as /vget and /vquery say it), in the order the source filter steps.
SOURCES = ("any source", "chat", "note", "file", "MCP", "import")
# Which project's threads and exchanges: every one, or the chat's own (notes and documents are no project's).
PROJECTS = ("any project", "this project")
# The most entries one listing holds: a screenful many times over; search narrows the rest.
LISTED = 300
# A search shows at least this many hits, and past them only those scoring at least FAINT_SCORE
# (calibrated relevance: below it a memory shares a word or two with the query, not its subject).
ALWAYS_SHOWN = 5
FAINT_SCORE = 0.1
# The kind of record a search reads for each kind of entry (None: both).
_SEARCHED_KIND: dict[str, RecordKind] = {"thread": "exchange", "exchange": "exchange", "note": "document",
                                         "document": "document"}
# A search returns this many hits before the filters that search cannot apply (source).
SEARCHED = 60


@dataclass(frozen=True)
class Filters:
    """What the browser shows: one kind (or all), how recent, from which source, of which project."""

    kind: str = "all"
    period: str = "any time"
    source: str = "any source"
    project: str = "any project"
    # The chat's project, which "this project" keeps to.
    here: str = ""

    def keeps(self, entry: Entry) -> bool:
        """Whether `entry` passes the source and project filters."""
        if self.source != "any source" and entry.source != self.source:
            return False
        return self.project == "any project" or memory.belongs(entry.project, self.here)

    def since(self, now: float | None = None) -> float | None:
        """The oldest time the period keeps (local midnight `days - 1` days ago), or None for any time."""
        days = PERIODS[self.period]
        if days is None:
            return None
        moment = time.localtime(now if now is not None else time.time())
        midnight = time.mktime((moment.tm_year, moment.tm_mon, moment.tm_mday, 0, 0, 0, 0, 0, -1))
        return midnight - (days - 1) * 86400

    def stepped(self, which: str) -> Filters:
        """These filters with `which` ("kind", "period", "source" or "project") moved on to its next value."""
        order = {"kind": KINDS, "period": tuple(PERIODS), "source": SOURCES, "project": PROJECTS}[which]
        current = getattr(self, which)
        return replace(self, **{which: order[(order.index(current) + 1) % len(order)]})


@dataclass(frozen=True)
class Entry:
    """One line of the browser: a thread, an exchange, a note, a document, or a matching passage."""

    kind: str  # "thread", "exchange", "note", "document" (a whole file) or "passage" (one chunk of it)
    key: str  # the thread id, the record id, or a document's id
    title: str
    when: float | None
    source: str  # in words: chat, note, file, MCP, import
    # Exchanges in a thread, chunks in a document; 1 otherwise.
    size: int = 1
    # The search score (rounded down where shown), when the entry was found by a search.
    score: float | None = None
    admitted: bool = False
    # The thread an exchange belongs to ("" for the rest), so it can be opened.
    thread_id: str = ""
    # The project of a thread or an exchange ("" for a global one, a note, a document).
    project: str = ""

    @property
    def date(self) -> str:
        """The entry's local date and time, or "-"."""
        return local_time(self.when)

    @property
    def opens_thread(self) -> str:
        """The thread Enter continues: a thread's own id, an exchange's thread; "" for the rest."""
        return self.key if self.kind == "thread" else self.thread_id


def browse(store: MemoryStore, filters: Filters, *, limit: int = LISTED) -> list[Entry]:
    """The newest entries that pass `filters`, newest first: threads, exchanges, notes, documents."""
    since = filters.since()
    wanted = (filters.kind,) if filters.kind != "all" else ("thread", "note", "document")
    entries: list[Entry] = []
    chat_allowed = filters.source in ("any source", "chat")
    if "thread" in wanted and chat_allowed:
        entries += _threads(store, since, limit)
    if "exchange" in wanted and chat_allowed:
        entries += _exchanges(store, store.threads.recent_exchanges(limit, since))
    if "note" in wanted or "document" in wanted:
        entries += [e for e in _documents(store, since) if e.kind in wanted]
    entries = [e for e in entries if filters.keeps(e)]
    entries.sort(key=lambda e: e.when or 0.0, reverse=True)
    return entries[:limit]


def search_entries(
    store: MemoryStore, query: str, filters: Filters, settings: VectorStoreSettings, *, count: int = SEARCHED
) -> list[Entry]:
    """What `query` finds under `filters`, best first (the search `/vquery` makes). Threads are
    listed by their best exchange's score."""
    since = filters.since()
    kind: RecordKind | None = _SEARCHED_KIND.get(filters.kind)
    conditions = (memory.Condition("date", "$gte", since),) if since is not None else ()
    result = search([store], query, settings, count=count, filters=memory.Filters(conditions=conditions, kind=kind))
    entries = [_hit_entry(found.hit) for found in result.found]
    # Past the first few, hits that barely relate only bury the ones that do.
    entries = entries[:ALWAYS_SHOWN] + [e for e in entries[ALWAYS_SHOWN:] if (e.score or 0.0) >= FAINT_SCORE]
    entries = [e for e in entries if filters.keeps(e)]
    if filters.kind == "note":
        entries = [e for e in entries if e.kind == "note"]
    elif filters.kind == "document":
        entries = [e for e in entries if e.kind == "passage"]
    if filters.kind != "thread":
        return entries
    return _best_per_thread(store, entries)


def entry_markdown(store: MemoryStore, entry: Entry) -> str:
    """The entry's whole text as Markdown, under a line of what it is: a thread's conversation,
    an exchange's prompt and answer, a note, every chunk of a document in order."""
    if entry.kind == "thread":
        exchanges = store.get_thread(entry.key)
        text = conversation_markdown(thread_title(store, entry.key, exchanges), exchanges)
        older, named = memory.linked_keys(store, "exchange", [e.exchange_id for e in exchanges])
        text += "".join(versions_markdown(store, e.exchange_id) for e in exchanges
                        if e.exchange_id in older | named)  # its exchanges that have versions
        links = link_lines(store, entry.key, exchanges)  # where a fork came from, and its forks
        if not links:
            return text
        heading, rest = text.split("\n", 1)
        return "\n\n".join([heading, *links]) + "\n" + rest
    if entry.kind == "document":
        chunks = _document_chunks(store, entry.key)
        head = f"# {entry.title}\n\n{count_of(len(chunks), 'chunk')}, added {entry.date}\n\n"
        versions = versions_markdown(store, chunks[0].id) if chunks else ""
        return head + "\n\n".join(chunk.text for chunk in chunks) + "\n" + versions
    record = get_record(store, entry.key)
    details = " · ".join(f"{what} {value}" for what, value in record_details(record) if what != "id")
    return f"{details}\n\n{record_markdown(record)}{versions_markdown(store, entry.key)}"


@dataclass(frozen=True)
class Deleted:
    """What deleting entries removed: how many memories, and which threads went whole."""

    memories: int
    threads: tuple[str, ...]

    def sentence(self) -> str:
        """'Deleted 7 memories (2 threads).'"""
        threads = f" ({count_of(len(self.threads), 'thread')})" if self.threads else ""
        return f"Deleted {count_of(self.memories, 'memory', 'memories')}{threads}."


def delete_entries(store: MemoryStore, entries: Sequence[Entry]) -> Deleted:
    """Delete every memory the entries stand for: a thread's exchanges (and its title), a
    document's chunks, an exchange, a note, a passage."""
    ids: list[str] = []
    threads: list[str] = []
    removed = 0
    for entry in entries:
        if entry.kind == "thread":
            try:
                removed += delete_thread(store, entry.key).exchanges  # its exchanges and its title
            except UsageError:
                continue  # gone already (another process, or an exchange of it listed too)
            threads.append(entry.key)
        elif entry.kind == "document":
            ids += [chunk.id for chunk in _document_chunks(store, entry.key)]
        else:
            ids.append(entry.key)
    removed += store.delete(list(dict.fromkeys(ids)))
    return Deleted(removed, tuple(threads))


def export_entry(store: MemoryStore, entry: Entry, folder: Path | None = None) -> tuple[Path, int]:
    """Write the thread an entry opens (a thread, or an exchange's thread) as Markdown into
    `folder` (default: the current folder), named after its title; returns the file and how
    many exchanges it holds."""
    if not entry.opens_thread:
        raise UsageError("only a thread (or an exchange of one) is exported as a conversation; c copies this")
    exchanges = store.get_thread(entry.opens_thread)
    if not exchanges:
        raise UsageError("this thread is no longer in memory")
    title = thread_title(store, entry.opens_thread, exchanges)
    return export_conversation(title, exchanges, str(folder) if folder else None), len(exchanges)


# -- reading -------------------------------------------------------------------------------


def _threads(store: MemoryStore, since: float | None, limit: int) -> list[Entry]:
    return [
        Entry("thread", t.thread_id, t.title, t.last_active, "chat", size=t.exchanges, project=t.project)
        for t in recent_threads(store, limit)
        if since is None or t.last_active >= since
    ]


def _exchanges(store: MemoryStore, ids: Sequence[str]) -> list[Entry]:
    got = store.fetch("exchange", ids, vectors=False)
    by_id = {i: Exchange.from_metadata(m or {}) for i, m in zip(got["ids"], got["metadatas"])}
    return [_exchange_entry(by_id[i]) for i in ids if i in by_id]


def _exchange_entry(exchange: Exchange, score: float | None = None, admitted: bool = False) -> Entry:
    return Entry("exchange", exchange.exchange_id, default_title(exchange.user_prompt), exchange.timestamp, "chat",
                 score=score, admitted=admitted, thread_id=exchange.thread_id, project=exchange.project)


def _documents(store: MemoryStore, since: float | None) -> list[Entry]:
    """Every note, and every document as one entry (its chunks grouped by their document id)."""
    notes: list[Entry] = []
    files: dict[str, dict[str, object]] = {}
    sizes: dict[str, int] = {}
    for record in store.iter_records("document"):
        if not isinstance(record, DocumentChunk):
            continue
        meta = record.metadata
        added = _number(meta.get("date_added"))
        if since is not None and (added is None or added < since):
            continue
        where = str(meta.get("source_file") or meta.get("source_path") or "")
        if not where:
            notes.append(Entry("note", record.id, default_title(record.text), added, source_word(meta)))
            continue
        key = str(meta.get("document_id") or where)
        sizes[key] = sizes.get(key, 0) + 1
        files.setdefault(key, {"where": where, "added": added, "source": source_word(meta)})
    documents = [
        Entry("document", key, Path(str(info["where"])).name or str(info["where"]), _number(info["added"]),
              str(info["source"]), size=sizes[key])
        for key, info in files.items()
    ]
    return notes + documents


def _document_chunks(store: MemoryStore, document_key: str) -> list[DocumentChunk]:
    """A document's chunks in order (by its id; a document stored without one, by its file)."""
    chunks = store.documents_where({"document_id": document_key}) or store.documents_where(
        {"source_file": document_key})
    return sorted(chunks, key=lambda c: _number(c.metadata.get("chunk_index")) or 0.0)


def _hit_entry(hit: SearchHit) -> Entry:
    """A search hit as an entry: an exchange, a note, or a passage of a document."""
    if hit.kind == "exchange":
        return _exchange_entry(Exchange.from_metadata(hit.metadata), hit.score, hit.admitted)
    meta = hit.metadata
    where = str(meta.get("source_file") or meta.get("source_path") or "")
    kind = "passage" if where else "note"
    title = default_title(hit.text)
    if where:
        title = f"{Path(where).name}: {title}"
    return Entry(kind, hit.id, title, hit.timestamp, source_word(meta), score=hit.score, admitted=hit.admitted)


def _best_per_thread(store: MemoryStore, entries: list[Entry]) -> list[Entry]:
    """Exchanges found by a search, as their threads, each at its best exchange's score."""
    best: dict[str, Entry] = {}
    for entry in entries:
        if entry.thread_id and entry.thread_id not in best:
            best[entry.thread_id] = entry
    known = {t.thread_id: t for t in recent_threads(store, len(best), only=list(best))}
    found = []
    for thread_id, entry in best.items():
        summary = known.get(thread_id)
        found.append(Entry("thread", thread_id, summary.title if summary else entry.title,
                           summary.last_active if summary else entry.when, "chat",
                           size=summary.exchanges if summary else 1, score=entry.score, admitted=entry.admitted,
                           project=entry.project))
    return found


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def described(entries: Sequence[Entry]) -> str:
    """'the thread 'Garden' (2 exchanges)', or '3 entries: 1 thread, 2 notes'."""
    if len(entries) == 1:
        entry = entries[0]
        return f"the {entry.kind} {shorten(entry.title, 50)!r}" + (
            f" ({count_of(entry.size, 'exchange' if entry.kind == 'thread' else 'chunk')})" if entry.size > 1 else "")
    kinds: dict[str, int] = {}
    for entry in entries:
        kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
    return f"{len(entries)} entries: " + ", ".join(count_of(n, kind) for kind, n in kinds.items())


def unlink_entry(store: MemoryStore, entry: Entry) -> str:
    """Undo the link of an entry's memory to a newer version (the browser's key), in words."""
    target = shown_record("document", entry.key) if entry.kind == "document" else entry.key
    if entry.kind == "thread":  # its one outdated exchange, if it has one
        ids = [e.exchange_id for e in store.get_thread(entry.key)]
        older = [i for i in ids if i in memory.linked_keys(store, "exchange", ids)[0]]
        if len(older) != 1:
            return (f"This thread holds {count_of(len(older), 'outdated exchange')}: type a search to list its "
                    "exchanges, and unlink the one you mean." if older else "Nothing in this thread is linked to a "
                    "newer version; nothing was changed.")
        target = older[0]
    done = unlink(store, target)
    what = "exchange" if entry.kind == "thread" else entry.kind
    if done.newer is None:
        return f"The {what} is not linked to a newer version; nothing was changed."
    return f"The {what} is no longer an outdated version of {done.newer[:12]}."
