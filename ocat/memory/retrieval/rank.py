"""Ranking one kind of record for a search: the candidate pool (nearest by embedding, best by
BM25), each candidate's fused score, neighbour spreading, best first.

The core that `ocat.memory.retrieval.retrieve` (the chat's and the CLI's search) and the store's
floor (`ocat.memory.retrieval.store_floor`, which probes a store with generic questions) share.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from ocat.memory.retrieval.neighbours import Candidate, Neighbours, record_terms
from ocat.memory.storage.scoring import Calibration, coverage
from ocat.memory.storage.store import MemoryStore
from ocat.memory.storage.terms import query_terms as terms_of_query
from ocat.records import RecordKind

# "vectors" is what a search falls back to when a derived file fails (ocat.memory.storage.derived):
# Chroma's nearest records alone, scored by the same calibration with no term coverage.
Mode = Literal["hybrid", "dense", "lexical", "vectors"]
# Candidates fetched from each side per result wanted: enough for fusion to reorder.
POOL_FACTOR = 4
MIN_POOL = 30


def best_exchange_z(store: MemoryStore, queries: Sequence[str]) -> list[float]:
    """Each query's best fused score among the store's exchanges, before any floor (0.0 when
    none): the probe of ocat.memory.retrieval.store_floor.

    All the queries are ranked in one pass (one embedding call, one Chroma query, one read of
    the candidates' terms and vectors), each scored as a search of it alone would score it:
    measuring a floor's 80 questions one search at a time took ~0.7 s of CPU on a store of 60
    exchanges, most of it 80 Chroma queries and the same neighbours' vectors read again."""
    if store.lexical.count("exchange") == 0:
        return [0.0 for _ in queries]
    vectors = store.embedder.embed(list(queries))
    cosines = store.nearest("exchange", vectors, MIN_POOL)
    scored = _scored_per_query(store, "exchange", [terms_of_query(q) for q in queries], vectors, cosines, MIN_POOL,
                               None, "hybrid", keep=10)
    return [max((c.z for c in per_query.values()), default=0.0) for per_query in scored]


def rank_candidates(
    store: MemoryStore,
    kind: RecordKind,
    query_terms: list[list[str]],
    vectors: list[list[float]] | None,
    pool: int,
    where: dict[str, Any] | None,
    mode: Mode,
    *,
    keep: int,
    judged: Calibration | None = None,
) -> list[Candidate]:
    """One kind's candidates for all the queries, best first (each record's best over the queries).

    Only the best `keep` are read further, so a neighbour that could not rank among them is
    not lifted (nor its vector read).

    Candidates are the nearest records by embedding and the best BM25 matches; each is
    scored from its cosine similarity and its coverage of the query's terms (read from the
    lexical index), then strong exchanges lift their neighbours that continue their subject.
    """
    # Per query: candidate id -> cosine similarity (0.0 when there is no query vector).
    cosines = store.nearest(kind, vectors, pool, where=where) if vectors is not None else [{} for _ in query_terms]
    if mode == "dense":
        return [Candidate(i, c, c) for i, c in sorted(cosines[0].items(), key=lambda p: p[1], reverse=True)]
    if mode == "vectors":
        nearest: dict[str, float] = {}
        for query_cosines in cosines:
            for i, cosine in query_cosines.items():
                nearest[i] = max(cosine, nearest.get(i, 0.0))
        scale = judged or store.calibration
        fused = {i: store.calibration.combine(cosine, 0.0) for i, cosine in nearest.items()}
        return sorted((Candidate(i, scale.relevance_of(z), z) for i, z in fused.items()),
                      key=lambda c: c.rank, reverse=True)
    scored = _scored_per_query(store, kind, query_terms, vectors, cosines, pool, where, mode, keep=keep)
    if mode == "lexical":
        # The lexical baseline keeps BM25's order; its score is the coverage.
        return list(scored[0].values())
    best: dict[str, Candidate] = {}
    for per_query in scored:
        for i, c in per_query.items():
            if i not in best or c.rank > best[i].rank:
                best[i] = c
    # From here on `rank` is a relevance in [0, 1], comparable across kinds: by `judged`, the
    # store's calibration raised by its floor for exchanges.
    calibration = judged or store.calibration
    ranked = [Candidate(c.id, calibration.relevance_of(c.rank), c.z, c.source) for c in best.values()]
    return sorted(ranked, key=lambda c: c.rank, reverse=True)


def _scored_per_query(
    store: MemoryStore,
    kind: RecordKind,
    query_terms: list[list[str]],
    vectors: list[list[float]] | None,
    cosines: list[dict[str, float]],
    pool: int,
    where: dict[str, Any] | None,
    mode: Mode,
    *,
    keep: int,
) -> list[dict[str, Candidate]]:
    """Each query's candidates (its nearest records, `cosines`, and its best BM25 matches) with
    their fused score, neighbours lifted; the reads are shared by all the queries, the scores
    are each query's own. In "lexical" mode, the first query's in BM25 order, scored by coverage."""
    found = [[i for i, _ in store.lexical.search(kind, q, pool)] for q in query_terms]
    if vectors is None:
        cosines = [dict.fromkeys(ids, 0.0) for ids in found]
    else:
        _add_lexical_cosines(store, kind, vectors, found, cosines, where)
    candidates = list(dict.fromkeys(i for per_query in cosines for i in per_query))
    if kind == "exchange" and vectors is not None and store.calibration.prompt_side:
        _add_prompt_side(store, candidates, vectors, cosines)
    terms_of = record_terms(store, kind, candidates)
    doc_freqs = store.lexical.doc_freqs(kind, [t for q in query_terms for t in q])
    total = max(1, store.lexical.count(kind))
    calibration: Calibration = store.calibration
    neighbours = (
        Neighbours(store, vectors, doc_freqs, total, keep) if kind == "exchange" and vectors is not None else None
    )
    scored_queries = []
    for q, (q_terms, per_query) in enumerate(zip(query_terms, cosines)):
        covered = {i: coverage(q_terms, terms_of.get(i, frozenset()), doc_freqs, total) for i in per_query}
        if mode == "lexical":
            return [{i: Candidate(i, covered[i], covered[i]) for i in per_query}]
        z = {i: calibration.combine(cosine, covered[i]) for i, cosine in per_query.items()}
        scored = {i: Candidate(i, value, value) for i, value in z.items()}
        if neighbours is not None:
            scored = neighbours.spread(scored, q, q_terms)
        scored_queries.append(scored)
    return scored_queries


def lifted(ranked: list[Candidate], inside: set[str], boost: float, judged: Calibration) -> list[Candidate]:
    """`ranked` with `boost` added to the fused score of the candidates `inside`, ranked again
    (a preferred project's exchanges, a time the question names: ocat.memory.retrieval.retrieve)."""
    if not inside or not boost:
        return ranked
    raised = [Candidate(c.id, judged.relevance_of(c.z + boost), c.z + boost) if c.id in inside else c for c in ranked]
    return sorted(raised, key=lambda c: c.rank, reverse=True)


def _add_prompt_side(
    store: MemoryStore, candidates: list[str], vectors: list[list[float]], cosines: list[dict[str, float]]
) -> None:
    """Score each exchange by the better of its own cosine and its prompt's (one read of the
    candidates' prompt vectors): a question that asks again what was once asked finds it
    even under a long answer (ocat.memory.storage.prompt_vectors)."""
    prompts = store.prompts.similarities(candidates, vectors)
    for q, per_query in enumerate(cosines):
        for i, cosine in per_query.items():
            if i in prompts and prompts[i][q] > cosine:
                per_query[i] = prompts[i][q]


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
