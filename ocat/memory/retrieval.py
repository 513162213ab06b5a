"""The one retrieval that both the chat (before each reply) and `--query-vector-store` run.

Hybrid by default: for each kind of record (exchanges, documents), the nearest records by
embedding and the best BM25 matches from the lexical index form one candidate pool; each
candidate gets a calibrated relevance from its cosine similarity and its coverage of the
query's terms. Exchanges and documents are searched separately (each with its own count
and threshold) and merged by relevance. Per-turn retrieval sends Chroma no `where` filter:
ids to leave out are dropped here, after over-fetching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Literal, Sequence

from ocat.memory.lexical import term_set, terms
from ocat.memory.scoring import Calibration, coverage
from ocat.memory.store import MemoryStore
from ocat.models import RecordKind, SearchHit

Mode = Literal["hybrid", "dense", "lexical"]
# Candidates fetched from each side per result wanted: enough for fusion to reorder.
POOL_FACTOR = 4
MIN_POOL = 30
# Neighbour spreading (see _spread_to_neighbours), measured on the dev set: the exchange
# after a hit inherits 0.8 of its score, the one before it 0.7, from the best 30 hits.
NEXT_WEIGHT = 0.8
PREVIOUS_WEIGHT = 0.7
NEIGHBOUR_SOURCES = 30


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
    mode: Mode = "hybrid",
) -> list[SearchHit]:
    """Memories for a query, best first, each marked with its threshold (see SearchHit.admitted).

    `exclude_ids` drops records already in view (the conversation sent as history); `where`
    is a Chroma metadata filter (for scripts and the CLI; slow on large stores); `limit`
    caps the merged list. Nothing is filtered by threshold here, so callers can show what
    fell short; the chat injects only admitted hits. `mode` picks the hybrid scorer or one
    side alone (the evaluation's baselines).
    """
    if not query.strip():
        return []
    query_terms = terms(query)
    vector = store.embedder.embed([query])[0] if mode != "lexical" else None
    hits: list[SearchHit] = []
    for kind, count, threshold in (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    ):
        if count <= 0 or store.lexical.count(kind) == 0:
            continue
        pool = max(MIN_POOL, POOL_FACTOR * count) + len(exclude_ids)
        ranked, records = _candidates(store, kind, query, query_terms, vector, pool, where, mode)
        wanted = [(i, score) for i, score in ranked if i not in exclude_ids][: 2 * count]
        unread = [i for i, _ in wanted if i not in records]
        if unread:
            # Neighbours lifted into the results are read only now, and only these few.
            got = store.fetch(kind, unread, where=where, vectors=False)
            records.update((i, (0.0, t or "", dict(m or {}))) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"]))
        kept = [(i, score) for i, score in wanted if i in records][:count]
        hits.extend(
            SearchHit(id=i, kind=kind, score=score, text=records[i][1], metadata=records[i][2], threshold=threshold)
            for i, score in kept
        )
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit] if limit is not None else hits


def retrieve_any(
    store: MemoryStore, queries: Sequence[str], limits: RetrievalLimits, *, exclude_ids: Collection[str] = ()
) -> list[SearchHit]:
    """Retrieve for several queries and keep each memory's best score (per-kind counts still hold)."""
    best: dict[str, SearchHit] = {}
    for query in queries:
        for hit in retrieve(store, query, limits, exclude_ids=exclude_ids):
            if hit.id not in best or hit.score > best[hit.id].score:
                best[hit.id] = hit
    ranked = sorted(best.values(), key=lambda h: h.score, reverse=True)
    exchanges = [h for h in ranked if h.kind == "exchange"][: limits.exchange_results]
    documents = [h for h in ranked if h.kind == "document"][: limits.document_results]
    return sorted(exchanges + documents, key=lambda h: h.score, reverse=True)


def admitted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits relevant enough to show the model."""
    return [h for h in hits if h.admitted]


def within_budget(hits: Sequence[SearchHit], budget: int) -> list[SearchHit]:
    """The best hits whose texts fit in `budget` tokens together (hits come best first).

    A hit too big for what is left is skipped, so a smaller, less relevant one may follow.
    """
    from ocat.tokens import count_tokens

    kept, used = [], 0
    for hit in hits:
        cost = count_tokens(hit.text)
        if used + cost <= budget:
            kept.append(hit)
            used += cost
    return kept


Record = tuple[float, str, dict[str, Any]]  # cosine similarity, text, metadata


def _candidates(
    store: MemoryStore,
    kind: RecordKind,
    query: str,
    query_terms: list[str],
    vector: list[float] | None,
    pool: int,
    where: dict[str, Any] | None,
    mode: Mode,
) -> tuple[list[tuple[str, float]], dict[str, Record]]:
    """One kind's candidates as (id, score) best first, and the records read so far."""
    records: dict[str, Record] = {}
    if mode != "lexical":
        dense = store.search(query, kind=kind, k=pool, where=where, query_vector=vector)
        records = {h.id: (h.score, h.text, h.metadata) for h in dense}
        if mode == "dense":
            return [(h.id, h.score) for h in dense], records
    lexical_ids = [record_id for record_id, _ in store.lexical.search(kind, query_terms, pool)]
    unread = lexical_ids if mode == "lexical" else [i for i in lexical_ids if i not in records]
    if unread:
        fetched = store.fetch(kind, unread, where=where, vectors=vector is not None)
        for record_id, embedding, text, metadata in zip(
            fetched["ids"], fetched["embeddings"], fetched["documents"], fetched["metadatas"]
        ):
            cosine = _cosine(vector, embedding) if vector is not None else 0.0
            records[record_id] = (cosine, text or "", dict(metadata or {}))
    doc_freqs = store.lexical.doc_freqs(kind, query_terms)
    total = max(1, store.lexical.count(kind))
    covered = {i: coverage(query_terms, term_set(text), doc_freqs, total) for i, (_, text, _) in records.items()}
    if mode == "lexical":
        # The lexical baseline keeps BM25's order; its score is the coverage.
        return [(i, covered[i]) for i in lexical_ids if i in records], records
    calibration: Calibration = store.calibration
    z = {i: calibration.combine(cosine, covered[i]) for i, (cosine, _, _) in records.items()}
    if kind == "exchange":
        z = _spread_to_neighbours(store, z)
    ranked = sorted(((i, calibration.relevance_of(value)) for i, value in z.items()), key=lambda p: p[1], reverse=True)
    return ranked, records


def _spread_to_neighbours(store: MemoryStore, z: dict[str, float]) -> dict[str, float]:
    """Let a strong exchange lift the exchanges around it in its thread.

    A topic is often raised in one exchange and answered in the next: on the dev set the
    evidence was the neighbour of the best hit so often that this added ~6 points of R@5.
    A neighbour outside the pool gets only what it inherits (it is not read to score it).
    """
    top = sorted(z, key=z.__getitem__, reverse=True)[:NEIGHBOUR_SOURCES]
    spread = dict(z)
    for source, (before, after) in store.lexical.neighbours(top).items():
        for neighbour, weight in ((after, NEXT_WEIGHT), (before, PREVIOUS_WEIGHT)):
            if neighbour:
                spread[neighbour] = max(spread.get(neighbour, 0.0), weight * z[source])
    return spread


def _cosine(vector: Sequence[float], embedding: Sequence[float]) -> float:
    import numpy as np

    # Both sides are unit vectors: the dot product is the cosine similarity.
    return max(0.0, min(1.0, float(np.dot(np.asarray(vector, dtype=np.float32), np.asarray(embedding, dtype=np.float32)))))
