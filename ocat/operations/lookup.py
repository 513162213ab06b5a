"""The record operations: get a memory by id, describe it, delete memories, list and resolve threads.

`/vget`, `/vdelete`, `/threads`, `/continue` and MCP's `forget_memory` call these and only render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ocat.errors import NotFound, UsageError
from ocat.text.limits import stored_count
from ocat.records import ORIGIN_KEY, PROJECT_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, UPDATED_BY_KEY, DocumentChunk
from ocat.records import Exchange, SearchHit, source_word
from ocat.text.terminal import count_of, local_time, shorten
from ocat import memory
from ocat.operations.threads import default_title

if TYPE_CHECKING:
    from ocat.memory import MemoryStore

Record = Exchange | DocumentChunk



# The longest start of an id looked up in the index (ocat's ids are 36 to 40 characters; an
# imported record may have a longer one, which is found by the exact lookup before this).
LONGEST_PREFIX = 256


def resolve_id(store: MemoryStore, prefix: str) -> str:
    """A full record id from an id or a unique prefix of one (NotFound if none, UsageError if several)."""
    if not prefix.strip():
        raise UsageError("give the id of a memory (or its start), as /vquery, /pins and --query-vector-store show it")
    if store.get(prefix) is not None:
        return prefix  # an exact id wins even when it is also the start of another
    if len(prefix) > LONGEST_PREFIX:  # no start of an id is that long: not worth a search of the index
        raise NotFound(f"no memory with id {shorten(prefix, 40)}")
    # Else a document chunk's short form, as /vquery shows it: doc-3f2a9c1e-12.
    found = store.ids_starting(prefix) or store.chunk_ids(prefix)
    if not found:
        raise NotFound(f"no memory with id {prefix}")
    if len(found) > 1:
        raise UsageError(f"{prefix!r} matches more than one memory; give more of the id")
    return found[0]

def get_record(store: MemoryStore, id_or_prefix: str) -> Record:
    """The exchange or document chunk with this id, or the one id starting with it (NotFound if none,
    UsageError if several)."""
    record_id = resolve_id(store, id_or_prefix)
    record = store.get(record_id)
    if record is None:  # deleted between the two reads (another process)
        raise NotFound(f"no memory with id {record_id}")
    return record


# The fewest characters of an id shown: as many as `/vget` and `/threads` always showed.
SHORT_ID_LENGTH = 8


def short_id(store: MemoryStore, full_id: str, least: int = SHORT_ID_LENGTH) -> str:
    """The shortest form of `full_id` no other id in `store` shares, so `/vget` and `/vdelete`
    take it back (`resolve_id`): the shortest start of it, at least `least` characters;
    for a document chunk (`doc-KEY-N`, whose chunks share the start) the shortest start of its
    key with its index, `doc-3f2a9c1e-12`. The whole id when no shorter form is unique, or
    when the index does not hold it."""
    chunk = memory.CHUNK_ID.match(full_id)
    if chunk is not None and len(chunk.group(1)) == 32:
        key, index = chunk.groups()
        length = _shortest(least, len(key),
                           lambda n: store.chunk_ids(f"doc-{key[:n]}-{index}") == [full_id])
        return full_id if length is None else f"doc-{key[:length]}-{index}"

    def unique(length: int) -> bool:
        prefix = full_id[:length]
        return store.ids_starting(prefix) == [full_id]

    length = _shortest(least, len(full_id), unique)
    return full_id if length is None else full_id[:length]


def _shortest(least: int, most: int, unique: Callable[[int], bool]) -> int | None:
    """The smallest length from `least` to `most` for which `unique` holds (None if not even
    `most`): a longer form matches no more ids than a shorter one, so a binary search finds it."""
    low, high = min(least, most), most
    if not unique(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if unique(middle):
            high = middle
        else:
            low = middle + 1
    return low


# A document chunk's metadata that `record_details` says in its own words, or that means nothing to a reader.
# A link to a newer version is shown as the versions (/vget), not as raw keys.
_SHOWN_APART = frozenset({"kind", "source", "source_file", "source_path", "chunk_index", "total_chunks",
                          "manual_entry", "content_hash", "document_id", "date_added", "section",
                          UPDATED_BY_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY})


def record_details(record: Record) -> list[tuple[str, str]]:
    """A record's metadata for people, as (what, value): ids, where from, dates as local dates.

    The text itself is `record_markdown`; `/vget` shows both.
    """
    if isinstance(record, Exchange):
        rows = [("id", record.exchange_id), ("thread", record.thread_id), ("session", record.session_id),
                ("date", local_time(record.timestamp))]
        if record.thread_continuation_seq:
            rows.append(("resumed", count_of(record.thread_continuation_seq, "time")))
        return rows
    meta = record.metadata
    rows = [("id", record.id), ("source", source_word(meta))]
    where = str(meta.get("source_file") or meta.get("source_path") or "")
    if where:
        rows.append(("file", where))
    if meta.get("section"):
        rows.append(("section", str(meta["section"])))
    index, total = stored_count(meta.get("chunk_index")), stored_count(meta.get("total_chunks"), least=1)
    if index is not None and total is not None and total > 1:
        rows.append(("part", f"{index + 1} of {total}"))
    rows.append(("date", local_time(meta.get("date_added"))))
    rows.extend((key, str(value)) for key, value in sorted(meta.items()) if key not in _SHOWN_APART)
    return rows


def record_markdown(record: Record) -> str:
    """A record's whole text as Markdown: an exchange's prompt and answer, a document chunk's text."""
    if isinstance(record, Exchange):
        return f"**Prompt**\n\n{record.user_prompt}\n\n**Answer**\n\n{record.assistant_response}\n"
    return record.text


def record_id(record: Record) -> str:
    """A record's id, whatever its kind."""
    return record.exchange_id if isinstance(record, Exchange) else record.id


def describe_record(record: Record) -> str:
    """A record named for a person: 'the exchange 3f2a9c1e ('the prompt')' or 'the document chunk ID'."""
    if isinstance(record, Exchange):
        return f"the exchange {record.exchange_id[:8]} ({shorten(record.user_prompt, 60)!r})"
    return f"the document chunk {record.id}"


def as_hit(record: Record) -> SearchHit:
    """A record in the shape of a search hit (score 1), so it is shown like one."""
    if isinstance(record, Exchange):
        return SearchHit(id=record.exchange_id, kind="exchange", score=1.0, text=record.text,
                         metadata=record.to_metadata())
    return SearchHit(id=record.id, kind="document", score=1.0, text=record.text, metadata=record.metadata)


def delete_records(store: MemoryStore, ids: Sequence[str]) -> int:
    """Delete memories by their full ids; returns how many were stored (and so deleted)."""
    return store.delete(list(ids))


@dataclass(frozen=True)
class ThreadSummary:
    """A thread as listed: its id, last activity, size, first prompt and title."""

    thread_id: str
    exchanges: int
    first_active: float
    last_active: float
    first_prompt: str
    # The title the user gave it (/rename), or "" (then its first prompt names it).
    given_title: str = ""
    # Where its first exchange was said: "" for a chat, records.ONE_SHOT for `ocat --ask`.
    origin: str = ""
    # The project its first exchange belongs to ("" for a global thread: ocat.memory.project_of).
    project: str = ""

    @property
    def title(self) -> str:
        """What the thread is called: the title given to it, else its first prompt, shortened."""
        return self.given_title or default_title(self.first_prompt)


def recent_threads(store: MemoryStore, count: int, only: Sequence[str] | None = None) -> list[ThreadSummary]:
    """The `count` most recently active threads (of `only`, when given), most recent first."""
    summaries = store.threads.recent(count, only)
    heads: dict[str, dict[str, Any]] = {}
    if summaries:
        got = store.fetch("exchange", [head for *_, head in summaries if head], vectors=False)
        heads = {i: dict(m or {}) for i, m in zip(got["ids"], got["metadatas"])}
    titles = store.threads.titles([thread_id for thread_id, *_ in summaries])
    return [
        ThreadSummary(thread_id, size, first, last, str(heads.get(head, {}).get("user_prompt", "")),
                      titles.get(thread_id, ""), str(heads.get(head, {}).get(ORIGIN_KEY) or ""),
                      str(heads.get(head, {}).get(PROJECT_KEY) or ""))
        for thread_id, size, first, last, head in summaries
    ]


def resolve_thread(store: MemoryStore, prefix: str) -> str:
    """The one thread id starting with `prefix` (UsageError if none or several)."""
    if len(prefix) > LONGEST_PREFIX:  # SQLite refuses a LIKE pattern that long: only the whole id may match
        found = [thread_id for thread_id, *_ in store.threads.recent(1, [prefix])]
    else:
        found = store.threads.starting(prefix)
    if not found:
        raise UsageError(f"no thread with an id starting {shorten(prefix, 40)!r}; /threads lists them")
    if len(found) > 1:
        raise UsageError(f"{prefix!r} matches more than one thread; give more of the id")
    return found[0]
