"""The one retrieval that both the chat (before each reply) and `--query-vector-store` run.

Exchanges and document chunks are searched separately (each with its own threshold and
result count), then merged by score. Per-turn retrieval never sends Chroma a `where`
filter: ids to leave out are dropped here, after over-fetching.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Collection, Sequence

from ocat.memory.store import MemoryStore
from ocat.models import SearchHit


@dataclass(frozen=True)
class RetrievalLimits:
    """How many of each kind to fetch, and the relevance each must reach to be admitted."""

    exchange_results: int
    document_results: int
    exchange_threshold: float
    document_threshold: float

    @classmethod
    def from_settings(cls, vector_store: Any, *, results: int | None = None) -> RetrievalLimits:
        """Limits from `vector_store` settings; `results` overrides both counts (the CLI's --results)."""
        return cls(
            exchange_results=results if results is not None else vector_store.context_results,
            document_results=results if results is not None else vector_store.memory_results,
            exchange_threshold=vector_store.similarity_threshold,
            document_threshold=vector_store.memory_threshold,
        )


def retrieve(
    store: MemoryStore,
    query: str,
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str] = (),
    where: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[SearchHit]:
    """Memories for a query, best first, each marked with its threshold (see SearchHit.admitted).

    `exclude_ids` drops records already in view (the visible conversation); `limit` caps
    the merged list. Nothing is filtered by threshold here, so callers can show what
    fell short; the chat injects only admitted hits.
    """
    if not query.strip():
        return []
    vector = store.embedder.embed([query])[0]
    hits: list[SearchHit] = []
    for kind, count, threshold in (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    ):
        if count <= 0:
            continue
        found = store.search(query, kind=kind, k=count + len(exclude_ids), where=where, query_vector=vector)
        kept = [h for h in found if h.id not in exclude_ids][:count]
        hits.extend(replace(h, threshold=threshold) for h in kept)
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit] if limit is not None else hits


def admitted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits relevant enough to show the model."""
    return [h for h in hits if h.admitted]

