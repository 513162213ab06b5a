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
from typing import TYPE_CHECKING, Any, Collection, Literal, Sequence

from ocat.memory.lexical import term_set, terms
from ocat.memory.scoring import Calibration, coverage
from ocat.memory.store import MemoryStore
from ocat.models import RecordKind, SearchHit

if TYPE_CHECKING:
    from ocat.settings import VectorStoreSettings

Mode = Literal["hybrid", "dense", "lexical"]
# Candidates fetched from each side per result wanted: enough for fusion to reorder.
POOL_FACTOR = 4
MIN_POOL = 30
# Neighbour spreading (see _spread_to_neighbours), measured on the dev set: the exchange
# after a hit inherits 0.8 of its score, the one before it 0.7, from the best 30 hits.
NEXT_WEIGHT = 0.8
PREVIOUS_WEIGHT = 0.7
NEIGHBOUR_SOURCES = 30
# A neighbour is lifted only when it continues its hit's subject: the two exchanges' vectors
# have at least this cosine. Adjacent exchanges in LoCoMo's conversations have a median of
# 0.59; in chats-dev, where threads hop between subjects, 0.22 (unrelated pairs: 0.15-0.44).
COHERENCE = 0.3
# A hit whose fused score is more than this below the best hit of its kind is left out even
# above the threshold: on chats-dev 75% of targets are within 0.27 of the best hit and half
# of the other top-10 hits more than 0.64 below; 0.35 keeps LoCoMo's admitted rate (docs/RETRIEVAL.md).
MARGIN = 0.35


@dataclass(frozen=True)
class RetrievalLimits:
    """How many of each kind to fetch, and the relevance each must reach to be admitted."""

    exchange_results: int
    document_results: int
    exchange_threshold: float
    document_threshold: float

    @classmethod
    def from_settings(cls, vector_store: VectorStoreSettings, *, results: int | None = None) -> RetrievalLimits:
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
    ranked_hits: list[tuple[float, SearchHit]] = []
    per_kind: tuple[tuple[RecordKind, int, float], ...] = (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    )
    for kind, count, threshold in per_kind:
        if count <= 0 or store.lexical.count(kind) == 0:
            continue
        pool = max(MIN_POOL, POOL_FACTOR * count) + len(exclude_ids)
        ranked = _ranked(store, kind, query_terms, vectors, pool, where, mode, keep=2 * count + len(exclude_ids))
        wanted = [c for c in ranked if c.id not in exclude_ids][: 2 * count]
        # Texts and metadata are read only now, and only for these few (neighbours included).
        got = store.fetch(kind, [c.id for c in wanted], where=where, vectors=False)
        records = {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
        kept = [c for c in wanted if c.id in records][:count]
        ranked_hits.extend(
            (c.rank, hit) for c, hit in zip(kept, _verdicts(kept, records, kind, threshold, store.calibration))
        )
    ranked_hits.sort(key=lambda pair: pair[0], reverse=True)
    return [hit for _, hit in ranked_hits]


def _verdicts(
    kept: Sequence[_Candidate],
    records: dict[str, tuple[str, dict[str, Any]]],
    kind: RecordKind,
    threshold: float,
    calibration: Calibration,
) -> list[SearchHit]:
    """One kind's hits with their verdicts: own memory, outranked, or context of another hit.

    A hit stands on its own when its own relevance reaches the threshold and its fused score
    is within MARGIN of the best hit's. A hit that is in the list only because a neighbour
    lifted it (and could not stand on its own) is that neighbour's context: shown to the
    model only with it.
    """
    best = max((c.z for c in kept), default=0.0)
    standing = {c.id for c in kept if calibration.relevance_of(c.z) >= threshold and c.z >= best - MARGIN}
    hits = []
    for c in kept:
        own = calibration.relevance_of(c.z)
        context_of = c.source if c.id not in standing and c.source is not None else None
        hits.append(
            SearchHit(
                id=c.id, kind=kind, score=own, text=records[c.id][0], metadata=records[c.id][1], threshold=threshold,
                context_of=context_of,
                outranked=context_of is None and own >= threshold and c.id not in standing,
                with_admitted=context_of is not None and context_of in standing,
            )
        )
    return hits


def admitted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits relevant enough to show the model."""
    return [h for h in hits if h.admitted]


def reasons(hits: Sequence[SearchHit]) -> list[str]:
    """Why each hit is or is not given to the model, naming other hits by position (#1 first)."""
    position = {h.id: n for n, h in enumerate(hits, start=1)}
    said = []
    for hit in hits:
        if hit.context_of is not None:
            where = f"#{position[hit.context_of]}" if hit.context_of in position else hit.context_of[:8]
            said.append(f"context of {where}" + ("" if hit.with_admitted else " (not given)"))
        elif hit.score < hit.threshold:
            said.append(f"below {hit.threshold:.2f}")
        elif hit.outranked:
            said.append("far below the best")
        else:
            said.append("relevant")
    return said


def within_budget(hits: Sequence[SearchHit], budget: int) -> list[SearchHit]:
    """The best hits whose texts fit in `budget` tokens together (hits come best first).

    A hit too big for what is left is skipped, so a smaller, less relevant one may follow.
    """
    from ocat.tokens import count_tokens

    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        if hit.context_of is not None and hit.context_of not in {k.id for k in kept}:
            continue  # context comes only with the memory it belongs to
        cost = count_tokens(hit.text)
        if used + cost <= budget:
            kept.append(hit)
            used += cost
    return kept


@dataclass(frozen=True)
class _Candidate:
    """One record's scores for a search: `rank` orders the list, `z` is its own fused score."""

    id: str
    rank: float
    z: float
    # The exchange whose score lifted this one (its thread neighbour), when the lift is what ranks it.
    source: str | None = None


def _ranked(
    store: MemoryStore,
    kind: RecordKind,
    query_terms: list[list[str]],
    vectors: list[list[float]] | None,
    pool: int,
    where: dict[str, Any] | None,
    mode: Mode,
    *,
    keep: int,
) -> list[_Candidate]:
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
        return [_Candidate(i, c, c) for i, c in sorted(cosines[0].items(), key=lambda p: p[1], reverse=True)]
    found = [[i for i, _ in store.lexical.search(kind, q, pool)] for q in query_terms]
    if vectors is None:
        cosines = [dict.fromkeys(ids, 0.0) for ids in found]
    else:
        _add_lexical_cosines(store, kind, vectors, found, cosines, where)
    candidates = list(dict.fromkeys(i for per_query in cosines for i in per_query))
    record_terms = _term_sets(store, kind, candidates)
    doc_freqs = store.lexical.doc_freqs(kind, [t for q in query_terms for t in q])
    total = max(1, store.lexical.count(kind))
    calibration: Calibration = store.calibration
    neighbours = (
        _Neighbours(store, vectors, doc_freqs, total, keep) if kind == "exchange" and vectors is not None else None
    )
    best: dict[str, _Candidate] = {}
    for q, (q_terms, per_query) in enumerate(zip(query_terms, cosines)):
        covered = {i: coverage(q_terms, record_terms.get(i, frozenset()), doc_freqs, total) for i in per_query}
        if mode == "lexical":
            # The lexical baseline keeps BM25's order; its score is the coverage.
            return [_Candidate(i, covered[i], covered[i]) for i in per_query]
        z = {i: calibration.combine(cosine, covered[i]) for i, cosine in per_query.items()}
        scored = {i: _Candidate(i, value, value) for i, value in z.items()}
        if neighbours is not None:
            scored = neighbours.spread(scored, q, q_terms)
        for i, c in scored.items():
            if i not in best or c.rank > best[i].rank:
                best[i] = c
    # From here on `rank` is a relevance in [0, 1], comparable across kinds.
    ranked = [_Candidate(c.id, calibration.relevance_of(c.rank), c.z, c.source) for c in best.values()]
    return sorted(ranked, key=lambda c: c.rank, reverse=True)


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


class _Neighbours:
    """Neighbour spreading for one search: a strong exchange lifts the exchanges around it in
    its thread, when they continue its subject.

    A subject is often raised in one exchange and answered in the next: on LoCoMo the evidence
    was the neighbour of the best hit so often that spreading added ~6 points of R@5. In a
    user's chats with an assistant, one thread hops between unrelated subjects, and lifting
    every neighbour put unrelated exchanges among the memories with scores close to the
    hit's own. So a neighbour is lifted only when its vector is close to its hit's
    (cosine >= COHERENCE: two exchanges on one subject), and it keeps its own score: it
    ranks by what it inherits but is shown only as its hit's context.
    """

    def __init__(
        self, store: MemoryStore, queries: list[list[float]], doc_freqs: dict[str, int], total: int, keep: int
    ) -> None:
        self.store = store
        self.keep = keep
        self.queries = queries
        self.doc_freqs = doc_freqs
        self.total = total
        self._vectors: dict[str, Any] = {}
        self._terms: dict[str, frozenset[str]] = {}
        self._links: dict[str, tuple[str | None, str | None]] = {}

    def spread(self, scored: dict[str, _Candidate], q: int, q_terms: list[str]) -> dict[str, _Candidate]:
        """`scored` (query `q`'s candidates) with the coherent neighbours of its best
        NEIGHBOUR_SOURCES lifted; each keeps its own fused score, outside the pool too."""
        top = sorted(scored, key=lambda i: scored[i].z, reverse=True)[:NEIGHBOUR_SOURCES]
        self._links.update(self.store.lexical.neighbours([i for i in top if i not in self._links]))
        lifts: dict[str, tuple[float, str]] = {}
        for source in top:
            before, after = self._links.get(source, (None, None))
            for neighbour, weight in ((after, NEXT_WEIGHT), (before, PREVIOUS_WEIGHT)):
                lifted = weight * scored[source].z
                floor = scored[neighbour].z if neighbour in scored else 0.0
                if neighbour and lifted > floor and lifted > lifts.get(neighbour, (0.0, ""))[0]:
                    lifts[neighbour] = (lifted, source)
        # A lift below the `keep`-th score of this query cannot enter the list read further (the
        # best over several queries only raises that bar): skip its reads, the search's hot path.
        bar = sorted((c.z for c in scored.values()), reverse=True)[self.keep - 1] if len(scored) >= self.keep else 0.0
        lifts = {n: pair for n, pair in lifts.items() if pair[0] >= bar}
        if not lifts:
            return scored
        self._load_vectors([*lifts, *(s for _, s in lifts.values())])
        coherent = {n: pair for n, pair in lifts.items() if self._coherent(n, pair[1])}
        own = self._own_z([n for n in coherent if n not in scored], q, q_terms)
        spread = dict(scored)
        for neighbour, (lifted, source) in coherent.items():
            z = scored[neighbour].z if neighbour in scored else own[neighbour]
            if lifted > z:
                spread[neighbour] = _Candidate(neighbour, lifted, z, source)
        return spread

    def _own_z(self, ids: list[str], q: int, q_terms: list[str]) -> dict[str, float]:
        """The fused score of records outside the pool for query `q` (their terms read in one go)."""
        import numpy as np

        lacking = [i for i in ids if i not in self._terms]
        if lacking:
            self._terms.update(_term_sets(self.store, "exchange", lacking))
        calibration = self.store.calibration
        own = {}
        for i in ids:
            vector = self._vectors.get(i)
            cosine = float(np.clip(np.dot(vector, self.queries[q]), 0.0, 1.0)) if vector is not None else 0.0
            covered = coverage(q_terms, self._terms.get(i, frozenset()), self.doc_freqs, self.total)
            own[i] = calibration.combine(cosine, covered)
        return own

    def _load_vectors(self, ids: list[str]) -> None:
        import numpy as np

        missing = [i for i in dict.fromkeys(ids) if i not in self._vectors]
        if missing:
            got = self.store.fetch("exchange", missing, vectors=True, texts=False)
            for i, vector in zip(got["ids"], got["embeddings"]):
                if vector is not None:
                    self._vectors[i] = np.asarray(vector, dtype=np.float32)

    def _coherent(self, a: str, b: str) -> bool:
        import numpy as np

        va, vb = self._vectors.get(a), self._vectors.get(b)
        return va is not None and vb is not None and float(np.dot(va, vb)) >= COHERENCE
