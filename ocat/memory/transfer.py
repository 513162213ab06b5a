"""Export and import of memory as JSON Lines, streamed so any size fits in bounded memory.

Exchanges are `{"kind": "exchange", <the nine exchange fields>}`; document chunks are
`{"kind": "document", "id", "text", "metadata"}`; the titles given to exported threads
(/rename) are `{"kind": "thread", "thread_id", "title"}`, last (a file without them, from
before titles were exported, imports as ever). Import re-embeds with the store's own
model, which is also how memory moves to a new embedding model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

from ocat.errors import InputFileError, StoreError
from ocat.limits import MAX_DOCUMENT_CHUNKS, MAX_TITLE_CHARS, stored_count
from ocat.locations import cache_dir
# Chroma keeps integers as signed 64-bit numbers; a larger one silently becomes an approximate float.
from ocat.memory.filters import FIRST_DATE, INT64_MAX, INT64_MIN, LAST_DATE
from ocat.memory.store import WRITE_BATCH, MemoryStore
from ocat.models import EXCHANGE_FIELDS, RECORD_KINDS, THREAD_TITLE_KEY, DocumentChunk, Exchange
from ocat.text import clean_title, unprintable_escaped

_STRING_FIELDS = ("exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response")
# The times a date can show in every time zone (years 1 to 9999, with a day to spare at each
# end): past them, printing the date raises OverflowError wherever the record is shown.
_EARLIEST = datetime.fromisoformat(FIRST_DATE).replace(tzinfo=timezone.utc).timestamp()
_LATEST = datetime.fromisoformat(LAST_DATE).replace(tzinfo=timezone.utc).timestamp()
# Chroma refuses metadata keys starting with these, and silently drops keys starting with "chroma:".
_RESERVED_KEY_STARTS = ("#", "$", "chroma:")
# How long an import waits for another one's batch (a batch takes seconds) before giving up.
LOCK_WAIT_SECONDS = 600
# Thread ids per query when an export looks up titles (SQLite caps a query's parameters).
_TITLE_BATCH = 500


@dataclass(frozen=True)
class ThreadTitle:
    """A title given to a thread (/rename), as a line of an export file."""

    thread_id: str
    title: str


Line = Exchange | DocumentChunk | ThreadTitle


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
    for _, metadata in store.iter_metadata("exchange"):
        exchange = Exchange.from_metadata(metadata)
        out.write(json_line(_to_line(exchange)))
        counts["exchange"] += 1
        title = metadata.get(THREAD_TITLE_KEY)
        if isinstance(title, str) and title and exchange.timestamp >= titles.get(exchange.thread_id, (-1.0, ""))[0]:
            titles[exchange.thread_id] = (exchange.timestamp, title)
    for record in store.iter_records("document"):
        out.write(json_line(_to_line(record)))
        counts["document"] += 1
    for thread_id, (_, title) in sorted(titles.items()):
        # The import rule, applied here too: a title an older ocat stored with controls in it
        # is written as it would be read back.
        cleaned = clean_title(title)[:MAX_TITLE_CHARS]
        if cleaned:
            out.write(json_line({"kind": "thread", "thread_id": thread_id, "title": cleaned}))
    out.flush()
    return TransferResult(path=path, exchanges=counts["exchange"], documents=counts["document"], titles=len(titles))


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


def check_import_file(path: Path) -> TransferResult:
    """Read a JSONL file through and check every line, writing nothing: how many exchanges and
    documents it holds, or an InputFileError naming the first bad line."""
    counts = {"exchange": 0, "document": 0, "thread": 0}
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
    # A second pass writes (rather than one list held in memory), exchanges first, then documents.
    for kind in RECORD_KINDS:
        for batch in _batches((r for _, r in _records(path) if _kind(r) == kind), WRITE_BATCH):
            threads.update(r.thread_id for r in batch if isinstance(r, Exchange))
            # Checking which ids are stored and writing the rest is one step under the lock: two
            # imports of one file through a shared store would otherwise both count a batch as added.
            added += _write_locked(store, batch, lock)
            done += len(batch)
            if progress:
                progress(done, total)
    titles_added = _restore_titles(store, path, threads) if checked.titles else 0
    return TransferResult(
        path=str(path), exchanges=checked.exchanges, documents=checked.documents, added=added,
        titles=checked.titles, titles_added=titles_added,
    )


def _restore_titles(store: MemoryStore, path: Path, threads: set[str]) -> int:
    """Give the file's threads their titles (the last one for a thread, if it has several); how many were given."""
    titles = {r.thread_id: r.title for _, r in _records(path) if isinstance(r, ThreadTitle) and r.thread_id in threads}
    given = 0
    for batch in _batches(sorted(titles), _TITLE_BATCH):
        named = store.lexical.titles(batch)
        for thread_id in batch:
            if thread_id not in named:
                store.set_thread_title(thread_id, titles[thread_id])
                given += 1
    return given


def _kind(record: Line) -> str:
    if isinstance(record, ThreadTitle):
        return "thread"
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
        folder, name = cache_dir() / "ocat" / "locks", f"import-{location.host}-{location.port}-{store.name}.lock"
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


class _Refused(Exception):
    """Why a line cannot be imported; `parse_line` names the file and the line."""


def parse_line(line: str, number: int, path: Path | str) -> Line:
    """One JSONL line as a record, or an InputFileError naming the file and line.

    A record that passes is one Chroma stores exactly as it is (no value dropped, rounded or
    refused), and whose text and dates can be embedded and shown.
    """
    try:
        return _parse(line)
    except _Refused as exc:
        raise InputFileError(f"{path}:{number}: {exc}; nothing was imported") from None


def _parse(line: str) -> Line:
    try:
        data = json.loads(line)
    except RecursionError:
        raise _Refused("the JSON is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of more than 4,300 digits
        raise _Refused(f"not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(data, dict):
        raise _Refused("expected a JSON object")
    kind = data.get("kind")
    if kind == "exchange":
        return _exchange(data)
    if kind == "document":
        return _document(data)
    if kind == "thread":
        return _thread_title(data)
    if "kind" not in data:
        raise _Refused("the record has no kind (expected 'exchange', 'document' or 'thread')")
    raise _Refused(f"unknown kind {_shown(kind)} (expected 'exchange', 'document' or 'thread')")


def _exchange(data: dict[str, Any]) -> Exchange:
    missing = [f for f in EXCHANGE_FIELDS if f not in data]
    if missing:
        raise _Refused(f"exchange is missing {', '.join(missing)}")
    for name in _STRING_FIELDS:
        if not isinstance(data[name], str):
            raise _Refused(f"{name} must be a string")
        _check_text(data[name], name)
    if not data["exchange_id"] or not data["thread_id"] or not data["session_id"]:
        raise _Refused("exchange_id, thread_id and session_id must not be empty")
    _check_timestamp(data["timestamp"])
    prior = data["prior_exchange_ids"]
    if not isinstance(prior, list) or not all(isinstance(p, str) for p in prior):
        raise _Refused("prior_exchange_ids must be a list of strings")
    for p in prior:
        _check_text(p, "prior_exchange_ids")
    seq = data["thread_continuation_seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise _Refused("thread_continuation_seq must be an integer")
    if not INT64_MIN <= seq <= INT64_MAX:
        raise _Refused(f"thread_continuation_seq {_shown(seq)} is beyond the 64-bit integers Chroma stores")
    if data["thread_session_id"] != f"{data['thread_id']}_{data['session_id']}":
        raise _Refused("thread_session_id must be '{thread_id}_{session_id}'")
    return Exchange.from_metadata(data)


def _document(data: dict[str, Any]) -> DocumentChunk:
    record_id, text, metadata = data.get("id"), data.get("text"), data.get("metadata")
    if not isinstance(record_id, str) or not record_id:
        raise _Refused("document id must be a non-empty string")
    _check_text(record_id, "id")
    if not isinstance(text, str) or not text.strip():
        raise _Refused("document text must be a non-empty string")
    _check_text(text, "text")
    if metadata is None:  # optional: absent (or null) is no metadata
        metadata = {}
    if not isinstance(metadata, dict):
        raise _Refused("document metadata must be an object")
    for key, value in metadata.items():
        _check_metadata(key, value)
    _check_known_keys(metadata)
    return DocumentChunk(id=record_id, text=text, metadata=metadata)


# The document metadata ocat itself reads, and what each must be: an import that stored
# `total_chunks: "many"` made every later stats call fail, and `1e18` invented a partial document.
_TEXT_KEYS = ("kind", "source", "source_file", "source_path", "source_folder", "filename", "section", "prefix",
              "content_hash", "document_id")


def _check_known_keys(metadata: dict[str, Any]) -> None:
    """Refuse a value of a key ocat reads that is not of that key's type and range."""
    for key in _TEXT_KEYS:
        if key in metadata and not isinstance(metadata[key], str):
            raise _Refused(f"metadata {_shown(key)} must be a string, not {_shown(metadata[key])}")
    if "manual_entry" in metadata and not isinstance(metadata["manual_entry"], bool):
        raise _Refused(f"metadata \"manual_entry\" must be true or false, not {_shown(metadata['manual_entry'])}")
    for key in ("date_added", "timestamp"):
        if key in metadata:
            try:
                _check_timestamp(metadata[key])
            except _Refused:
                raise _Refused(f"metadata {_shown(key)} must be a date (seconds since 1970, years 1 to 9999), "
                               f"not {_shown(metadata[key])}") from None
    total = metadata.get("total_chunks")
    if "total_chunks" in metadata and stored_count(total, least=1) is None:
        raise _Refused(f"metadata \"total_chunks\" must be a whole number from 1 to {MAX_DOCUMENT_CHUNKS:,}, "
                       f"not {_shown(total)}")
    if "chunk_index" in metadata:
        index = stored_count(metadata["chunk_index"])
        top = (total if isinstance(total, int) else MAX_DOCUMENT_CHUNKS) - 1
        if index is None or index > top:
            raise _Refused(f"metadata \"chunk_index\" must be a whole number from 0 to {top:,} "
                           f"(below total_chunks), not {_shown(metadata['chunk_index'])}")


def _thread_title(data: dict[str, Any]) -> ThreadTitle:
    """A thread's title as /rename would store it: one line of printable text, whitespace runs as one space."""
    thread_id, title = data.get("thread_id"), data.get("title")
    if not isinstance(thread_id, str) or not thread_id:
        raise _Refused("thread_id must be a non-empty string")
    _check_text(thread_id, "thread_id")
    if not isinstance(title, str):
        raise _Refused("title must be a string")
    _check_text(title, "title")
    # The rule /rename applies: controls and bidi overrides are dropped, not refused, so a
    # backup made by any ocat restores.
    cleaned = clean_title(title)
    if not cleaned:
        raise _Refused("title must not be empty")
    if len(cleaned) > MAX_TITLE_CHARS:
        raise _Refused(f"title is {len(cleaned)} characters; a title is at most {MAX_TITLE_CHARS}")
    return ThreadTitle(thread_id, cleaned)


def _check_metadata(key: str, value: Any) -> None:
    """A metadata entry Chroma stores as it is (its own checks, and the ones it skips)."""
    shown = _shown(key)
    if not key:
        raise _Refused('metadata key "" is empty')
    _check_text(key, f"metadata key {shown}")
    if key.startswith(_RESERVED_KEY_STARTS):
        start = next(s for s in _RESERVED_KEY_STARTS if key.startswith(s))
        raise _Refused(f"metadata key {shown} starts with {start!r}, which Chroma reserves")
    where = f"metadata {shown}"
    if not isinstance(value, list):
        _scalar_type(value, where)
        return
    if not value:
        raise _Refused(f"{where} is an empty list (Chroma stores only non-empty lists)")
    types = sorted({_scalar_type(item, f"{where} (in the list)") for item in value})
    if len(types) > 1:
        raise _Refused(f"{where} is a list mixing {' and '.join(types)} (Chroma needs one type per list)")


def _scalar_type(value: Any, where: str) -> str:
    """The kind of a single metadata value, or _Refused if Chroma would refuse or alter it."""
    if isinstance(value, bool):
        return "booleans"
    if isinstance(value, str):
        _check_text(value, where)
        return "strings"
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise _Refused(f"{where} is {_shown(value)}, beyond the 64-bit integers Chroma stores")
        return "integers"
    if isinstance(value, float):
        if not math.isfinite(value):
            # A NaN is dropped by Chroma; in a list it breaks the whole collection.
            raise _Refused(f"{where} is {_shown(value)}, which Chroma cannot store")
        return "floats"
    what = "null" if value is None else "an object" if isinstance(value, dict) else "a list inside a list"
    raise _Refused(f"{where} is {what}; values must be strings, numbers, booleans or non-empty lists of one of them")


def _check_timestamp(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Refused("timestamp must be a number")
    if not _EARLIEST <= value <= _LATEST:  # NaN compares false, so it is refused too
        raise _Refused(f"timestamp {_shown(value)} is not a date between the years 1 and 9999")


def _check_text(text: str, name: str) -> None:
    """Refuse a lone surrogate (JSON "\\udfff"): it is no character, and the embedder, Chroma and
    SQLite all fail on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(
            f"{name} holds a lone surrogate (\\u{ord(text[exc.start]):04x} at character {exc.start + 1}), "
            "which is not text"
        ) from None


def _shown(value: Any) -> str:
    """A value for a message: as JSON (quoted, with control characters and surrogates escaped),
    and cut short when long (a 400-digit integer)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:24]}… ({len(text)} characters)"
