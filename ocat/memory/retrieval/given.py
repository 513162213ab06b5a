"""What of a search's hits the model is given: the admitted ones, as many as fit the memory budget."""

from __future__ import annotations

from typing import Sequence

from ocat.records import SearchHit
from ocat.text.tokens import estimate_tokens


def admitted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits relevant enough to show the model."""
    return [h for h in hits if h.admitted]


def within_budget(hits: Sequence[SearchHit], budget: int) -> list[SearchHit]:
    """The best hits whose texts fit in `budget` tokens together (hits come best first).

    A hit too big for what is left is skipped, so a smaller, less relevant one may follow.
    """
    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        if hit.context_of is not None and hit.context_of not in {k.id for k in kept}:
            continue  # context comes only with the memory it belongs to
        cost = estimate_tokens(hit.text)
        if used + cost <= budget:
            kept.append(hit)
            used += cost
    # An outdated version never goes alone: one whose newest version did not fit goes too, and so
    # does an earlier version whose newer one (that brought it) did not. Asked about the past, the
    # outdated version is the one asked for: its newest version only takes the room left.
    dropped = {h.newest_of for h in hits if h.newest_of is not None and not h.after_found} - {h.newest_of for h in kept}
    if dropped:
        kept = [h for h in kept if h.id not in dropped and h.context_of not in dropped]
    staying = {h.id for h in kept}
    return [h for h in kept if h.earlier_of is None or h.earlier_of in staying]


