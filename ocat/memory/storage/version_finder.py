"""Finding, when exchanges are written, the earlier ones they may update: same subject, a value that differs.

Local and model-free, so an import of thousands of exchanges pays little for it (bench/import_history.py):
for each new exchange, the nearest earlier exchanges by meaning (its vector and its prompt's, one
Chroma call for a whole batch) are compared with it by the values their prompts state
(ocat.memory.storage.version_values). An earlier exchange from another session that is close enough
(SUBJECT, within the first CANDIDATES) and states a value of a type the new one states
differently ("850 mg" then "1000 mg"; a name, "Telhados Mira" then "Rui Faria", only when closer:
NAME_SUBJECT) is linked: its metadata
gets `updated_by` (ocat.records.UPDATED_BY_KEY) with the evidence in words
(ocat.memory.storage.versions.link_many, how "found"). A link goes to the
newest version already known of that fact (an older one already updated is followed forward),
and a new exchange that only repeats the newest value links nothing.

Only the user's prompt is compared: it is what the user says is so; an answer restates,
suggests and computes values of its own. An exchange of the same session is never linked to:
there a second value is more of the same plan ("30% upfront") than a change. The constants
were fitted on changing-dev by cross-validation over its months (docs/RETRIEVAL.md, "Facts that
change"); a wrong link costs a memory shown with its newer neighbour, and `/unlink` undoes it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ocat.errors import NotFound, UsageError
from ocat.memory.storage.link_records import link_of
from ocat.memory.storage.versions import link_many
from ocat.memory.storage.version_values import Slot, Statement, Value, slots, statements

if TYPE_CHECKING:
    from ocat.memory.storage.parts import StoreParts

logger = logging.getLogger(__name__)
# How close in meaning an earlier exchange must be to be a version of the same fact: the better
# of the two prompts' cosine and 0.9 x the exchanges' cosine (an exchange's vector is mostly its
# answer's, so it counts for less).
SUBJECT = 0.50
EXCHANGE_WEIGHT = 0.9
# How close they must be for a name said differently to count ("Telhados Mira" then "Rui Faria"):
# closer than for a number or a date, because loosely alike exchanges of one topic name other
# people and things (the collar's brand, then the dog-sitter). On changing-dev (`bench/recall_changing.py
# --links`) 0.60 took out 3 of the 14 wrong links and none of the 24 right; every verdict of the
# bench, chats-dev's and LoCoMo's the same or better (docs/RETRIEVAL.md, "Facts that change").
NAME_SUBJECT = 0.60
# How close for a value said of the same word ("30% upfront" then "40% upfront": a Slot) to count
# when nothing else does: such a change names its own subject, so a looser likeness is enough.
SLOT_SUBJECT = 0.40
# How many of the nearest earlier exchanges are compared: a change names one fact, and the
# versions of that fact are nearly always the nearest or the next (changing-dev: 41 of 43).
CANDIDATES = 2
# How many neighbours Chroma is asked for, per vector: enough to find CANDIDATES once later
# exchanges and the same session's are set aside.
NEIGHBOURS = 12
# How many sentences with values (and values with their word) of each text are compared, each
# with each: a prompt that states more is a pasted table or document, and two texts of 2,000
# such sentences on one subject took over a minute to compare (a chat's write waits for its
# links). A fact's change is said in a prompt's first few sentences.
MAX_VALUES_READ = 100
# How much of each text is read for its values at all: reading is linear, but a pasted book's
# 600 KB took 3 s.
MAX_TEXT_READ = 20_000
# How far a chain of versions is followed forward (a guard: links never make a circle).
MAX_CHAIN = 16


@dataclass(frozen=True)
class Link:
    """`older` may be updated by `newer`: the evidence says which values changed."""

    older: str
    newer: str
    evidence: str


@dataclass(frozen=True)
class Written:
    """An exchange just written, as the finder compares it: id, prompt, time, session."""

    id: str
    prompt: str
    timestamp: float
    session: str


def newer_ids(metadata: Mapping[str, Any] | None) -> list[str]:
    """The newer version a record's metadata says may update it, as a list (none or one): the
    link as ocat.memory.storage.link_records.link_of reads it."""
    link = link_of(metadata or {})
    return [link[0]] if link is not None else []


def link_versions(
    store: StoreParts, rows: Sequence[tuple[str, str, Mapping[str, Any]]],
    vectors: Sequence[Sequence[float]], prompt_vectors: Sequence[Sequence[float] | None],
) -> int:
    """Find and store the links to exchanges just written (`find_links`, `record_links`); how
    many. A finder that fails costs the write nothing: the exchanges are stored, unlinked."""
    try:
        return record_links(store, find_links(store, rows, vectors, prompt_vectors))
    except Exception as exc:
        logger.warning("versions were not linked: %s", exc)
        return 0


def link_note_versions(
    store: StoreParts, rows: Sequence[tuple[str, str, Mapping[str, Any]]], vectors: Sequence[Sequence[float]],
) -> int:
    """Link the earlier notes that these notes just written may update (a note is a one-chunk
    document the user or the model wrote: /vadd, /remember, `remember`); how many links. As for
    exchanges: close in meaning, of another write, a value of a shared subject said differently;
    only an earlier note that no newer one updates yet. Never fails the write."""
    notes = [(r, v) for r, v in zip(rows, vectors)
             if r[2].get("manual_entry") is True and r[2].get("total_chunks") == 1]
    if not notes:
        return 0
    try:
        near = store.nearest("document", [v for _, v in notes], NEIGHBOURS, where={"manual_entry": True})
        got = store.fetch("document", list(dict.fromkeys(i for hits in near for i in hits)), vectors=False)
        stored = {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}
        links = []
        for (new_id, text, metadata), hits in zip((r for r, _ in notes), near):
            made = time_of(metadata, "date_added")
            earlier = [(alike, i) for i, alike in hits.items() if i in stored and i != new_id
                       and stored[i][1].get("document_id") != metadata.get("document_id")
                       and time_of(stored[i][1], "date_added") < made and not newer_ids(stored[i][1])]
            for alike, older in sorted(earlier, reverse=True)[:CANDIDATES]:
                evidence = evidence_of(stored[older][0], text, alike)
                if evidence:
                    links.append((older, new_id, evidence))
        return link_many(store, "document", links, "found") if links else 0
    except Exception as exc:
        logger.warning("notes were not linked: %s", exc)
        return 0


def find_links(
    store: StoreParts, rows: Sequence[tuple[str, str, Mapping[str, Any]]],
    vectors: Sequence[Sequence[float]], prompt_vectors: Sequence[Sequence[float] | None],
) -> list[Link]:
    """The links from earlier exchanges to these just written (rows as written: id, text,
    metadata; with their vectors and their prompts' vectors), oldest new exchange first."""
    written = [Written(r[0], str(r[2].get("user_prompt") or ""), time_of(r[2]), str(r[2].get("session_id") or ""))
               for r in rows]
    queries = [list(v) for v in vectors] + [list(p) for p in prompt_vectors if p is not None]
    near = store.nearest("exchange", queries, NEIGHBOURS)
    found: dict[str, float] = {}
    for hits in near:
        found.update(hits)
    known = read_records(store, list(found))
    prompt_of = {i: list(p) for i, p in zip((r[0] for r in rows), prompt_vectors) if p is not None}
    # Prompts against prompts only: an earlier exchange's passages (its long answer, made in the
    # background after a bulk write) would make an import link otherwise than the same chats
    # written one at a time.
    prompts_alike = (store.prompts.similarities(list(known), list(prompt_of.values()), passages=False)
                     if prompt_of else {})
    columns = {i: n for n, i in enumerate(prompt_of)}
    links: list[Link] = []
    later: dict[str, list[str]] = defaultdict(list)  # links made in this write, older -> newer
    for position, new in sorted(enumerate(written), key=lambda p: p[1].timestamp):
        scored = []
        for older, record in known.items():
            if record.timestamp >= new.timestamp or record.session == new.session or older == new.id:
                continue
            alike = EXCHANGE_WEIGHT * max(near[position].get(older, 0.0), 0.0)
            if new.id in columns and older in prompts_alike:
                alike = max(alike, prompts_alike[older][columns[new.id]])
            scored.append((alike, older))
        scored.sort(reverse=True)
        for alike, older in scored[:CANDIDATES]:
            if alike < min(SUBJECT, SLOT_SUBJECT):
                break
            head = newest_before(store, older, known, later, new)
            if head is None:
                continue
            evidence = evidence_of(known[head].prompt, new.prompt, alike)
            if evidence:
                links.append(Link(head, new.id, evidence))
                later[head].append(new.id)
        known[new.id] = Record(new.prompt, new.timestamp, new.session, [])
    return links


def evidence_of(older: str, newer: str, alike: float) -> str:
    """The evidence that `newer` updates `older`, given how alike the two are: a value of a
    shared subject said differently (`changed`; a name only when closer, NAME_SUBJECT) from
    SUBJECT, a value said of the same word (`slot_changed`) from SLOT_SUBJECT; "" for none."""
    older, newer = older[:MAX_TEXT_READ], newer[:MAX_TEXT_READ]
    evidence = changed(older, newer, names=alike >= NAME_SUBJECT) if alike >= SUBJECT else ""
    return evidence or (slot_changed(older, newer) if alike >= SLOT_SUBJECT else "")


def slot_changed(older: str, newer: str) -> str:
    """The evidence that `newer` says a value of the same word as `older` differently ("30%
    upfront -> 40% upfront"), or "": the word and the value's type agree, and neither text also
    says the other's value of that word (a list of options is no change). A bare number does not
    count: next to a word it may be a count, a size or a part of a fraction ("1/8 inch bleed")."""
    before = [s for s in slots(older)[:MAX_VALUES_READ] if s.value.kind != "number"]
    after = slots(newer)[:MAX_VALUES_READ]
    said_before, said_after = set(before), set(after)
    of_word: dict[tuple[str, str], list[Slot]] = defaultdict(list)
    for old in before:
        of_word[(old.word, old.value.kind)].append(old)
    for new in after:
        if new in said_before:
            continue
        for old in of_word.get((new.word, new.value.kind), ()):
            if old.value != new.value and old not in said_after:
                return f"{old.value.said} {old.written} -> {new.value.said} {new.written}"
    return ""


def changed(older: str, newer: str, *, names: bool = True) -> str:
    """The evidence that `newer` states a value of `older`'s subject differently ("850 mg -> 1000
    mg"), or "" when it does not (another subject, or the same values again); a name said
    differently counts only with `names`."""
    said_before = {v for s in statements(older) for v in s.values}
    said_after = {v for s in statements(newer) for v in s.values}
    older_text, newer_text = older.lower(), newer.lower()
    for new in statements(newer)[:MAX_VALUES_READ]:
        for old in statements(older)[:MAX_VALUES_READ]:
            if new.words & old.words:
                said = _difference(old, new, said_before, said_after, older_text, newer_text, names)
                if said:
                    return said
    return ""


def _difference(
    old: Statement, new: Statement, said_before: set[Value], said_after: set[Value], older: str, newer: str,
    names: bool = True,
) -> str:
    """Words for the first type of value both sentences state, where the newer says a value the
    older text never said. A name counts only when each side's is absent from the other text
    (a name at a sentence's start is not read as one; "Tasca's" is "Tasca")."""
    for kind in sorted({v.kind for v in new.values} & {v.kind for v in old.values}):
        if kind == "name" and not names:
            continue
        fresh = sorted((v for v in new.values if v.kind == kind and v not in said_before
                        and not (kind == "name" and _named_in(v, older))), key=lambda v: v.said)
        before = sorted((v for v in old.values if v.kind == kind and v not in said_after
                         and not (kind == "name" and _named_in(v, newer))), key=lambda v: v.said)
        if fresh and (before or kind != "name"):
            return f"{', '.join(v.said for v in before) or '(not said)'} -> {', '.join(v.said for v in fresh)}"
    return ""


def _named_in(value: Value, text: str) -> bool:
    """Whether a name (or its first word) appears in a text, in any case."""
    words = value.text.split()
    return bool(words) and (value.text in text or words[0] in text)


@dataclass
class Record:
    """What the finder needs of a stored exchange: prompt, time, session, newer versions, and how
    its link was made ("found", "model", "user"; "" without one)."""

    prompt: str
    timestamp: float
    session: str
    newer: list[str]
    how: str = ""


def time_of(metadata: Mapping[str, Any], key: str = "timestamp") -> float:
    """A record's time (`timestamp`, or `key`) as a number; 0.0 when it has none."""
    value = metadata.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def read_records(store: StoreParts, ids: Sequence[str]) -> dict[str, Record]:
    """What the finder needs of stored exchanges: prompt, time, session, newer versions."""
    got = store.fetch("exchange", list(dict.fromkeys(ids)), vectors=False)
    return {
        i: Record(str(m.get("user_prompt") or ""), time_of(m), str(m.get("session_id") or ""), newer_ids(m),
                  (link_of(m) or ("", "", ""))[2])
        for i, m in zip(got["ids"], got["metadatas"]) if m
    }


def newest_before(
    store: StoreParts, older: str, known: dict[str, Record], later: Mapping[str, list[str]], new: Written
) -> str | None:
    """The newest version of `older`'s fact written before `new` (following links forward; the
    latest of several), or None when `new` already is one of them."""
    at = older
    for _ in range(MAX_CHAIN):
        after = [i for i in known[at].newer + later.get(at, []) if i != at]
        missing = [i for i in after if i not in known]
        if missing:
            known.update(read_records(store, missing))
        after = [i for i in after if i in known and known[i].timestamp < new.timestamp]
        if new.id in known[at].newer + later.get(at, []):
            return None
        if not after:
            return at
        at = max(after, key=lambda i: known[i].timestamp)
    return at


def record_links(store: StoreParts, links: Sequence[Link]) -> int:
    """Store found links on their older exchanges (ocat.memory.storage.versions.link_many: one
    Chroma write; never over a link the user or the model made); how many were stored. A batch
    refused as a whole (a link that would close a circle with one a user made) is stored a link
    at a time, leaving out the refused ones."""

    latest = {link.older: link for link in links}  # one newer version per older one: the last found
    parts = [(link.older, link.newer, link.evidence) for link in latest.values()]
    if not parts:
        return 0
    try:
        return link_many(store, "exchange", parts, "found")
    except (NotFound, UsageError):
        stored = 0
        for part in parts:
            try:
                stored += link_many(store, "exchange", [part], "found")
            except (NotFound, UsageError):
                continue
        return stored
