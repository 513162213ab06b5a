"""Links between versions of a fact (docs/memory.md, "Facts that change"): made, undone, followed.

A link lives in the OLDER record's own metadata (ocat.records.UPDATED_BY_KEY, with its evidence
and how it was made): an exchange's, or every chunk of a note's, which a link names by its
document id. So it is user data in the primary store: exported, imported, kept by every repair,
seen by every machine on a shared server. Following `updated_by` reaches the newest version; the
walk back asks Chroma which records name one (`where={updated_by: id}`).

A link never leaves a fact nobody is given: a record cannot update itself, a link between two
kinds or to an id the store does not hold is refused, and so is one that would close a circle
(each version "updated by" the next, all the way round). A link ocat found never replaces a
certain one (the model's or the user's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence, cast

from ocat.errors import NotFound, UsageError
from ocat.memory.storage.link_records import (
    HOWS,
    id_parts,
    link_marks,
    links_of,
    mark_versions,
    named_by,
    read_rows,
    read_versions,
    stored_keys,
    Version,
    version_key,
)
from ocat.records import SUPERSEDED_KEY, RecordKind, UpdateHow

if TYPE_CHECKING:
    from ocat.memory.storage.parts import StoreParts

# The most versions a chain is followed through (one made by another client may loop: a walk
# stops at the first version seen twice anyway).
LONGEST_CHAIN = 1000
# Links restored per Chroma update (an import's).
_LINKS_PER_WRITE = 256


def find_key(store: StoreParts, given: str) -> tuple[RecordKind, str] | None:
    """The kind and version key of a full id: an exchange id, a chunk id or a note's document id."""
    if store.existing_ids("exchange", [given]):
        return "exchange", given
    got = read_rows(store, "document", ids=[given])
    if got:
        return "document", version_key("document", given, got[0][1])
    if read_rows(store, "document", where={"document_id": given}, limit=1):
        return "document", given
    return None


def link(store: StoreParts, older: str, newer: str, how: UpdateHow, evidence: str = "") -> RecordKind:
    """Link `older` as updated by `newer` (full ids of the same kind: exchange ids, or a note's
    chunk or document ids); its kind. NotFound for an unknown id; UsageError, changing nothing,
    for two kinds, a record linking itself, or a circle."""
    old_kind, new_kind = _kind_of(store, older), _kind_of(store, newer)
    if old_kind != new_kind:
        raise UsageError(f"{older} is {_a(old_kind)} and {newer} is {_a(new_kind)}: a version is updated by a "
                         "newer one of its own kind (nothing was changed)")
    link_many(store, old_kind, [(older, newer, evidence)], how)
    return old_kind


def link_many(store: StoreParts, kind: RecordKind, links: Sequence[tuple[str, str, str]], how: UpdateHow) -> int:
    """Record several links of one kind at once, each (older, newer, evidence), in one Chroma
    update; how many were recorded (a found link is not put over a certain one). Every link is
    checked first: NotFound or UsageError, changing nothing, as `link` says."""
    if how not in HOWS:
        raise UsageError(f"a link is made {', '.join(HOWS)}, not {how!r}")
    keys = _keys(store, kind, [given for pair in links for given in pair[:2]])
    planned: dict[str, tuple[str, str]] = {}
    for older, newer, evidence in links:
        old, new = keys[older], keys[newer]
        if old == new:
            raise UsageError(f"a memory cannot update itself ({older}); nothing was changed")
        planned[old] = (new, evidence)
    # The stored links of every newer version, in one read: a walk goes on only from those that
    # have one (a version just written has none), a read per step.
    stored = {new: link[0] for new, link in links_of(store, kind, [n for n, _ in planned.values()]).items()}
    walks = {**{n: None for n, _ in planned.values()}, **stored, **{o: n for o, (n, _) in planned.items()}}
    for old, (new, _) in planned.items():
        path = [old, new]
        while len(path) < LONGEST_CHAIN and (after := _forward(store, kind, path[-1], walks)) is not None:
            if after == old:
                shown = " -> ".join(p[:12] for p in [*path, old])
                raise UsageError(f"linking {old[:12]} to {new[:12]} would make a circle ({shown}, each updated by the "
                                 "next) where no version is the newest; nothing was changed")
            if after in path:
                break  # a circle further on, made by another client: not this link's
            path.append(after)
    if how == "found":  # never put over a certain link
        certain = {o for o, (_, _, h) in links_of(store, kind, list(planned)).items() if h in ("model", "user")}
        planned = {o: link for o, link in planned.items() if o not in certain}
    return mark_versions(store, kind, {old: link_marks(new, how, evidence) for old, (new, evidence) in planned.items()})


def unlink(store: StoreParts, given: str) -> tuple[RecordKind, str | None]:
    """Undo the link of the older version `given` (a full id); its kind and the newer version it
    named (None: it had none). A note replaced by the model's `remember` is given again too."""
    kind, key = _located(store, given)
    record = links_of(store, kind, [key]).get(key)
    marks = link_marks(None)
    if kind == "document":
        superseded = read_rows(store, kind, where={"document_id": key}, limit=1)
        replaced = superseded[0][1].get(SUPERSEDED_KEY) if superseded else None
        if record is None and replaced:
            record = (str(replaced), "", "model")
        marks[SUPERSEDED_KEY] = None
    if record is None:
        return kind, None
    mark_versions(store, kind, {key: marks})
    return kind, record[0]


def versions(store: StoreParts, given: str) -> list[Version]:
    """Every version of the fact `given` (a full id) belongs to, oldest to newest: the older ones
    (every record whose links lead to it), by date, then it and the newer ones in link order."""
    kind, key = _located(store, given)
    chain = _onwards(store, kind, key)
    older: list[str] = []
    frontier, seen = [key], set(chain)
    while frontier and len(older) < LONGEST_CHAIN:
        named = named_by(store, kind, frontier)
        frontier = [k for k in named if k not in seen]
        seen.update(frontier)
        older += frontier
    shown = read_versions(store, kind, [*older, *chain])
    before = sorted((shown[k] for k in older if k in shown), key=lambda v: (v.date or 0.0, v.key))
    return before + [shown[k] for k in chain if k in shown]


def newest(store: StoreParts, given: str) -> str:
    """The newest version `given` (a full id) leads to: the key at the end of its links (itself
    when it has none)."""
    kind, key = _located(store, given)
    return _onwards(store, kind, key)[-1]


def _onwards(store: StoreParts, kind: RecordKind, key: str) -> list[str]:
    """`key` and the newer versions its links lead to, in order (a version met twice ends the walk)."""
    chain = [key]
    while len(chain) < LONGEST_CHAIN and (after := _forward(store, kind, chain[-1], {})) is not None:
        if after in chain:
            break
        chain.append(after)
    return chain


def _located(store: StoreParts, given: str) -> tuple[RecordKind, str]:
    """`find_key`, or NotFound."""
    where = find_key(store, given)
    if where is None:
        raise NotFound(f"no memory with id {given}")
    return where


def _kind_of(store: StoreParts, given: str) -> RecordKind:
    return _located(store, given)[0]


def _a(kind: RecordKind) -> str:
    return "an exchange" if kind == "exchange" else "a note (a document)"


def _keys(store: StoreParts, kind: RecordKind, given: Sequence[str]) -> dict[str, str]:
    """Each given full id's version key within `kind` (a chunk id stands for its note); NotFound
    for one the store does not hold as that kind, UsageError when it is of the other kind."""
    wanted = list(dict.fromkeys(given))
    keys: dict[str, str] = {}
    for part in id_parts(wanted):
        if kind == "exchange":  # its own id: no metadata to read
            keys |= {i: i for i in store.existing_ids(kind, part)}
        else:
            keys |= {i: version_key(kind, i, m) for i, m, _ in read_rows(store, kind, ids=part)}
    if kind == "document":
        rest = [g for g in wanted if g not in keys]
        keys |= {g: g for g in stored_keys(store, kind, rest)}
    for one in wanted:
        if one not in keys:
            other: RecordKind = "document" if kind == "exchange" else "exchange"
            if find_key(store, one) is not None:
                raise UsageError(f"{one} is {_a(other)}, not {_a(kind)}: a version is updated by a newer one of "
                                 "its own kind (nothing was changed)")
            raise NotFound(f"no memory with id {one} (nothing was changed)")
    return keys


def _forward(store: StoreParts, kind: RecordKind, key: str, known: Mapping[str, str | None]) -> str | None:
    """The newer version of `key`: as `known` says (a link being made, or one read already; None:
    none), else as the store holds it."""
    if key in known:
        return known[key]
    link = links_of(store, kind, [key]).get(key)
    return link[0] if link else None


def restore_links(store: StoreParts, links: Sequence[tuple[str, str, str, str]]) -> int:
    """An import's links between exchanges, each (older, newer, how, evidence): those whose two
    exchanges are stored, on an exchange without a link of its own (one made since is kept); one
    that would close a circle with the store's links is left out. How many were restored."""
    ends = [end for older, newer, _, _ in links for end in (older, newer)]
    stored = {i for part in id_parts(list(dict.fromkeys(ends))) for i in store.existing_ids("exchange", part)}
    have = links_of(store, "exchange", [older for older, *_ in links])
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for older, newer, how, evidence in links:
        if older in stored and newer in stored and older not in have and how in HOWS:
            groups.setdefault(how, []).append((older, newer, evidence))
    restored = 0
    for how, group in groups.items():
        for part in _link_parts(group):
            try:
                restored += link_many(store, "exchange", part, cast("UpdateHow", how))
            except UsageError:  # a circle in this part: each link on its own, the circle's last left out
                for one in part:
                    try:
                        restored += link_many(store, "exchange", [one], cast("UpdateHow", how))
                    except UsageError:
                        pass
    return restored


def _link_parts(items: list[tuple[str, str, str]]) -> list[list[tuple[str, str, str]]]:
    """Links in parts of a size one Chroma update takes."""
    return [items[start : start + _LINKS_PER_WRITE] for start in range(0, len(items), _LINKS_PER_WRITE)]
