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
    hits = _retrieve(store, [query], limits, exclude_ids=exclude_ids, where=where, mode=mode)
    return hits[:limit] if limit is not None else hits


def retrieve_any(
    store: MemoryStore, queries: Sequence[str], limits: RetrievalLimits, *, exclude_ids: Collection[str] = ()
) -> list[SearchHit]:
    """Retrieve for several queries and keep each memory's best score (per-kind counts still hold).

    The queries share the work: one embedding call, one nearest-neighbour call per kind,
    one read of vectors and one of texts, so a chat turn's two searches cost little more than one.
    """
    return _retrieve(store, queries, limits, exclude_ids=exclude_ids)


def _retrieve(
    store: MemoryStore,
    queries: Sequence[str],
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str],
    where: dict[str, Any] | None = None,
    mode: Mode = "hybrid",
) -> list[SearchHit]:
    queries = [q for q in queries if q.strip()]
    if not queries:
        return []
    query_terms = [terms(q) for q in queries]
    vectors = store.embedder.embed(queries) if mode != "lexical" else None
    hits: list[SearchHit] = []
    for kind, count, threshold in (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    ):
        if count <= 0 or store.lexical.count(kind) == 0:
            continue
        pool = max(MIN_POOL, POOL_FACTOR * count) + len(exclude_ids)
        ranked = _ranked(store, kind, query_terms, vectors, pool, where, mode)
        wanted = [(i, score) for i, score in ranked if i not in exclude_ids][: 2 * count]
        # Texts and metadata are read only now, and only for these few (neighbours included).
        got = store.fetch(kind, [i for i, _ in wanted], where=where, vectors=False)
        records = {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
        kept = [(i, score) for i, score in wanted if i in records][:count]
        hits.extend(
            SearchHit(id=i, kind=kind, score=score, text=records[i][0], metadata=records[i][1], threshold=threshold)
            for i, score in kept
        )
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits


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


def _ranked(
    store: MemoryStore,
    kind: RecordKind,
    query_terms: list[list[str]],
    vectors: list[list[float]] | None,
    pool: int,
    where: dict[str, Any] | None,
    mode: Mode,
) -> list[tuple[str, float]]:
    """One kind's candidates for all the queries as (id, best score over the queries), best first.

    Candidates are the nearest records by embedding and the best BM25 matches; each is
    scored from its cosine similarity and its coverage of the query's terms (read from the
    lexical index), then strong exchanges lift their neighbours.
    """
    # Per query: candidate id -> cosine similarity (0.0 when there is no query vector).
    cosines = store.nearest(kind, vectors, pool, where=where) if vectors is not None else [{} for _ in query_terms]
    if mode == "dense":
        return sorted(cosines[0].items(), key=lambda p: p[1], reverse=True)
    found = [[i for i, _ in store.lexical.search(kind, q, pool)] for q in query_terms]
    if vectors is None:
        cosines = [dict.fromkeys(ids, 0.0) for ids in found]
    else:
        _add_lexical_cosines(store, kind, vectors, found, cosines, where)
    candidates = list(dict.fromkeys(i for per_query in cosines for i in per_query))
    record_terms = _term_sets(store, kind, candidates)
    doc_freqs = store.lexical.doc_freqs(kind, [t for q in query_terms for t in q])
    total = max(1, store.lexical.count(kind))
    best: dict[str, float] = {}
    for q_terms, per_query in zip(query_terms, cosines):
        covered = {i: coverage(q_terms, record_terms.get(i, frozenset()), doc_freqs, total) for i in per_query}
        if mode == "lexical":
            # The lexical baseline keeps BM25's order; its score is the coverage.
            return [(i, covered[i]) for i in per_query]
        calibration: Calibration = store.calibration
        z = {i: calibration.combine(cosine, covered[i]) for i, cosine in per_query.items()}
        if kind == "exchange":
            z = _spread_to_neighbours(store, z)
        for i, value in z.items():
            relevance = calibration.relevance_of(value)
            if relevance > best.get(i, -1.0):
                best[i] = relevance
    return sorted(best.items(), key=lambda p: p[1], reverse=True)


def _add_lexical_cosines(
    store: MemoryStore,
    kind: RecordKind,
    vectors: list[list[float]],
    found: list[list[str]],
    cosines: list[dict[str, float]],
    where: dict[str, Any] | None,
) -> None:
    """Give each query's BM25-only candidates their cosine similarity (one read of their vectors).

    A candidate that `where` rules out is not returned by the read, and is dropped.
    """
    import numpy as np

    missing = list(dict.fromkeys(i for ids, per_query in zip(found, cosines) for i in ids if i not in per_query))
    if not missing:
        return
    got = store.fetch(kind, missing, where=where, vectors=True, texts=False)
    if not got["ids"]:
        return
    row = {i: n for n, i in enumerate(got["ids"])}
    matrix = np.asarray(got["embeddings"], dtype=np.float32)
    # Both sides are unit vectors: the dot product is the cosine similarity.
    similarities = np.clip(matrix @ np.asarray(vectors, dtype=np.float32).T, 0.0, 1.0)
    for q, (ids, per_query) in enumerate(zip(found, cosines)):
        for i in ids:
            if i not in per_query and i in row:
                per_query[i] = float(similarities[row[i], q])


def _term_sets(store: MemoryStore, kind: RecordKind, ids: list[str]) -> dict[str, frozenset[str]]:
    """Candidates' terms from the lexical index; from their texts in Chroma for any it lacks
    (the index can trail Chroma for a moment when another process writes)."""
    found = store.lexical.term_sets(kind, ids)
    lacking = [i for i in ids if i not in found]
    if lacking:
        got = store.fetch(kind, lacking, vectors=False)
        found.update((i, term_set(t or "")) for i, t in zip(got["ids"], got["documents"]))
    return found


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
