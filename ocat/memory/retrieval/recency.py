"""Asked about now, the newer of the memories found weigh more.

"What did the roof end up costing us?" finds the delay clause, the rainwater sums and the final
bill, all about the roof; the final bill is the newest and the answer. Links between versions
(ocat.memory.retrieval.follow_versions) say which memory updates which, but the finder misses
some (changing-dev: 19 of the README's 43 pairs): a fact's newest version may state it in other
words, or no value its older one states. So when a question asks how things are now
(`follow_versions.asks_about_now`), the exchanges found are lifted by how recent they are
among them: the newest by RECENT_LIFT in fused score, the oldest by nothing, the rest in
proportion to their time. Only the chat's own count of them is lifted (the first five, by
default): the lift reorders what the chat would read, and never brings in a memory from past it.

No memory is lifted above the best one found, so a question that finds nothing worth giving
still finds nothing. Measured with
bench/recall_changing.py and bench/recall.py (docs/RETRIEVAL.md, "Facts that change").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.storage.scoring import Calibration
from ocat.records import made_at

# How much more (in fused score z) the newest memory lifted scores than the oldest, asked about
# now. Measured on changing-dev (docs/RETRIEVAL.md, over the window of ten before the cap): 0.10
# reached one more current value, 0.15 two, 0.20 no more than 0.15.
RECENT_LIFT = 0.15


def lift_recent(
    ranked: Sequence[Candidate], records: Mapping[str, tuple[str, Mapping[str, Any]]], judged: Calibration,
    *, reach: int, lift: float | None = None,
) -> tuple[list[Candidate], set[str]]:
    """`ranked` with the first `reach` of the memories read (`records`: the chat's window; `reach`:
    the chat's count) lifted by their time among them (by `lift`, default RECENT_LIFT), never
    above the best of them; ranked again. Also the ids that rose. A neighbour lent a score (a
    candidate with a `source`) keeps it, and a record without a time is not lifted."""
    lift = RECENT_LIFT if lift is None else lift
    # Only what the chat would give anyway is reordered: a memory from past its count never
    # comes in (with the window of twice the count, a user's chats lost a target from the top 5).
    within = [c for c in ranked if c.id in records][:reach]
    read = {c.id: made_at(records[c.id][1]) for c in within if c.source is None}
    when = {i: t for i, t in read.items() if t is not None}
    if lift <= 0 or len(when) < 2:
        return list(ranked), set()
    oldest, newest = min(when.values()), max(when.values())
    if newest <= oldest:
        return list(ranked), set()
    best = max(c.z for c in ranked if c.id in when)
    lifted: list[Candidate] = []
    rose: set[str] = set()
    for c in ranked:
        if c.id in when:
            z = max(c.z, min(best, c.z + lift * (when[c.id] - oldest) / (newest - oldest)))
            if z > c.z:
                c = replace(c, rank=judged.relevance_of(z), z=z)
                rose.add(c.id)
        lifted.append(c)
    return sorted(lifted, key=lambda c: c.rank, reverse=True), rose
