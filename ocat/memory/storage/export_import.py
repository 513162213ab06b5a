"""Export and import of memory as JSON Lines, streamed so any size fits in bounded memory.

Exchanges are `{"kind": "exchange", <the nine exchange fields>}`; document chunks are
`{"kind": "document", "id", "text", "metadata"}`; the titles given to exported threads
(/rename) are `{"kind": "thread", "thread_id", "title"}`, then pins, then the links between
versions of a fact that exchanges hold, `{"kind": "link", "older", "newer", "how", "evidence"}`
(a note's link is in its chunks' metadata); a file without them imports as ever. Import
re-embeds with the store's own model, which is also how memory moves to a new embedding model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

from ocat.errors import InputFileError, StoreError, UsageError
from ocat.text.limits import MAX_TITLE_CHARS
from ocat.config.locations import cache_dir
from ocat.memory.storage.export_lines import LATEST_TIME, Line, Link, Pin, ThreadTitle, parse_line
from ocat.memory.storage.link_records import HOWS, link_of
from ocat.memory.storage.versions import restore_links
from ocat.memory.storage.store import WRITE_BATCH, MemoryStore
from ocat.memory.storage.thread_titles import set_thread_title
from ocat.records import PINNED_KEY, RECORD_KINDS, THREAD_TITLE_KEY, DocumentChunk, Exchange
from ocat.text.terminal import clean_title, unprintable_escaped
from ocat.memory.storage.pins import pinned, set_pinned

# How long an import waits for another one's batch (a batch takes seconds) before giving up.
LOCK_WAIT_SECONDS = 600
# Thread ids per query when an import looks up titles (SQLite caps a query's parameters).
_TITLE_BATCH = 500


@dataclass(frozen=True)
class TransferResult:
    """How many records an export wrote or an import read and added, and the thread titles with them."""

    path: str
    exchanges: int
    documents: int
    added: int = 0
    # Thread titles written (export) or in the file (import), and those an import gave a thread.
    titles: int = 0
    titles_added: int = 0

    @property
    def records(self) -> int:
        """Exchanges plus documents."""
        return self.exchanges + self.documents


def export_memory(store: MemoryStore, out: IO[str], *, path: str = "-") -> TransferResult:
    """Write every exchange, then every document chunk, then the titles of the exported
    threads that have one, one JSON object per line.

    Read from the primary store alone: the titles too come from the exchanges' metadata, so a
    missing or damaged derived file never stops an export.
    """
    counts = {"exchange": 0, "document": 0}
    titles: dict[str, tuple[float, str]] = {}  # one entry per titled thread: small beside the store
    pins: dict[str, float] = {}  # the pinned memories: a few
    links: list[dict[str, str]] = []  # the links between exchanges (a note's are in its chunks' metadata)
    for _, metadata in store.iter_metadata("exchange"):
        exchange = Exchange.from_metadata(metadata)
        out.write(json_line(_to_line(exchange)))
        counts["exchange"] += 1
        _note_pin(pins, exchange.exchange_id, metadata)
        _note_link(links, exchange.exchange_id, metadata)
        title = metadata.get(THREAD_TITLE_KEY)
        if isinstance(title, str) and title and exchange.timestamp >= titles.get(exchange.thread_id, (-1.0, ""))[0]:
            titles[exchange.thread_id] = (exchange.timestamp, title)
    for record in store.iter_records("document"):
        out.write(json_line(_to_line(record)))
        counts["document"] += 1
        if isinstance(record, DocumentChunk):
            _note_pin(pins, record.id, record.metadata)
    for thread_id, (_, title) in sorted(titles.items()):
        # The import rule, applied here too: a title an older ocat stored with controls in it
        # is written as it would be read back.
        cleaned = clean_title(title)[:MAX_TITLE_CHARS]
        if cleaned:
            out.write(json_line({"kind": "thread", "thread_id": thread_id, "title": cleaned}))
    for record_id, when in sorted(pins.items()):
        out.write(json_line({"kind": "pin", "id": record_id, "pinned_at": when}))
    for link in links:
        out.write(json_line(link))
    out.flush()
    return TransferResult(path=path, exchanges=counts["exchange"], documents=counts["document"], titles=len(titles))


def _note_pin(pins: dict[str, float], record_id: str, metadata: dict[str, Any]) -> None:
    """Keep a record's pin for the export, when it has one ocat could have made."""
    when = metadata.get(PINNED_KEY)
    # A pin import refuses (at or before 1970) is not written: export never writes what import refuses.
    if isinstance(when, (int, float)) and not isinstance(when, bool) and 0 < when <= LATEST_TIME:
        pins[record_id] = float(when)


def _note_link(links: list[dict[str, str]], record_id: str, metadata: dict[str, Any]) -> None:
    """Keep an exchange's link for the export, when it has one import takes back."""
    link = link_of(metadata)
    if link is not None and link[2] in HOWS and link[0] != record_id:
        links.append({"kind": "link", "older": record_id, "newer": link[0], "how": link[2], "evidence": link[1]})


def json_line(record: dict[str, Any]) -> str:
    """One record as a line of JSON that is safe to `cat` to a terminal: besides the control
    characters JSON escapes itself, DEL, the C1 controls and the bidirectional overrides are
    written as \\u escapes too (they read back as the same characters)."""
    return unprintable_escaped(json.dumps(record, ensure_ascii=False)) + "\n"


def _to_line(record: Exchange | DocumentChunk) -> dict[str, Any]:
    if isinstance(record, Exchange):
        return {"kind": "exchange", **record.to_record()}
    # Sorted keys make two exports of the same memory byte-identical.
    return {"kind": "document", "id": record.id, "text": record.text, "metadata": dict(sorted(record.metadata.items()))}


__all__ = ["ThreadTitle", "TransferResult", "check_import_file", "export_memory", "import_memory", "json_line",
           "parse_line"]


def check_import_file(path: Path) -> TransferResult:
    """Read a JSONL file through and check every line, writing nothing: how many exchanges and
    documents it holds, or an InputFileError naming the first bad line."""
    counts = {"exchange": 0, "document": 0, "thread": 0, "pin": 0, "link": 0}
    for _, record in _records(path):
        counts[_kind(record)] += 1
    return TransferResult(
        path=str(path), exchanges=counts["exchange"], documents=counts["document"], titles=counts["thread"]
    )


def import_memory(
    store: MemoryStore,
    path: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    checked: TransferResult | None = None,
) -> TransferResult:
    """Import a JSONL file whole or not at all: every line is checked (a first pass over the
    file, unless `checked` is that pass's result) before the first write, so a bad line
    anywhere writes nothing.

    Records already in the store (same id) are skipped, so an interrupted import can
    simply be run again; `added` counts only the records this import stored.
    `progress(done, total)` follows the records as they are written.

    A thread title in the file names its thread when the file holds that thread's exchanges
    and the thread has no title in the store yet (a title given since is kept, as a stored
    record is).
    """
    checked = checked or check_import_file(path)
    total = checked.records
    added = done = 0
    lock = _write_lock(store)
    threads: set[str] = set()
    pins: dict[str, float] = {}  # the file's pins, noted on the way (a few): no pass of their own
    links: dict[str, Link] = {}  # and its links between exchanges, by the older one

    def of_kind(kind: str) -> Iterator[Line]:
        for _, record in _records(path):
            if isinstance(record, Pin):
                pins[record.id] = record.pinned_at
            elif isinstance(record, Link):
                links[record.older] = record
            elif _kind(record) == kind:
                yield record

    # A second pass writes (rather than one list held in memory), exchanges first, then documents.
    for kind in RECORD_KINDS:
        for batch in _batches(of_kind(kind), WRITE_BATCH):
            threads.update(r.thread_id for r in batch if isinstance(r, Exchange))
            # Checking which ids are stored and writing the rest is one step under the lock: two
            # imports of one file through a shared store would otherwise both count a batch as added.
            added += _write_locked(store, batch, lock)
            done += len(batch)
            if progress:
                progress(done, total)
    titles_added = _restore_titles(store, path, threads) if checked.titles else 0
    if pins:
        _restore_pins(store, pins)
    if links:
        restore_links(store, [(k.older, k.newer, k.how, k.evidence) for k in links.values()])
    return TransferResult(
        path=str(path), exchanges=checked.exchanges, documents=checked.documents, added=added,
        titles=checked.titles, titles_added=titles_added,
    )


def _restore_titles(store: MemoryStore, path: Path, threads: set[str]) -> int:
    """Give the file's threads their titles (the last one for a thread, if it has several); how many were given."""
    titles = {r.thread_id: r.title for _, r in _records(path) if isinstance(r, ThreadTitle) and r.thread_id in threads}
    given = 0
    for batch in _batches(sorted(titles), _TITLE_BATCH):
        named = store.threads.titles(batch)
        for thread_id in batch:
            if thread_id not in named:
                set_thread_title(store, thread_id, titles[thread_id])
                given += 1
    return given


def _restore_pins(store: MemoryStore, pins: dict[str, float]) -> None:
    """Pin the file's pinned memories that are stored and not pinned yet (a pin made since is kept)."""
    have = {p.id for p in pinned(store)}
    for record_id, when in pins.items():
        if record_id not in have:
            try:
                set_pinned(store, record_id, when)
            except UsageError:
                pass  # the file pins a memory it does not hold, and the store has none by that id


def _kind(record: Line) -> str:
    if isinstance(record, ThreadTitle):
        return "thread"
    if isinstance(record, Pin):
        return "pin"
    if isinstance(record, Link):
        return "link"
    return "exchange" if isinstance(record, Exchange) else "document"


def _write(store: MemoryStore, batch: list[Exchange | DocumentChunk]) -> int:
    """Store one batch of a single kind; how many of its records were new."""
    if isinstance(batch[0], Exchange):
        return store.add_exchanges(r for r in batch if isinstance(r, Exchange))
    return store.add_chunks(r for r in batch if isinstance(r, DocumentChunk))


def _write_locked(store: MemoryStore, batch: list[Exchange | DocumentChunk], lock: Any) -> int:
    from filelock import Timeout

    try:
        with lock:
            return _write(store, batch)
    except Timeout as exc:  # another import stopped (SIGSTOP) while it held the lock
        raise StoreError(
            f"another import into this store has held {lock.lock_file} for {LOCK_WAIT_SECONDS // 60} min; "
            "what was stored is kept, and running the same command again completes it"
        ) from exc


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _write_lock(store: MemoryStore) -> Any:
    """A lock that every ocat process importing into this store takes for each batch.

    A file lock, in the store's folder (or, for a remote server, in the cache): an OS lock,
    so a killed importer's lock goes with its process.
    """
    from filelock import FileLock

    location = store.location
    if location.path is not None:
        folder, name = location.path, f".ocat-import-{store.name}.lock"
    else:
        folder, name = cache_dir() / "ocat" / "locks", f"import-{location.cache_key()}-{store.name}.lock"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / name), timeout=LOCK_WAIT_SECONDS, thread_local=False)


def _records(path: Path) -> Iterator[tuple[int, Line]]:
    try:
        # utf-8-sig: a file saved by an editor that adds a byte order mark is still read.
        handle = path.open("r", encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise InputFileError(f"no such file: {path}") from exc
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, parse_line(line, number, path)
        except UnicodeDecodeError as exc:
            raise InputFileError(f"{path} is not UTF-8 text") from exc
