"""The search operation: an explicit search of one or several stores, and the one shape of a hit.

`--query-vector-store`, `/vquery` and MCP's `search_memory` all search here and render what
`search` returns; `hit_record` is the JSON form every face prints, `HitLine` the words.
(The chat's own per-turn recall is `ChatSession.recall`: it excludes what is in view and
keeps to a token budget.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, Sequence

from ocat.records import SUPERSEDED_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, UPDATED_BY_KEY, SearchHit
from ocat.text.terminal import count_of
from ocat import memory
from ocat.operations.lookup import short_id
from ocat.operations.versions import link_fields, link_words, update_words

if TYPE_CHECKING:
    from ocat.memory import StoreHit
    from ocat.memory import Filters
    from ocat.memory import ProjectScope
    from ocat.memory import MemoryStore
    from ocat.config.settings import VectorStoreSettings

# Left out of a hit's metadata: an exchange's text already holds its prompt and answer, `kind`
# is said once per hit, the hashes mean nothing to a reader, and a link is said by `link_fields`;
# repeating them costs tokens.
REPEATED_METADATA = frozenset({"user_prompt", "assistant_response", "kind", "content_hash", "document_id",
                               UPDATED_BY_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY})


@dataclass(frozen=True)
class Found:
    """One hit of a search: the memory, why it is (not) given to the model, and its store."""

    hit: SearchHit
    why: str
    store: str
    # The shortest start of the hit's id unique in its store (ocat.operations.lookup.short_id),
    # shown by the text faces so `/vget` and `/vdelete` can be given it; "" when not worked out.
    short_id: str = ""

    @property
    def shown_id(self) -> str:
        """The id a text face shows: the short one, else the first characters of the whole one."""
        return self.short_id or self.hit.id[:8]


@dataclass(frozen=True)
class SearchResult:
    """What a search found, best first, and which stores it read."""

    query: str
    found: list[Found]
    stores: list[str]

    @property
    def hits(self) -> list[SearchHit]:
        """The hits alone, best first."""
        return [f.hit for f in self.found]

    @property
    def dated(self) -> str:
        """How a time the query named was used ("only memories dated 2026-03-01..2026-03-31, from
        'in March'"), or "" when it named none."""
        return dated_note(self.hits)


def dated_note(hits: Sequence[SearchHit]) -> str:
    """What the hits say of the time their query named, once ("" when it named none): the
    search kept to that time, or found nothing relevant there and searched every date."""
    return "; ".join(dict.fromkeys(h.dated for h in hits if h.dated))


def search(
    stores: Sequence[MemoryStore],
    query: str,
    settings: VectorStoreSettings,
    *,
    count: int | None = None,
    filters: Filters | None = None,
    short_ids: bool = False,
    now: datetime | None = None,
    project: ProjectScope | None = None,
) -> SearchResult:
    """The `count` (default `context_results`) most relevant memories for `query` in `stores`,
    merged by score, each with the reason it is or is not given to the model in a chat.

    `short_ids`: also work out each hit's shortest unique id, for a face that shows ids to
    type back (a few index reads per hit; JSON and MCP give whole ids and skip them). A time
    the query names ("last week") is read as seen from `now` (default: the clock). `project`:
    the exchanges of a project preferred, or kept only (ocat.memory.ProjectScope).
    """
    count = count or settings.context_results
    limits = memory.RetrievalLimits.from_settings(settings, results=count)
    if project is not None:  # the chat's scope, or --project: which project's exchanges come first, or only
        limits = replace(limits, project=project)
    found = shown_order(memory.search_stores(stores, query, limits, filters, limit=count, now=now))
    why = reasons([f.hit for f in found])
    by_name = {s.name: s for s in stores} if short_ids else {}
    return SearchResult(
        query=query,
        found=[Found(f.hit, w, f.store, short_id(by_name[f.store], f.hit.id) if f.store in by_name else "")
               for f, w in zip(found, why)],
        stores=[s.name for s in stores],
    )


def shown_order(found: Sequence[StoreHit]) -> list[StoreHit]:
    """The order every face lists a search in: what a chat gives the model first, in the chat's
    own order (a memory, then the thread neighbours given with it); then the rest by their
    own score, best first; then what `--results` lists past the chat's count, by score too.

    Retrieval ranks a neighbour by what it inherits from its memory, not by its own score, so
    in the chat's order a 0.06 neighbour can stand above a 0.10 hit that is not given: listing
    the given ones first keeps every mark and score in an order a reader can follow.
    """
    def by_score(group: list[StoreHit]) -> list[StoreHit]:
        return sorted(group, key=lambda f: f.hit.score, reverse=True)

    given = [f for f in found if f.hit.admitted]
    return given + by_score([f for f in found if not f.hit.admitted and not f.hit.beyond]) + by_score(
        [f for f in found if f.hit.beyond])


# What a hit ranked up as one of the newer memories found says (ocat.memory.retrieval.recency).
RAISED_WORDS = "ranked up as newer, asked about now"


def reasons(hits: Sequence[SearchHit]) -> list[str]:
    """Why each hit is or is not given to the model, in words, naming other hits by position (#1
    first): the verdicts are retrieval's (ocat.memory.retrieval), the words every face's."""
    position = {h.id: n for n, h in enumerate(hits, start=1)}
    best: dict[str, int] = {}  # the first hit of each kind that is given on its own: what an outranked one is far below
    for hit in hits:
        if hit.admitted and hit.context_of is None:
            best.setdefault(hit.kind, position[hit.id])
    said = []
    for hit in hits:
        if hit.beyond:
            said.append("past the chat's count")
        elif hit.context_of is not None:
            where = f"#{position[hit.context_of]}" if hit.context_of in position else hit.context_of[:8]
            said.append(f"next to {where} in its thread" + ("" if hit.with_admitted else ", not given"))
        elif hit.metadata.get(SUPERSEDED_KEY):
            said.append(f"replaced by {str(hit.metadata[SUPERSEDED_KEY])[:12]}")
        elif hit.newest_of is not None:
            older = f"#{position[hit.newest_of]}" if hit.newest_of in position else hit.newest_of[:8]
            said.append(f"the newest version of {older}" + (", after the memories found: asked about the past"
                                                            if hit.after_found else ""))
            continue  # given with the version it updates, whatever its own score
        elif hit.earlier_of is not None:
            newer = f"#{position[hit.earlier_of]}" if hit.earlier_of in position else hit.earlier_of[:8]
            said.append(f"an earlier version of {newer}, asked about the past")
            if update := update_words(hit):
                said[-1] += f"; {update}"
            continue
        elif hit.score < hit.threshold:
            said.append(f"below threshold {hit.threshold:.2f}")
        elif hit.outranked:
            said.append(f"far weaker than #{best[hit.kind]}" if hit.kind in best else "far weaker than the best")
        elif hit.eased:
            said.append(f"earlier version, asked about the past (threshold {hit.threshold:.2f})")
        else:
            said.append("relevant")
        if hit.raised_as_newer:
            said[-1] += f"; {RAISED_WORDS}"
        if not hit.metadata.get(SUPERSEDED_KEY) and (link := link_words(hit)):  # an outdated version says so
            said[-1] += f"; {link}"
    return said


def hit_record(
    hit: SearchHit, *, why: str | None = None, store: str | None = None, compact: bool = False, brief: bool = False
) -> dict[str, Any]:
    """A hit as JSON (the CLI, `--ask`, MCP): id, store, kind, score, whether and why it is given
    to the model, date, excerpt, text and metadata.

    `compact` (for models reading it, where every token counts) leaves out the excerpt and the
    metadata the text already says; `brief` cuts the text to a 300-character excerpt.
    """
    record: dict[str, Any] = {"id": hit.id}
    if store is not None:
        record["store"] = store
    record |= {"kind": hit.kind, "score": round(hit.score, 4), "admitted": hit.admitted}
    if why is not None:
        record |= {"why": why, "context_of": hit.context_of}
    record |= link_fields(hit)  # updated_by (with its evidence and how) and updates, when linked
    record["date"] = iso_date(hit.timestamp)
    if hit.dated:
        record["dated"] = hit.dated
    if hit.raised_as_newer:
        record["raised_as_newer"] = True
    if not compact:
        record["excerpt"] = hit.excerpt()
    record["text"] = hit.excerpt(300) if brief else hit.text
    record["metadata"] = (
        {k: v for k, v in hit.metadata.items() if k not in REPEATED_METADATA} if compact else hit.metadata
    )
    return record


def iso_date(timestamp: float | None) -> str | None:
    """A stored time as a local ISO 8601 date and time; None when there is none (or no date holds it)."""
    try:
        return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds") if timestamp else None
    except (OverflowError, OSError, ValueError):  # a stored time no date can hold (NaN, 1e300)
        return None


def score_text(score: float) -> str:
    """A score to two decimals, rounded down: 0.6996 shows 0.69, so a hit shown at the
    threshold (0.70 at 0.70) really reaches it and the admitted mark never contradicts it."""
    if not math.isfinite(score) or abs(score) >= 1e9:  # no score is; a quantize would fail
        return f"{score:.2f}"
    # Through the decimal digits Python prints, not score * 100: 0.29 * 100 is 28.999….
    return str(Decimal(repr(score)).quantize(Decimal("0.01"), rounding=ROUND_FLOOR))


ADMITTED_MARK = "*"


def marked_score(score: float, admitted: bool) -> str:
    """A score as shown (`score_text`), with `*` when the memory is given to the model."""
    return score_text(score) + (ADMITTED_MARK if admitted else "")


ADMITTED_LEGEND = "* = given to the model in a chat; those come first, the rest follow by score"


@dataclass(frozen=True)
class HitLine:
    """A hit in words, for the text faces (the CLI's list, `/vquery`'s table, the chat's list
    of memories used): score, why, where from, date."""

    score: str
    admitted: bool
    why: str
    origin: str
    when: str

    @classmethod
    def of(cls, hit: SearchHit, why: str) -> HitLine:
        """The words for `hit`."""
        return cls(score=score_text(hit.score), admitted=hit.admitted, why=why, origin=hit.origin, when=hit.when())

    @property
    def marked_score(self) -> str:
        """The score with `*` when the hit is given to the model (in lists that hold both kinds)."""
        return self.score + (ADMITTED_MARK if self.admitted else "")

    def heading(self) -> str:
        """'0.83  relevant  thread 3f2a9c1e  2026-11-02': one memory given to the model."""
        return f"{self.score}  {self.why}  {self.origin}  {self.when}"


def used_memories(memories: Sequence[SearchHit]) -> tuple[str, list[HitLine]]:
    """What the chat shows of the memories a turn gave the model: a title ("Using context from
    2 memories") and each memory's words (`/showcontext on`; `summary` shows the title alone)."""
    title = f"Using context from {count_of(len(memories), 'memory', 'memories')}"
    if note := dated_note(memories):
        title += f" ({note})"
    return title, [HitLine.of(hit, why) for hit, why in zip(memories, reasons(memories))]
