"""Neighbour spreading: a strong exchange lifts the exchanges around it in its thread.

Part of `ocat.memory.retrieval.retrieve` (the candidates it scores, and the one step that reaches
outside the candidate pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocat.memory.storage.terms import term_set
from ocat.memory.storage.scoring import coverage
from ocat.memory.storage.store import MemoryStore
from ocat.records import RecordKind

# Neighbour spreading (see Neighbours), measured on the dev set: the exchange
# after a hit inherits 0.8 of its score, the one before it 0.7, from the best 30 hits.
NEXT_WEIGHT = 0.8
PREVIOUS_WEIGHT = 0.7
NEIGHBOUR_SOURCES = 30
# A neighbour is lifted only when it continues its hit's subject: the two exchanges' vectors
# have at least this cosine. Adjacent exchanges in LoCoMo's conversations have a median of
# 0.59; in chats-dev, where threads hop between subjects, 0.22 (unrelated pairs: 0.15-0.44).
COHERENCE = 0.3


@dataclass(frozen=True)
class Candidate:
    """One record's scores for a search: `rank` orders the list, `z` is its own fused score."""

    id: str
    rank: float
    z: float
    # The exchange whose score lifted this one (its thread neighbour), when the lift is what ranks it.
    source: str | None = None


def record_terms(store: MemoryStore, kind: RecordKind, ids: list[str]) -> dict[str, frozenset[str]]:
    """Candidates' terms from the lexical index; from their texts in Chroma for any it lacks
    (the index can trail Chroma for a moment when another process writes)."""
    found = store.lexical.term_sets(kind, ids)
    lacking = [i for i in ids if i not in found]
    if lacking:
        got = store.fetch(kind, lacking, vectors=False)
        found.update((i, term_set(t or "")) for i, t in zip(got["ids"], got["documents"]))
    return found


class Neighbours:
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
        self.prompt_side = store.calibration.prompt_side
        self.keep = keep
        self.queries = queries
        self.doc_freqs = doc_freqs
        self.total = total
        self._vectors: dict[str, Any] = {}
        self._terms: dict[str, frozenset[str]] = {}
        self._links: dict[str, tuple[str | None, str | None]] = {}

    def spread(self, scored: dict[str, Candidate], q: int, q_terms: list[str]) -> dict[str, Candidate]:
        """`scored` (query `q`'s candidates) with the coherent neighbours of its best
        NEIGHBOUR_SOURCES lifted; each keeps its own fused score, outside the pool too."""
        top = sorted(scored, key=lambda i: scored[i].z, reverse=True)[:NEIGHBOUR_SOURCES]
        self._links.update(self.store.threads.neighbours([i for i in top if i not in self._links]))
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
                spread[neighbour] = Candidate(neighbour, lifted, z, source)
        return spread

    def _own_z(self, ids: list[str], q: int, q_terms: list[str]) -> dict[str, float]:
        """The fused score of records outside the pool for query `q` (their terms read in one go)."""
        import numpy as np

        lacking = [i for i in ids if i not in self._terms]
        if lacking:
            self._terms.update(record_terms(self.store, "exchange", lacking))
        calibration = self.store.calibration
        prompts = self.store.prompts.similarities(ids, [self.queries[q]]) if self.prompt_side else {}
        own = {}
        for i in ids:
            vector = self._vectors.get(i)
            cosine = float(np.clip(np.dot(vector, self.queries[q]), 0.0, 1.0)) if vector is not None else 0.0
            cosine = max(cosine, prompts.get(i, [0.0])[0])
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
