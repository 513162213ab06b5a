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
from typing import TYPE_CHECKING, Any, Collection, Sequence

from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.retrieval.rank import MIN_POOL, POOL_FACTOR, Mode, rank_candidates
from ocat.memory.retrieval.store_floor import floor_of
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.scoring import Calibration
from ocat.memory.storage.store import MemoryStore
from ocat.memory.storage.terms import query_terms as terms_of_query
from ocat.records import SUPERSEDED_KEY, RecordKind, SearchHit

if TYPE_CHECKING:
    from ocat.settings import VectorStoreSettings

# A hit whose fused score is more than this below the best hit of its kind is left out even
# above the threshold; fitted with the gate by `bench/recall.py --folds` (docs/RETRIEVAL.md,
# "Cross-validated figures": 0.50 on every held-out fold; on chats-dev 75% of targets are
# within 0.27 of the best).
MARGIN = 0.50


@dataclass(frozen=True)
class RetrievalLimits:
    """How many of each kind to fetch, and the relevance each must reach to be admitted."""

    exchange_results: int
    document_results: int
    exchange_threshold: float
    document_threshold: float
    # How many of each kind to list (the CLI's --results) when more than the counts above:
    # the ranking and the verdicts stay those of the counts (what the chat reads), and a hit
    # past its kind's count is listed as `beyond` (never given to the model in a chat).
    listed: int = 0

    @classmethod
    def from_settings(cls, vector_store: VectorStoreSettings, *, results: int | None = None) -> RetrievalLimits:
        """The chat's limits from `vector_store` settings; `results` (the CLI's --results) lists
        that many of each kind from the same ranking."""
        return cls(
            exchange_results=vector_store.context_results,
            document_results=vector_store.memory_results,
            exchange_threshold=vector_store.similarity_threshold,
            document_threshold=vector_store.memory_threshold,
            listed=results or 0,
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
    if mode == "hybrid":
        try:
            return _search(store, queries, limits, exclude_ids=exclude_ids, where=where, mode=mode)
        except DerivedFileError as exc:
            # A damaged index degrades this search to the vectors, never fails it; the next
            # turn (or open) rebuilds the file from the store.
            store.derived_failed(exc)
            mode = "vectors"
    return _search(store, queries, limits, exclude_ids=exclude_ids, where=where, mode=mode)


def _search(
    store: MemoryStore,
    queries: Sequence[str],
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str],
    where: dict[str, Any] | None,
    mode: Mode,
) -> list[SearchHit]:
    query_terms = [terms_of_query(q) for q in queries]
    vectors = store.embedder.embed(queries) if mode != "lexical" else None
    hits_found: list[SearchHit] = []
    per_kind: tuple[tuple[RecordKind, int, float], ...] = (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    )
    for kind, count, threshold in per_kind:
        if count <= 0 or (store.count(kind) if mode == "vectors" else store.lexical.count(kind)) == 0:
            continue
        shown = max(count, limits.listed)
        # The pool follows the chat's count, never the number listed, so that listing more
        # (--results 10) ranks exactly as the chat does; it grows only to have `shown` at all.
        pool = max(MIN_POOL, POOL_FACTOR * count, shown) + len(exclude_ids)
        # An exchange is judged against its store's floor (ocat.memory.retrieval.store_floor); the baselines are not.
        judged = store.calibration.raised(floor_of(store).shift() if kind == "exchange" and mode == "hybrid" else 0.0)
        ranked = rank_candidates(
            store, kind, query_terms, vectors, pool, where, mode, keep=2 * shown + len(exclude_ids), judged=judged
        )
        wanted = [c for c in ranked if c.id not in exclude_ids][: 2 * shown]
        # Texts and metadata are read only now, and only for these few (neighbours included).
        got = store.fetch(kind, [c.id for c in wanted], where=where, vectors=False)
        records = {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
        kept = [c for c in wanted if c.id in records][:shown]
        hits_found.extend(_verdicts(kept, records, kind, threshold, judged, reach=count))
    # What the chat reads comes first, best first; what is listed beyond it follows.
    hits_found.sort(key=lambda hit: hit.order, reverse=True)
    return hits_found


def _verdicts(
    kept: Sequence[Candidate],
    records: dict[str, tuple[str, dict[str, Any]]],
    kind: RecordKind,
    threshold: float,
    calibration: Calibration,
    *,
    reach: int,
) -> list[SearchHit]:
    """One kind's hits with their verdicts: own memory, outranked, or context of another hit.

    A hit stands on its own when its own relevance reaches the threshold and its fused score
    is within MARGIN of the best hit's. A hit that is in the list only because a neighbour
    lifted it (and could not stand on its own) is that neighbour's context: shown to the
    model only with it. Only the first `reach` (the chat's count) can be given to the model;
    the rest are `beyond`, and the best is taken among the first `reach` alone, so listing
    more never changes a verdict.
    """
    best = max((c.z for c in kept[:reach]), default=0.0)
    # A note the model replaced (`remember` with `replaces`) stays, but never stands on its own:
    # the newer one is the memory to give.
    replaced = {c.id for c in kept if records[c.id][1].get(SUPERSEDED_KEY)}
    standing = {
        c.id for c in kept[:reach]
        if calibration.relevance_of(c.z) >= threshold and c.z >= best - MARGIN and c.id not in replaced
    }
    hits = []
    for position, c in enumerate(kept):
        own = calibration.relevance_of(c.z)
        beyond = position >= reach
        context_of = c.source if c.id not in standing and c.source is not None else None
        hits.append(
            SearchHit(
                id=c.id, kind=kind, score=own, text=records[c.id][0], metadata=records[c.id][1], threshold=threshold,
                context_of=context_of,
                outranked=not beyond and context_of is None and own >= threshold and c.id not in standing,
                with_admitted=not beyond and context_of is not None and context_of in standing,
                beyond=beyond,
                rank=c.rank,
            )
        )
    return hits


def admitted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits relevant enough to show the model."""
    return [h for h in hits if h.admitted]


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


