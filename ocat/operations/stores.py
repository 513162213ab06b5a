"""Which store an action may use: a store named with `--store` must exist to be read; the first
write to a new one makes it, and says so. The configured store (the default, or one named in
config) is made silently on first use, so a new user never meets an error for it.

Whether a store exists is read without opening or creating anything
(`ocat.memory.named_stores.store_exists`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence
from ocat import memory
from ocat.config.locations import display_path

if TYPE_CHECKING:
    from ocat.config.loading import Settings

# Actions that read a store, or change records already in it: for them a store named with
# `--store` that was never made is a mistyped name (an error listing the stores), never a new,
# empty store. The other actions that use a store write to it (add, import, import-history, ask).
READING_ACTIONS = frozenset({"stats", "query", "export", "wake", "pin", "unpin", "pins", "check", "repair"})


def check_named_stores(action: str, names: Sequence[str], configured: str, settings: Settings) -> Settings | None:
    """Check the stores `--store` named (`names`) before `action` runs; `configured` is the store
    ocat uses without `--store`, which needs no check.

    A read of a store that does not exist raises StoreError naming the stores that do; a write
    to one returns its settings, for `made_note` to say afterwards that it was made.
    """
    if not settings.vector_store.enabled:
        return None
    for name in names:
        if name == configured:
            continue
        one = memory.with_store(settings, name)
        if not memory.store_exists(one):
            if action in READING_ACTIONS:
                raise memory.missing_store(one)
            return one
    return None


def made_note(settings: Settings) -> str | None:
    """`created store NAME at PATH` once the action has made the store, else None (an add of
    a file that is not there fails before it opens the store, and makes none)."""
    if not memory.store_exists(settings):
        return None
    return f"created store {settings.vector_store.collection} at {where(settings)}"


def chat_note(name: str | None, configured: str, settings: Settings) -> str | None:
    """What the chat says when `--store` names a store that was never made: the chat makes it
    (its first exchange is a write), and a mistyped name should not go unnoticed."""
    if name is None or name == configured or not settings.vector_store.enabled:
        return None  # before any import: the chat's first frame waits for this
    if memory.store_exists(settings):
        return None
    others = ", ".join(memory.existing_stores(settings)) or "none yet"
    return f"store {name} is new: this chat makes it at {where(settings)} (the stores so far: {others})"


def where(settings: Settings) -> str:
    """Where the configured store lives, as a user reads it (`~/...`, or a server's address)."""
    location = memory.location_for(settings)
    return display_path(location.path) if location.path is not None and not location.host else location.describe()
