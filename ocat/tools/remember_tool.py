"""The memory tool `remember`: the chat model stores a note (the note of `/vadd`, source `model`),
perhaps replacing an older one (ocat.operations.notes), at most `memory.max_notes_per_turn` a turn.

What it did is said twice, in the same facts: to the model (the tool's result) and to the user
(the call's `changed` line): the note's id, the note it replaced, and a pin that moved to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

from ocat.errors import UsageError
from ocat.records import DocumentChunk
from ocat.text.terminal import shorten
from ocat.tools.box import ToolFailed, ToolOutcome
from ocat.operations.add import add_note
from ocat.operations.lookup import get_record
from ocat.operations.notes import chain, check_replaceable, replace_note

if TYPE_CHECKING:
    from ocat.config.settings import Settings
    from ocat.memory import MemoryStore

T = TypeVar("T")
# The most characters a note the model stores may have (a longer one is a document: /vdoc).
REMEMBER_CHARS = 8000
# The most characters an id the model gives back may have: ids are shown at most this long, and
# a longer one (a million characters) would only cost an index search to find nothing.
ID_CHARS = 256

REMEMBER_DESCRIPTION = (
    "Store a short note in the user's memory, for later conversations: a fact about the user, a "
    "decision, a preference they stated. Write it so it makes sense on its own. When it corrects "
    "or updates an older note, give that note's id as `replaces`: the old one is kept, and the new "
    "one is what is remembered (a pin the old one had moves to it). The user sees every note you "
    "store and can delete it."
)
REMEMBER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The note, self-contained.", "maxLength": REMEMBER_CHARS},
        "replaces": {"type": "string", "description": "The id of an older note this one updates.",
                     "maxLength": ID_CHARS},
    },
    "required": ["text"],
    "additionalProperties": False,
}


class NoteContext(Protocol):
    """What `remember` works on: the memory tools' context of one turn
    (`ocat.tools.memory_tools.MemoryToolContext`, which imports this module) is one."""

    store: MemoryStore
    settings: Settings
    notes_stored: int  # notes stored this turn, counted up here

    def shown_id(self, record_id: str) -> str:
        """The id to show for a record."""
        ...


def remember(context: NoteContext, args: dict[str, Any]) -> ToolOutcome:
    """Store a note (source `model`); with `replaces`, the older note is marked replaced by it
    (kept, never deleted), and a pin it had moves to the new one. A replace that would leave no
    note given to the model (a circle, a note replacing itself) is refused, storing nothing."""
    text = str(args["text"]).strip()
    if not text:
        raise ToolFailed("text is empty: give the note to store")
    most = context.settings.memory.max_notes_per_turn
    if context.notes_stored >= most:
        raise ToolFailed(f"at most {most} notes per turn (memory.max_notes_per_turn); this note was not stored")
    old = _note(context, str(args["replaces"]).strip()) if args.get("replaces") else None
    if old is not None:
        _refused_as_tool(lambda: check_replaceable(context.store, old, context.shown_id))
    added = add_note(context.store, text, context.settings.chunking, source="model")
    if not added.ids:
        raise ToolFailed("the note could not be stored")
    shown = context.shown_id(added.ids[0])
    already = added.added_chunks == 0
    if old is None:
        stored = context.store.get(added.ids[0])
        newest = chain(context.store, stored)[-1] if already and isinstance(stored, DocumentChunk) else None
        if newest is not None and newest is not stored:  # replaced: "already remembered" would be untrue
            newer = context.shown_id(newest.id)
            return ToolOutcome(
                text=(f"These words are note {shown}, which was replaced by the newer note {newer}: "
                      "that one is what is remembered. Nothing was stored."),
                summary=f"not stored: note {shown} was replaced by {newer}", ids=tuple(added.ids))
        if already:
            return ToolOutcome(text=f"Already remembered, as note {shown}.", summary=f"already remembered ({shown})",
                               ids=tuple(added.ids), count=len(added.ids))
        context.notes_stored += 1
        said = f"Remembered: {_quoted(text)} ({shown})"
        return ToolOutcome(text=f"Remembered as note {shown}.", summary=said, ids=tuple(added.ids),
                           count=len(added.ids), changed=said)
    replaced = _refused_as_tool(lambda: replace_note(context.store, old, added.ids, context.shown_id))
    context.notes_stored += 1
    was = context.shown_id(replaced.old_id)
    pin = f"; {was} was pinned, so the pin moved to {shown}" if replaced.pin_moved else ""
    told = (f"Already remembered, as note {shown}; it now replaces {was}{pin}." if already
            else f"Remembered as note {shown}, replacing {was}{pin}.")
    said = f"Remembered: {_quoted(text)} ({shown}, replacing {was}{', pinned in its place' if pin else ''})"
    return ToolOutcome(text=told, summary=said, ids=tuple(added.ids), count=len(added.ids), changed=said)


def _refused_as_tool(step: Callable[[], T]) -> T:
    """Run a step of the notes operation; its refusal (UsageError) is the tool's error, in its words."""
    try:
        return step()
    except UsageError as exc:
        raise ToolFailed(f"replaces: {exc}") from None


def _quoted(text: str) -> str:
    return repr(shorten(" ".join(text.split()), 80))


def _note(context: NoteContext, given: str) -> DocumentChunk:
    """The note `replaces` names (a note the user or the model stored), or ToolFailed."""
    try:
        record = get_record(context.store, given)
    except UsageError as exc:
        raise ToolFailed(f"replaces: {exc}") from None
    if not isinstance(record, DocumentChunk) or not record.metadata.get("manual_entry"):
        raise ToolFailed(f"replaces: {given} is not a note (only a note can be replaced; nothing is ever deleted)")
    return record
