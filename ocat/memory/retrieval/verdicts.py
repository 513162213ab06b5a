"""A search's verdicts on what it kept: which hits stand on their own, which are another's
thread context, which are left out as far weaker than the best, and which only a longer listing
shows (ocat.memory.retrieval.retrieve)."""

from __future__ import annotations

from typing import Any, Collection, Sequence

from ocat.memory.retrieval.follow_versions import gate_of
from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.storage.scoring import Calibration
from ocat.records import SUPERSEDED_KEY, RecordKind, SearchHit

# A hit whose fused score is more than this below the best hit of its kind is left out even
# above the threshold; fitted with the gate by `bench/recall.py --folds` (docs/RETRIEVAL.md,
# "Cross-validated figures": 0.50 on every held-out fold; on chats-dev 75% of targets are
# within 0.27 of the best).
MARGIN = 0.50


def verdicts(
    kept: Sequence[Candidate],
    records: dict[str, tuple[str, dict[str, Any]]],
    kind: RecordKind,
    threshold: float,
    calibration: Calibration,
    *,
    reach: int,
    eased: bool = False,
    raised: Collection[str] = (),
) -> list[SearchHit]:
    """One kind's hits with their verdicts: own memory, outranked, or context of another hit.

    A hit stands on its own when its own relevance reaches the threshold and its fused score
    is within MARGIN of the best hit's. A hit that is in the list only because a neighbour
    lifted it (and could not stand on its own) is that neighbour's context: shown to the
    model only with it. Only the first `reach` (the chat's count) can be given to the model;
    the rest are `beyond`, and the best is taken among the first `reach` alone, so listing
    more never changes a verdict. `raised`: the hits a question about now ranked up as newer
    (ocat.memory.retrieval.recency), so marked.
    """
    best = max((c.z for c in kept[:reach]), default=0.0)
    # A note the model replaced (`remember` with `replaces`) stays, but never stands on its own:
    # the newer one is the memory to give.
    replaced = {c.id for c in kept if records[c.id][1].get(SUPERSEDED_KEY)}
    # For a question about the past, a version that a newer one updates stands a little under the
    # gate (follow_versions.gate_of).
    gates = {c.id: gate_of(records[c.id][1], threshold) if eased else threshold for c in kept}
    standing = {
        c.id for c in kept[:reach]
        if calibration.relevance_of(c.z) >= gates[c.id] and c.z >= best - MARGIN and c.id not in replaced
    }
    hits = []
    for position, c in enumerate(kept):
        own = calibration.relevance_of(c.z)
        beyond = position >= reach
        context_of = c.source if c.id not in standing and c.source is not None else None
        hits.append(
            SearchHit(
                id=c.id, kind=kind, score=own, text=records[c.id][0], metadata=records[c.id][1],
                threshold=gates[c.id], eased=c.id in standing and own < threshold,
                context_of=context_of,
                outranked=not beyond and context_of is None and own >= gates[c.id] and c.id not in standing,
                with_admitted=not beyond and context_of is not None and context_of in standing,
                beyond=beyond,
                rank=c.rank,
                raised_as_newer=c.id in raised,
            )
        )
    return hits
