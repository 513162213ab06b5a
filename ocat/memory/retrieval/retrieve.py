"""The one retrieval that both the chat (before each reply) and `--query-vector-store` run.

Hybrid by default: for each kind of record (exchanges, documents), the nearest records by
embedding and the best BM25 matches from the lexical index form one candidate pool; each
candidate gets a calibrated relevance from its cosine similarity and its coverage of the
query's terms. Exchanges and documents are searched separately (each with its own count
and threshold) and merged by relevance. Per-turn retrieval sends Chroma no `where` filter:
ids to leave out are dropped here, after over-fetching.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import cached_property
from datetime import datetime
from typing import TYPE_CHECKING, Any, Collection, Literal, Sequence

from ocat.memory.retrieval.answer_types import AnswerType, asked_types, typed_lift
from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.retrieval.project_scope import PROJECT_KEY, ProjectScope, stored_projects
from ocat.memory.retrieval.rank import MIN_POOL, POOL_FACTOR, Mode, lifted, rank_candidates
from ocat.memory.retrieval.store_floor import floor_of
from ocat.memory.retrieval.time_range import TimeRange, time_range
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.scoring import Calibration
from ocat.memory.storage.store import MemoryStore
from ocat.memory.storage.terms import queries_terms
from ocat.memory.retrieval.follow_versions import (
    asks_about_now, asks_about_the_past, asks_for_the_first, lift_newer, with_earlier, with_newest,
)
from ocat.memory.retrieval.recency import lift_recent
from ocat.memory.retrieval.verdicts import verdicts
from ocat.records import RecordKind, SearchHit

if TYPE_CHECKING:
    from ocat.config.settings import VectorStoreSettings

# How a time the prompt names is used (docs/RETRIEVAL.md, "Time in the question"): "boost"
# (shipped): every memory, those of that time with `time_boost` added to their fused score before
# the gate; "restrict": only memories of that time, unless none of them is admitted, then all
# dates; "strict": only memories of that time, unless it holds none; "off": not read. The two
# restricting policies are kept for `bench/recall_dated.py`, which measured them against the boost.
TimePolicy = Literal["boost", "restrict", "strict", "off"]
# The boost, in z (a memory covering one more rare word of the question gains about as much),
# scaled by the share of the candidates outside the time: fitted by `bench/recall_dated.py` on
# folds it was not scored on (docs/RETRIEVAL.md, "Time in the question").
TIME_BOOST = 0.2
# Metadata keys of a record's date, per kind (a filter that names one wins over the prompt's words).
DATE_KEYS = {"exchange": "timestamp", "document": "date_added"}


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
    # What a time the prompt names does to the search ("last week", "in March": TimePolicy);
    # the chat's and every explicit search's limits boost by TIME_BOOST (vector_store.time_in_prompt).
    time_policy: TimePolicy = "off"
    time_boost: float = 0.0
    # Which project's exchanges this search prefers or keeps only (the chat's, `--project`).
    project: ProjectScope = ProjectScope()

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
            time_policy="boost" if vector_store.time_in_prompt else "off",
            time_boost=TIME_BOOST,
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
    now: datetime | None = None,
) -> list[SearchHit]:
    """Memories for a query, best first, each marked with its threshold (see SearchHit.admitted).

    `exclude_ids` drops records already in view (the conversation sent as history); `where`
    is a Chroma metadata filter (for scripts and the CLI; slow on large stores); `limit`
    caps the merged list. Nothing is filtered by threshold here, so callers can show what
    fell short; the chat injects only admitted hits. `mode` picks the hybrid scorer or one
    side alone (the evaluation's baselines). A time the query names ("last week") is read
    as seen from `now` (default: the clock), per `limits.time_policy`.
    """
    hits = _retrieve(store, [query], limits, exclude_ids=exclude_ids, where=where, mode=mode, now=now)
    return hits[:limit] if limit is not None else hits


def retrieve_any(
    store: MemoryStore,
    queries: Sequence[str],
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str] = (),
    now: datetime | None = None,
) -> list[SearchHit]:
    """Retrieve for several queries and keep each memory's best score (per-kind counts still hold).

    The queries share the work: one embedding call, one nearest-neighbour call per kind,
    one read of vectors and one of texts, so a chat turn's two searches cost little more than one.
    The first query is the one whose time is read (the chat's prompt; the others add context).
    """
    return _retrieve(store, queries, limits, exclude_ids=exclude_ids, now=now)


def _retrieve(
    store: MemoryStore,
    queries: Sequence[str],
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str],
    where: dict[str, Any] | None = None,
    mode: Mode = "hybrid",
    now: datetime | None = None,
) -> list[SearchHit]:
    queries = [q for q in queries if q.strip()]
    if not queries:
        return []
    dated = _dated(queries[0], limits, where, now)
    # Background work on the store (the passage backfill) steps aside while this runs.
    foreground = getattr(store, "foreground", None)
    with foreground.searching() if foreground is not None else nullcontext():
        return _ranked(store, queries, limits, exclude_ids, where, mode, dated)


def _ranked(
    store: MemoryStore,
    queries: list[str],
    limits: RetrievalLimits,
    exclude_ids: Collection[str],
    where: dict[str, Any] | None,
    mode: Mode,
    dated: TimeRange | None,
) -> list[SearchHit]:
    if mode == "hybrid":
        try:
            return _search(store, queries, limits, exclude_ids=exclude_ids, where=where, mode=mode, dated=dated)
        except DerivedFileError as exc:
            # A damaged index degrades this search to the vectors, never fails it; the next
            # turn (or open) rebuilds the file from the store.
            store.derived_failed(exc)
            mode = "vectors"
    return _search(store, queries, limits, exclude_ids=exclude_ids, where=where, mode=mode, dated=dated)


def _both(where: dict[str, Any] | None, more: dict[str, Any] | None) -> dict[str, Any] | None:
    """Two Chroma filters that must both hold (either may be None)."""
    if where is None or more is None:
        return where or more
    return {"$and": [where, more]}


def _dated(
    query: str, limits: RetrievalLimits, where: dict[str, Any] | None, now: datetime | None
) -> TimeRange | None:
    """The time the query names, when the policy reads it and no filter already names a date
    (the model's `after`/`before`, `--where date>=...`: those win over the words)."""
    if limits.time_policy == "off" or _names_a_date(where):
        return None
    return time_range(query, now or datetime.now())


def _names_a_date(where: Any) -> bool:
    if isinstance(where, dict):
        return any(key in DATE_KEYS.values() or _names_a_date(value) for key, value in where.items())
    if isinstance(where, list):
        return any(_names_a_date(item) for item in where)
    return False


def _search(
    store: MemoryStore,
    queries: Sequence[str],
    limits: RetrievalLimits,
    *,
    exclude_ids: Collection[str],
    where: dict[str, Any] | None,
    mode: Mode,
    dated: TimeRange | None = None,
) -> list[SearchHit]:
    query_terms = queries_terms(queries)
    vectors = store.embedder.embed(queries) if mode != "lexical" else None
    hits_found: list[SearchHit] = []
    per_kind: tuple[tuple[RecordKind, int, float], ...] = (
        ("exchange", limits.exchange_results, limits.exchange_threshold),
        ("document", limits.document_results, limits.document_threshold),
    )
    for kind, count, threshold in per_kind:
        if count <= 0 or (store.count(kind) if mode == "vectors" else store.lexical.count(kind)) == 0:
            continue
        search = _KindSearch(store, kind, query_terms, vectors, count, threshold, limits, exclude_ids, mode,
                             asks_now=asks_about_now(queries[0]), asks_past=asks_about_the_past(queries[0]),
                             asked=asked_types(queries[0]) if kind == "document" and mode == "hybrid" else ())
        # `only` a project keeps its exchanges; documents and notes are not a project's.
        kind_where = _both(where, _project_where(store, limits.project)) if kind == "exchange" else where
        found = search.hits(kind_where) if dated is None else _within(search, dated, kind_where, limits)
        found = with_newest(store, found, exclude_ids=exclude_ids, where=kind_where, past=search.asks_past)
        if search.asks_past:
            found = with_earlier(store, found, first=asks_for_the_first(queries[0]), exclude_ids=exclude_ids,
                                 where=kind_where)
        hits_found.extend(found)
    # What the chat reads comes first, best first; what is listed beyond it follows.
    hits_found.sort(key=lambda hit: hit.order, reverse=True)
    return hits_found


def _project_where(store: MemoryStore, scope: ProjectScope) -> dict[str, Any] | None:
    """The filter of a search kept to one project: every folder stored that belongs to it."""
    return scope.where(stored_projects(store)) if scope.where() is not None else None


@dataclass(frozen=True)
class _KindSearch:
    """One kind's search for the queries: rank, read the few kept, give each its verdict."""

    store: MemoryStore
    kind: RecordKind
    query_terms: list[list[str]]
    vectors: list[list[float]] | None
    count: int
    threshold: float
    limits: RetrievalLimits
    exclude_ids: Collection[str]
    mode: Mode
    # The question asks how things are now: the newer of two versions found together is lifted,
    # and the newer of the exchanges found (ocat.memory.retrieval.recency).
    asks_now: bool = False
    # The question asks how things were: a version that a newer one updates stands a little under the gate.
    asks_past: bool = False
    # What the question asks for (a phone number, who supplies ...): a document may hold it (answer_types).
    asked: tuple[AnswerType, ...] = ()

    @property
    def shown(self) -> int:
        return max(self.count, self.limits.listed)

    @cached_property
    def judged(self) -> Calibration:
        # An exchange is judged against its store's floor (ocat.memory.retrieval.store_floor); the baselines are not.
        shift = floor_of(self.store).shift() if self.kind == "exchange" and self.mode == "hybrid" else 0.0
        return self.store.calibration.raised(shift)

    def ranked(self, where: dict[str, Any] | None) -> list[Candidate]:
        # The pool follows the chat's count, never the number listed, so that listing more
        # (--results 10) ranks exactly as the chat does; it grows only to have `shown` at all.
        pool = max(MIN_POOL, POOL_FACTOR * self.count, self.shown) + len(self.exclude_ids)
        return rank_candidates(
            self.store, self.kind, self.query_terms, self.vectors, pool, where, self.mode,
            keep=2 * self.count + len(self.exclude_ids), judged=self.judged,
        )

    def dates(self, ids: Sequence[str]) -> dict[str, float]:
        """When each of these records was made (an exchange's time, a document's date added):
        exchanges from the lexical index's thread order, the rest (and any exchange it lacks)
        from Chroma."""
        known = self.store.threads.times(ids) if self.kind == "exchange" else {}
        missing = [i for i in ids if i not in known]
        if not missing:
            return known
        got = self.store.fetch(self.kind, missing, vectors=False)
        key = DATE_KEYS[self.kind]
        return known | {
            i: float(m[key]) for i, m in zip(got["ids"], got["metadatas"])
            if m and isinstance(m.get(key), (int, float)) and not isinstance(m.get(key), bool)
        }

    def hits(self, where: dict[str, Any] | None, ranked: list[Candidate] | None = None) -> list[SearchHit]:
        """The hits of `ranked` (default: this search's own ranking under `where`)."""
        ranked = self.ranked(where) if ranked is None else ranked
        candidates = [c for c in ranked if c.id not in self.exclude_ids]
        scope = self.limits.project
        lifting = self.kind == "exchange" and scope.preferring
        # Texts and metadata are read only now, and only for these few (neighbours included);
        # a preferred project is told from the same read (the ranking keeps about as many).
        read = candidates if lifting else candidates[: 2 * self.shown]
        got = self.store.fetch(self.kind, [c.id for c in read], where=where, vectors=False)
        records = {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
        # The chat's hits are made from what the chat's own read holds (its count's window), so
        # that listing more (--results 10) reads further without moving them or their verdicts;
        # what it lists past them follows, in the order they rank.
        window = 2 * self.count
        seen = records if lifting or len(read) <= window else {
            c.id: records[c.id] for c in read[:window] if c.id in records}
        if lifting:
            candidates = self._project_lifted(candidates, scope, records)
        raised: set[str] = set()
        if self.asks_now:
            candidates = lift_newer(candidates, seen, self.judged)
            if self.kind == "exchange":
                candidates, raised = lift_recent(candidates, seen, self.judged, reach=self.count)
        if self.asked:
            candidates = typed_lift(candidates[:window], seen, self.query_terms[0], self.asked, self.store,
                                    self.judged) + candidates[window: 2 * self.shown]
        chat_hits = [c for c in candidates[:window] if c.id in seen][: self.count]
        taken = {c.id for c in chat_hits}
        past = [c for c in candidates[: 2 * self.shown] if c.id in records and c.id not in taken]
        kept = chat_hits + past[: self.shown - len(chat_hits)]
        return verdicts(kept, records, self.kind, self.threshold, self.judged, reach=self.count,
                        eased=self.asks_past, raised=raised)

    def _project_lifted(
        self, ranked: list[Candidate], scope: ProjectScope, records: dict[str, tuple[str, dict[str, Any]]]
    ) -> list[Candidate]:
        """The ranking with the preferred project's exchanges lifted (ProjectScope.lift), before the gate."""
        found = [c.id for c in ranked if c.source is None]  # a lifted neighbour is scored by its own hit
        projects = {i: str(records[i][1].get(PROJECT_KEY) or "") for i in found if i in records}
        inside, boost = scope.lift(found, projects)
        return lifted(ranked, inside, boost, self.judged)


def _within(
    search: _KindSearch, dated: TimeRange, where: dict[str, Any] | None, limits: RetrievalLimits
) -> list[SearchHit]:
    """One kind's hits for a query that names a time, per the time policy (TimePolicy)."""
    if limits.time_policy == "boost":
        return _boosted(search, dated, where, limits.time_boost)
    start, end = dated.bounds()
    key = DATE_KEYS[search.kind]
    span: dict[str, Any] = {key: {"$lt": end}}
    if start is not None:
        span = {"$and": [{key: {"$gte": start}}, span]}
    said = dated.said()
    hits = search.hits(_both(where, span))
    if any(h.admitted for h in hits) or (limits.time_policy == "strict" and hits):
        return [replace(h, dated=f"only memories {said}") for h in hits]
    # Nothing of that time is worth giving: the words may name the wrong time (or when the
    # thing happens, not when it was said), so every date is searched, and the hits say so.
    return [replace(h, dated=f"nothing relevant {said}, so memories of any date") for h in search.hits(where)]


def _boosted(search: _KindSearch, dated: TimeRange, where: dict[str, Any] | None, size: float) -> list[SearchHit]:
    """Every memory; those of that time with `size` added to their fused score, before the gate.

    The boost is what the time tells apart: it is scaled by the share of the candidates found
    outside that time, so a time that holds them all ("this year", in a store of this year)
    moves nothing. The candidates are the plain search's: asking Chroma for that time's own
    best as well (a `where` on dates) found the answer of one more of LoCoMo's 37 dated
    questions, and cost 100-400 ms on a store of 10,000 exchanges (docs/RETRIEVAL.md, "Time in
    the question").
    """
    ranked = search.ranked(where)
    found = [c.id for c in ranked if c.source is None]  # a lifted neighbour is scored by its own hit
    when = search.dates(found)
    inside = {i for i in found if i in when and dated.holds(when[i])}
    boost = size * (len(found) - len(inside)) / len(found) if found else 0.0
    if not inside or not boost:
        return search.hits(where, ranked)
    ranking = lifted(ranked, inside, boost, search.judged)
    said = f"memories {dated.said()} ranked higher"
    return [replace(h, dated=said) if h.id in inside else h for h in search.hits(where, ranking)]
