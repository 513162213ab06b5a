"""The versions operations: a memory's versions oldest to newest, `/supersede`, `/unlink`, and a hit's link in words.

`/vget`, `/supersede`, `/unlink`, the memory browser, `--query-vector-store`, `search_memory`,
MCP's `search_memory` and the memory block call these and only render (docs/memory.md, "Facts
that change").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ocat import memory
from ocat.errors import UsageError
from ocat.operations.lookup import record_id, resolve_id, short_id
from ocat.records import RecordKind, SearchHit
from ocat.text.terminal import local_time, shorten

if TYPE_CHECKING:
    from ocat.memory import MemoryStore, Version

# A note's document id, as a link names it: the key its chunks' ids are made of (doc-KEY-N).
_DOCUMENT_KEY = re.compile(r"[0-9a-f]{1,64}")
# A word of a text that may carry a value: a number, a date, a name (compared without case).
_WORD = re.compile(r"[\w][\w.:/-]*")
# The most differing words an evidence gives on each side.
EVIDENCE_WORDS = 4


def shown_record(kind: str, key: str) -> str:
    """The id of the record a link's key stands for, as every face shows and `/vget` takes it:
    an exchange's own id; a note's first chunk for its document id (a chunk's id holds the key's
    first 32 characters: ocat.memory.ingest.documents.chunk_id)."""
    return f"doc-{key[:32]}-0" if kind == "document" and _DOCUMENT_KEY.fullmatch(key) else key


def updated_by(hit: SearchHit) -> str | None:
    """The id of the newer version of a hit's memory (its record, as `shown_record`), or None."""
    found = memory.link_of(hit.metadata)
    return shown_record(hit.kind, found[0]) if found else None


def link_fields(hit: SearchHit) -> dict[str, Any]:
    """A hit's links as JSON fields (`--query-vector-store`, MCP, `search_memory`): `updated_by` (the
    newer version's id, its evidence and how the link was made) on an outdated version, `updates`
    (the id of the older version it was given for) on a newest one, `earlier_of` (the id of the
    newer version it was given with, for a question about the past) on an earlier one; none when
    it has none of them."""
    fields: dict[str, Any] = {}
    found = memory.link_of(hit.metadata)
    if found is not None:
        newer, evidence, how = found
        fields |= {"updated_by": shown_record(hit.kind, newer), "update_evidence": evidence, "update_how": how}
    if hit.newest_of is not None:
        fields["updates"] = hit.newest_of
    if hit.earlier_of is not None:
        fields["earlier_of"] = hit.earlier_of
    return fields


def update_words(hit: SearchHit, width: int = 8) -> str:
    """What updated an outdated version, in words: 'updated by 3f2a9c1e (500 mg -> 850 mg)', or ""."""
    found = memory.link_of(hit.metadata)
    if found is None:
        return ""
    newer, evidence, _ = found
    return f"updated by {shown_record(hit.kind, newer)[:width]}" + (f" ({evidence})" if evidence else "")


def link_words(hit: SearchHit, width: int = 8) -> str:
    """A hit's links in words for the text faces: 'updated by 3f2a9c1e (500 mg -> 850 mg)', 'newest
    version of 1b2c3d4e', 'earlier version of 1b2c3d4e', or ""."""
    said = [update] if (update := update_words(hit, width)) else []
    if hit.newest_of is not None:
        said.append(f"newest version of {hit.newest_of[:width]}")
    if hit.earlier_of is not None:
        said.append(f"earlier version of {hit.earlier_of[:width]}")
    return "; ".join(said)


def difference(older: str, newer: str) -> str:
    """What changed between two texts, in a few words: the words only the older says, then those
    only the newer says, the numbers among them when there are some ('500 mg' then '850 mg now'
    reads '500 -> 850'); "" when they say the same words."""
    def words(text: str) -> list[str]:
        return [w.rstrip(".:/-") for w in _WORD.findall(text)]

    old, new = words(older), words(newer)
    old_set, new_set = {w.lower() for w in old}, {w.lower() for w in new}
    gone = _values(list(dict.fromkeys(w for w in old if w.lower() not in new_set)))
    came = _values(list(dict.fromkeys(w for w in new if w.lower() not in old_set)))
    if not gone and not came:
        return ""
    return f"{' '.join(gone) or '…'} -> {' '.join(came) or '…'}"


def _values(words: list[str]) -> list[str]:
    """The words that carry a value, when some do (a number, a date: what usually changes); else the
    words as they are; at most EVIDENCE_WORDS."""
    numbers = [w for w in words if any(c.isdigit() for c in w)]
    return (numbers or words)[:EVIDENCE_WORDS]


@dataclass(frozen=True)
class Linked:
    """What `/supersede` did: the older and newer records' ids, their kind and the evidence kept."""

    older: str
    newer: str
    kind: RecordKind
    evidence: str


def supersede(store: MemoryStore, older: str, newer: str, evidence: str = "") -> Linked:
    """The user's certain link: `older` (an id or its start) is updated by `newer`. The evidence is
    what differs between their texts unless given. NotFound or UsageError, changing nothing, for an
    unknown id, two kinds, the same memory, or a circle."""
    old_id, new_id = resolve_id(store, older), resolve_id(store, newer)
    old, new = store.get(old_id), store.get(new_id)
    if old is None or new is None:
        raise UsageError("a memory was deleted meanwhile; nothing was changed")
    said = evidence.strip() or difference(_text(old), _text(new))
    kind = memory.link(store, old_id, new_id, "user", said)
    return Linked(record_id(old), record_id(new), kind, said)


@dataclass(frozen=True)
class Unlinked:
    """What `/unlink` did: the memory, and the newer version it was linked to (None: it had no link)."""

    id: str
    newer: str | None


def unlink(store: MemoryStore, given: str) -> Unlinked:
    """Undo the link of the memory `given` (an id or its start) to its newer version."""
    full = resolve_id(store, given)
    kind, newer = memory.unlink(store, full)
    return Unlinked(full, shown_record(kind, newer) if newer else None)


def versions(store: MemoryStore, given: str) -> list[Version]:
    """The versions of the fact the memory `given` (an id or its start) belongs to, oldest to newest."""
    return memory.versions(store, resolve_id(store, given))


def version_rows(chain: list[Version], current: str,
                 shown: Callable[[str], str] | None = None) -> list[tuple[str, str, str, str]]:
    """Versions as rows for people: (id, date, what changed next, excerpt), the one asked about marked
    `*`; `shown(id)` gives the id to type back (default: the first 8 characters)."""
    def short(record: str) -> str:
        return shown(record) if shown is not None else record[:8]

    rows = []
    for version in chain:
        mark = "*" if current in (version.record_id, version.key) else ""
        if version.updated_by is None:
            change = "newest" if len(chain) > 1 else ""
        else:
            change = f"-> {short(shown_record(version.kind, version.updated_by))} ({version.how})"
            if version.evidence:
                change += f": {version.evidence}"
        rows.append((short(version.record_id) + mark, local_time(version.date), change,
                     shorten(" ".join(version.text.split()), 120)))
    return rows


def versions_markdown(store: MemoryStore, record: str) -> str:
    """A memory's versions as Markdown (`/vget`, the memory browser's preview): oldest to newest,
    with dates and what changed; "" when it has no other version."""
    chain = versions(store, record)
    if len(chain) < 2:
        return ""
    # Its own paragraph, whether the record's Markdown ends with a line break (an exchange) or
    # not (a note's text, which the heading would otherwise run into).
    lines = ["", "", "**Versions**, oldest to newest (* this one):", ""]
    for n, (shown, date, change, excerpt) in enumerate(
            version_rows(chain, record, lambda i: short_id(store, i)), start=1):
        lines.append(f"{n}. `{shown}` {date} {excerpt}" + (f"  \n   {change}" if change else ""))
    return "\n".join(lines) + "\n"


def _text(record: Any) -> str:
    """What a record says: an exchange's answer (where a value changes), a chunk's text."""
    text = getattr(record, "assistant_response", None)
    return text if isinstance(text, str) else str(getattr(record, "text", ""))
