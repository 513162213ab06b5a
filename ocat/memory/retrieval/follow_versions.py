"""Following links at retrieval: an outdated version is never given alone, and a question about
the past gets the version it asks for.

When a memory admitted by the gate may have been updated (its `updated_by` names newer
versions: ocat.memory.storage.version_finder, `/supersede`, the model's `remember(replaces=...)`), the
newest versions of its fact come with it, marked `newest_of` (ocat.records.SearchHit), even when
they alone would sit under the gate: the model then reads the old value beside the new one, and
is told which is newer (docs/memory.md, "Facts that change"). A question about the past still
gets the old version: nothing is taken away, only the newest added; and when it finds a newer
version, the links are followed back to the earlier one it asks for (`with_earlier`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Collection, Literal, Sequence

from ocat.memory.storage.version_finder import MAX_CHAIN, newer_ids
from ocat.memory.storage.link_records import chunk_index, id_parts, read_rows, version_key
from ocat.memory.retrieval.neighbours import Candidate
from ocat.records import SUPERSEDED_KEY, UPDATED_BY_KEY, RecordKind, SearchHit, made_at

if TYPE_CHECKING:
    from ocat.memory.storage.scoring import Calibration
    from ocat.memory.storage.store import MemoryStore

# How many newer versions one memory brings, newest first: the newest and the one before it
# (see `_leaves`), or the newest of two lines of versions (an exchange that told two facts).
MAX_NEWEST = 2


def with_newest(
    store: MemoryStore, hits: Sequence[SearchHit], *, exclude_ids: Collection[str] = (),
    where: dict[str, Any] | None = None, past: bool = False,
) -> list[SearchHit]:
    """`hits` (one kind's, best first) with the newest versions of each admitted hit that has
    newer ones, each placed right after it and marked `newest_of`; for a question about the past
    (`past`), placed after every hit given on its own instead (`after_found`).

    Asked about the past, the old version is the one wanted: its newer versions, often of other
    facts the same exchange told, took the memory budget from the hits that answered. On two sets
    written apart from the code, history 63.6 -> 81.8 and 90.9 -> 100; changing-dev, chats-dev
    and LoCoMo the same (docs/RETRIEVAL.md, "Two independently written sets").

    A hit shown only as the thread context of another is not followed: it is given for the
    other's sake, and an exchange tells several facts, so its newer versions are those of its
    own facts, not of the question's (the memory block marks it updated all the same). Measured
    with bench/recall_changing.py and bench/recall.py (docs/RETRIEVAL.md, "Facts that change"):
    fewer memories given, none of the questions' targets lost."""
    older = [h for h in hits if h.admitted and h.context_of is None and _newer(h.metadata)]
    if not older:
        return list(hits)
    kind = older[0].kind
    times: dict[str, float] = {}
    newest = {h.id: _leaves(store, kind, h.id, _newer(h.metadata), times) for h in older}
    shown = {h.id for h in hits if h.admitted} | set(exclude_ids)
    # A link names a version by its key (an exchange's id, a note's document id): read as records.
    records = _read(store, kind, sorted({k for keys in newest.values() for k in keys}), where)
    wanted = {old: [records[k][0] for k in sorted(keys, key=lambda k: -times.get(k, 0.0))
                    if k in records and records[k][0] not in shown][:MAX_NEWEST]
              for old, keys in newest.items()}
    by_id = {rid: (text, metadata) for rid, text, metadata in records.values()}
    given = _given_with(hits, wanted, by_id, kind, "newest_of")
    return _after_found(given) if past else given


def _after_found(hits: list[SearchHit]) -> list[SearchHit]:
    """`hits` with the newest versions just brought ranked under every other hit given, in the
    order they came, and marked `after_found` (see `with_newest`)."""
    brought = [h for h in hits if h.newest_of is not None and not h.beyond]
    if not brought:
        return hits
    others = [h for h in hits if h.admitted and not h.beyond and h.newest_of is None]
    lowest = min((h.order[1] for h in others), default=0.0)
    under = {h.id: replace(h, rank=lowest - 1e-9 * (n + 1), after_found=True) for n, h in enumerate(brought)}
    return [h for h in hits if h.id not in under] + list(under.values())


def with_earlier(
    store: MemoryStore, hits: Sequence[SearchHit], *, first: bool, exclude_ids: Collection[str] = (),
    where: dict[str, Any] | None = None,
) -> list[SearchHit]:
    """For a question about the past: `hits` (one kind's, best first) with, for each admitted hit
    that updates earlier versions, the earlier one asked for, placed right after it and marked
    `earlier_of`: the first version of its fact when the question asks for the first (`first`:
    "originally", "the very first quote"), else the version just before it ("before it went up").

    The mirror of `with_newest`: "what did the very first roof quote come to?" finds the latest
    word on the roof, whose links lead back to the first quote, a long exchange on other things
    too that the question alone does not find. One version each: two let the finder's wrong links
    crowd the memory budget (docs/RETRIEVAL.md, "Facts that change"). The memory block marks it
    outdated (`updated-by`), beside the newer version that brought it."""
    newer = [h for h in hits if h.admitted and h.context_of is None and h.newest_of is None]
    if not newer:
        return list(hits)
    kind = newer[0].kind
    keys = {h.id: version_key(kind, h.id, h.metadata) for h in newer}
    before = _earlier_links(store, kind, set(keys.values()))
    if not before:
        return list(hits)
    chains = {hid: _earlier_chain(key, before) for hid, key in keys.items()}
    records = _read(store, kind, sorted({k for chain in chains.values() for k in chain}), where)
    when = {key: _time(metadata) for key, (_, _, metadata) in records.items()}
    shown = {h.id for h in hits if h.admitted} | set(exclude_ids)
    wanted: dict[str, list[str]] = {}
    for hid, chain in chains.items():
        found = [k for k in chain if k in records]
        just_before = [k for k in found if k in before.get(keys[hid], [])]
        pick = min(found, key=when.__getitem__) if first and found else \
            max(just_before, key=when.__getitem__) if just_before else None
        # The version asked for, unless it is given already (then nothing more is needed).
        if pick is not None and records[pick][0] not in shown:
            wanted[hid] = [records[pick][0]]
    by_id = {rid: (text, metadata) for rid, text, metadata in records.values()}
    return _given_with(hits, wanted, by_id, kind, "earlier_of")


def _given_with(
    hits: Sequence[SearchHit], wanted: dict[str, list[str]], by_id: dict[str, tuple[str, dict[str, Any]]],
    kind: RecordKind, mark: Literal["newest_of", "earlier_of"],
) -> list[SearchHit]:
    """`hits` with the versions each one `wanted` placed right after it, `mark` (newest_of or
    earlier_of) naming it. Each version is given once, after the first hit that brings it (a
    listed one moves there from wherever it was ranked, and is no longer another hit's thread
    context: it is given for its bringer's sake), ranked just under it and given its score."""
    listed = {h.id: h for h in hits}
    bringer: dict[str, str] = {}
    for hit in hits:
        for other in wanted.get(hit.id, []):
            bringer.setdefault(other, hit.id)
    result: list[SearchHit] = []
    for hit in hits:
        if hit.id in bringer:
            continue
        result.append(hit)
        newest_of, earlier_of = (hit.id, None) if mark == "newest_of" else (None, hit.id)
        for other in wanted.get(hit.id, []):
            if bringer.get(other) != hit.id:
                continue
            rank = (hit.score if hit.rank is None else hit.rank) - 1e-9
            # One listed past the chat's count (--results 10) is given as the chat gives it, which
            # never had it: listing more changes no hit the chat reads.
            if other in listed and not listed[other].beyond:
                result.append(replace(listed[other], rank=rank, beyond=False, newest_of=newest_of,
                                      earlier_of=earlier_of, context_of=None, with_admitted=False))
            else:
                text, metadata = by_id[other]
                result.append(SearchHit(id=other, kind=kind, score=hit.score, text=text, metadata=metadata,
                                        threshold=hit.threshold, rank=rank, newest_of=newest_of,
                                        earlier_of=earlier_of))
    return result


def _earlier_links(store: MemoryStore, kind: RecordKind, keys: set[str]) -> dict[str, list[str]]:
    """Each version key's earlier versions (the records whose link names it), walking back from
    `keys`, one read per step (a circle a user's /supersede made ends the walk)."""
    before: dict[str, list[str]] = {}
    frontier, seen = sorted(keys), set(keys)
    for _ in range(MAX_CHAIN):
        if not frontier:
            break
        following: list[str] = []
        rows = [row for part in id_parts(frontier)
                for row in read_rows(store, kind, where={UPDATED_BY_KEY: {"$in": part}})]
        for record_id, metadata, _ in rows:
            key = version_key(kind, record_id, metadata)
            earlier = before.setdefault(str(metadata.get(UPDATED_BY_KEY)), [])
            if key not in earlier:
                earlier.append(key)
            if key not in seen:
                seen.add(key)
                following.append(key)
        frontier = following
    return before


def _earlier_chain(key: str, before: dict[str, list[str]]) -> list[str]:
    """Every version before `key`, nearest first."""
    chain: list[str] = []
    frontier, seen = [key], {key}
    while frontier:
        frontier = [k for f in frontier for k in before.get(f, []) if k not in seen]
        seen.update(frontier)
        chain.extend(frontier)
    return chain


def _newer(metadata: dict[str, Any]) -> list[str]:
    """The newer versions a record's metadata names: found or certain links, and a note's replacement."""
    ids = newer_ids(metadata)
    replaced = metadata.get(SUPERSEDED_KEY)
    return ids + [replaced] if isinstance(replaced, str) and replaced and replaced not in ids else ids


def _read(
    store: MemoryStore, kind: str, keys: Sequence[str], where: dict[str, Any] | None = None,
) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Each version key's record, text and metadata: an exchange by its id, a note by its first chunk."""
    if not keys:
        return {}
    if kind == "exchange":
        got = store.fetch("exchange", list(keys), where=where, vectors=False)
        return {i: (i, t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
    within: dict[str, Any] = {"document_id": {"$in": list(keys)}}
    rows = read_rows(store, "document", where={"$and": [within, where]} if where else within, texts=True)
    first: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for rid, metadata, text in sorted(rows, key=lambda r: chunk_index(r[1])):
        first.setdefault(str(metadata.get("document_id")), (rid, text, metadata))
    return first


def _leaves(store: MemoryStore, kind: str, start: str, first: list[str], times: dict[str, float]) -> list[str]:
    """The keys of the newest versions reached from `start` by following links forward: those with
    no newer one, and the version before each. A wrong link at the end of a chain (a new subject taken
    for a new value) then still brings the fact's true newest version."""
    leaves: list[str] = []
    seen = {start}
    before: dict[str, str] = {}
    frontier = [i for i in first if i not in seen]
    for i in frontier:
        before[i] = start
    for _ in range(MAX_CHAIN):
        if not frontier:
            break
        seen.update(frontier)
        following: list[str] = []
        for key, (_, _, metadata) in _read(store, kind, frontier).items():
            times[key] = _time(metadata)
            after = [n for n in _newer(metadata) if n not in seen]
            for n in after:
                before.setdefault(n, key)
            if after:
                following.extend(after)
            else:
                leaves.append(key)
        frontier = list(dict.fromkeys(following))
    second = [before[i] for i in leaves if before.get(i, start) != start]
    return list(dict.fromkeys(leaves + second))


# How much more the newer of two versions of one fact found together scores (z) than the older,
# when the question asks about now: both near the question say it is about that fact, and the
# newer is the one to give. Measured with bench/recall_changing.py (docs/RETRIEVAL.md, "Facts
# that change"): lifting for every question cost chats-dev 5 points of R@1, for questions about
# now 0.9 (one question); lifting the older for questions about the past cost it 1.8, so no
# version is lifted for them (the old version is still found and given, with the newest).
VERSION_LIFT = 0.1
# Words that ask how things are now: "what dose am I on now", "where was the party in the end",
# and "again" as one asks to be reminded: "which dates are we away in September again?".
_NOW = re.compile(
    r"\b(now|currently|current|at the moment|these days|nowadays|in the end|ended up|end up|final|finally|"
    r"latest|newest|anymore|any more|today|still|after the change|after all|again)\b", re.I)


# How far under the gate (relevance) a memory that a newer version updates may stand when the
# question asks about the past: it is a fact the user stated and came back to, and it is never
# given alone (with_newest brings its newer version). Measured with bench/recall_changing.py
# --folds and bench/recall.py (docs/RETRIEVAL.md, "Facts that change"): history 73.9 -> 82.6 on
# changing-dev (78.3 cross-validated), chats-dev and LoCoMo unchanged; eased for every question it
# cost chats-dev R@10 and precision.
VERSION_EASE = 0.10


def gate_of(metadata: dict[str, Any], threshold: float) -> float:
    """The relevance a record must reach to stand on its own: the gate's `threshold`, eased by
    VERSION_EASE for a version that a newer one updates (never for a replaced note, which never
    stands)."""
    if metadata.get(SUPERSEDED_KEY) or not newer_ids(metadata):
        return threshold
    return threshold - VERSION_EASE


# Words that ask how things were: "who was the first roofer", "when were we originally supposed to".
_PAST = re.compile(
    r"\b(first|originally|original|initially|at first|in the beginning|before|previous|previously|earlier|"
    r"used to|old|than planned|was supposed|were supposed|changed from|instead of)\b", re.I)


# Words that ask for a fact's first version, not the one just before: "originally", "the very first quote".
_FIRST = re.compile(r"\b(first|originally|original|initially|at first|in the beginning)\b", re.I)


def asks_for_the_first(question: str) -> bool:
    """Whether a question about the past asks for the first version of a fact (else the one before)."""
    return bool(_FIRST.search(question))


def asks_about_the_past(question: str) -> bool:
    """Whether a question asks how things were (then an older version stands a little under the gate)."""
    return bool(_PAST.search(question))


def asks_about_now(question: str) -> bool:
    """Whether a question asks how things are now (then the newer version of a fact is lifted)."""
    return bool(_NOW.search(question))


def lift_newer(
    ranked: Sequence[Candidate], records: dict[str, tuple[str, dict[str, Any]]], judged: Calibration,
    *, lift: float | None = None,
) -> list[Candidate]:
    """`ranked` with each newer version found beside an older one of its fact scored at least as
    the older plus `lift` (oldest first, so a lift carries along a chain), ranked again."""
    lift = VERSION_LIFT if lift is None else lift
    z = {c.id: c.z for c in ranked}
    pairs = [(o, n) for o in z if o in records for n in _newer(records[o][1]) if n in z and n != o]
    if not pairs or lift <= 0:
        return list(ranked)
    when = {i: _time(records[i][1]) for i in z if i in records}
    for older, newer in sorted(pairs, key=lambda p: when.get(p[0], 0.0)):
        z[newer] = max(z[newer], z[older] + lift)
    lifted = [Candidate(c.id, judged.relevance_of(z[c.id]), z[c.id], c.source) if z[c.id] != c.z else c for c in ranked]
    return sorted(lifted, key=lambda c: c.rank, reverse=True) if lifted != list(ranked) else list(ranked)


def _time(metadata: dict[str, Any]) -> float:
    return made_at(metadata) or 0.0
