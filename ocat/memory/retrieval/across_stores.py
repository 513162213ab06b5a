"""An explicit search (`--query-vector-store`, `/vquery`, MCP `search_memory`): filters, several stores.

The chat's per-turn retrieval calls `retrieve` directly and never filters; this wraps it
for searches a person or a tool asks for, which may name metadata filters (a Chroma
`where` per kind, see `ocat.memory.retrieval.filters`) and read several named stores at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Sequence

from ocat.memory.retrieval.filters import Filters
from ocat.memory.retrieval.retrieve import RetrievalLimits, retrieve
from ocat.memory.storage.store import MemoryStore
from ocat.records import SearchHit


@dataclass(frozen=True)
class StoreHit:
    """A search hit and the name of the store it came from."""

    store: str
    hit: SearchHit


def search_store(
    store: MemoryStore,
    query: str,
    limits: RetrievalLimits,
    filters: Filters | None = None,
    *,
    limit: int | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Hybrid retrieval in one store, restricted by `filters`; best first, cut to `limit`. A filter
    on dates wins over a time the query names (retrieve reads it only when none does)."""
    if not filters:
        return retrieve(store, query, limits, limit=limit, now=now)
    hits: list[SearchHit] = []
    for kind in filters.kinds():
        where = filters.where_for(kind)
        # One kind at a time: the two kinds keep dates (and other fields) under different keys.
        only = replace(
            limits,
            exchange_results=limits.exchange_results if kind == "exchange" else 0,
            document_results=limits.document_results if kind == "document" else 0,
        )
        hits.extend(retrieve(store, query, only, where=where, now=now))  # type: ignore[arg-type]
    hits.sort(key=lambda h: h.order, reverse=True)
    return hits[:limit] if limit is not None else hits


def search_stores(
    stores: Sequence[MemoryStore],
    query: str,
    limits: RetrievalLimits,
    filters: Filters | None = None,
    *,
    limit: int | None = None,
    now: datetime | None = None,
) -> list[StoreHit]:
    """Search every store and merge the hits as each store ranks them (relevances are calibrated,
    so comparable); one store's list keeps its order exactly."""
    found = [StoreHit(store.name, hit) for store in stores
             for hit in search_store(store, query, limits, filters, now=now)]
    found.sort(key=lambda h: h.hit.order, reverse=True)
    return found[:limit] if limit is not None else found
