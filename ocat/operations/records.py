"""The record operations: get a memory by id, describe it, delete memories, list and resolve threads.

`/vget`, `/vdelete`, `/threads`, `/continue` and MCP's `memory_forget` call these and only render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ocat.errors import UsageError
from ocat.models import DocumentChunk, Exchange, SearchHit

if TYPE_CHECKING:
    from ocat.memory.store import MemoryStore

Record = Exchange | DocumentChunk


def get_record(store: MemoryStore, id_or_prefix: str) -> Record:
    """The exchange or document chunk with this id, or the one id starting with it (UsageError if none or several)."""
    record_id = store.resolve_id(id_or_prefix)
    record = store.get(record_id)
    if record is None:  # deleted between the two reads (another process)
        raise UsageError(f"no memory with the id {record_id!r}")
    return record


def record_id(record: Record) -> str:
    """A record's id, whatever its kind."""
    return record.exchange_id if isinstance(record, Exchange) else record.id


def describe_record(record: Record) -> str:
    """A record named for a person: 'the exchange 3f2a9c1e ('the prompt')' or 'the document chunk ID'."""
    if isinstance(record, Exchange):
        return f"the exchange {record.exchange_id[:8]} ({record.user_prompt[:60]!r})"
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
    """A thread as listed: its id, last activity, size and first prompt."""

    thread_id: str
    exchanges: int
    first_active: float
    last_active: float
    first_prompt: str


def recent_threads(store: MemoryStore, count: int) -> list[ThreadSummary]:
    """The `count` most recently active threads, most recent first."""
    summaries = store.lexical.recent_threads(count)
    heads: dict[str, str] = {}
    if summaries:
        got = store.fetch("exchange", [head for *_, head in summaries if head], vectors=False)
        heads = {i: str(m.get("user_prompt", "")) for i, m in zip(got["ids"], got["metadatas"])}
    return [
        ThreadSummary(thread_id, size, first, last, heads.get(head, ""))
        for thread_id, size, first, last, head in summaries
    ]


def resolve_thread(store: MemoryStore, prefix: str) -> str:
    """The one thread id starting with `prefix` (UsageError if none or several)."""
    found = store.lexical.resolve_prefix("exchange", prefix, threads=True)
    if not found:
        raise UsageError(f"no thread with an id starting {prefix!r}; /threads lists them")
    if len(found) > 1:
        raise UsageError(f"{prefix!r} matches more than one thread; give more of the id")
    return found[0]
