"""Notes replacing notes (the model's `remember` with `replaces`): a newer note takes an older
one's place, the older one kept and marked (ocat.records.SUPERSEDED_KEY), and a pin moves on.

Replacing never leaves a note nobody is given: a note cannot replace itself, a note already
replaced is not replaced again (the newer one is), and a note that was itself replaced cannot
replace the note it leads to (a circle: each would be "replaced by" the other, and neither
would reach the model). A user who stores a replaced note's words again wants them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from ocat import memory
from ocat.errors import UsageError
from ocat.operations.versions import difference
from ocat.records import SUPERSEDED_KEY, DocumentChunk

if TYPE_CHECKING:
    from ocat.memory import MemoryStore

# The most notes a chain of replacements is followed through (a chain made before circles were
# refused, or by an import, may loop: the walk stops at the first note seen twice anyway).
LONGEST_CHAIN = 1000


@dataclass(frozen=True)
class Replacement:
    """What a replace did: which note was replaced, and whether its pin moved to the new note."""

    old_id: str
    pin_moved: bool


def newer_note(note: DocumentChunk) -> str | None:
    """The id of the note that replaced `note`, or None."""
    newer = note.metadata.get(SUPERSEDED_KEY)
    return str(newer) if newer else None


def chain(store: MemoryStore, note: DocumentChunk) -> list[DocumentChunk]:
    """`note` and the notes that replaced it, in order, up to the newest one still stored (a
    note met twice ends the walk: a circle made before they were refused)."""
    found = [note]
    seen = {_document(note)}
    while len(found) < LONGEST_CHAIN and (newer := newer_note(found[-1])) is not None:
        record = store.get(newer)
        if not isinstance(record, DocumentChunk) or _document(record) in seen:
            break
        found.append(record)
        seen.add(_document(record))
    return found


def check_replaceable(store: MemoryStore, note: DocumentChunk, shown: Callable[[str], str]) -> None:
    """UsageError if `note` was already replaced: the newest note of its chain is the one to
    replace (two notes replacing one would both be given, and the older chain forgotten)."""
    newest = chain(store, note)[-1]
    if newest is not note:
        raise UsageError(f"{shown(note.id)} was already replaced by the newer note {shown(newest.id)}; "
                         "replace that one instead (nothing was stored)")


def replace_note(store: MemoryStore, old: DocumentChunk, new_ids: Sequence[str],
                 shown: Callable[[str], str]) -> Replacement:
    """Mark the note `old` replaced by the note whose chunks are `new_ids`, and pin the new one
    if the old one was pinned. UsageError, changing nothing, when the new note is the old one, or
    was itself replaced (by a chain leading back to `old`: a circle; or elsewhere)."""
    new = store.get(new_ids[0])
    if not isinstance(new, DocumentChunk):
        raise UsageError(f"the note {shown(new_ids[0])} is not stored any more")
    if _document(new) == _document(old):
        raise UsageError(f"a note cannot replace itself: these words are note {shown(old.id)}'s own "
                         "(nothing was changed)")
    later = chain(store, new)[1:]
    if any(_document(n) == _document(old) for n in later):
        path = " -> ".join(shown(n.id) for n in [new, *later])
        raise UsageError(
            f"these words are note {shown(new.id)}, an older version of {shown(old.id)} ({path}, each replaced by "
            f"the next): replacing {shown(old.id)} with it would make a circle where no note is given to the model. "
            f"Nothing was changed; to bring the older words back, reword them as a new note replacing {shown(old.id)}")
    if later:
        raise UsageError(f"these words are note {shown(new.id)}, which was itself replaced by {shown(later[-1].id)}; "
                         "a replaced note cannot replace another (nothing was changed)")
    # A certain link between the two versions too (first: a refusal of it changes nothing): every
    # face shows it, and `/unlink` undoes both.
    memory.link_many(store, "document", [(_document(old), _document(new), difference(old.text, new.text))], "model")
    store.mark_documents([_document(old)], {SUPERSEDED_KEY: new.id})
    pinned = any(isinstance(p.record, DocumentChunk) and _document(p.record) == _document(old)
                 for p in memory.pinned(store))
    if pinned:
        for record_id in new_ids:  # the pin moves on with the note: the wake block shows the newer
            memory.set_pinned(store, record_id, 0)
    return Replacement(old.id, pinned)


def bring_back(store: MemoryStore, ids: Sequence[str]) -> str | None:
    """Clear the replaced mark of the note whose chunks are `ids` (a user storing its words again
    wants them given to the model); the id of the note that had replaced it, or None."""
    note = store.get(ids[0]) if ids else None
    if not isinstance(note, DocumentChunk) or (newer := newer_note(note)) is None:
        return None
    memory.unlink(store, note.id)  # the replaced mark and the link with it
    return newer


def _document(note: DocumentChunk) -> str:
    """The document a chunk belongs to (a note's chunks share it); the chunk's id for one without."""
    return str(note.metadata.get("document_id") or note.id)
