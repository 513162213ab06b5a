"""Turns of a coding agent's session imported while the agent was still answering: a later import
that reads the session again finds them grown and writes them over, in place.

A session file is read again only when it changed (operations.history_sessions). Then only the
last of its exchanges already stored can have grown: every turn before it had been closed by
the next prompt when it was imported. So that one exchange per session is compared with what the
file says now (one read for a batch of sessions), and one that differs is written over under its
own id (memory.replace_exchanges: Chroma and every derived file), never added beside it. An
export (ChatGPT, Claude, llm) is a finished snapshot: nothing of it is written over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ocat.records import Exchange

if TYPE_CHECKING:
    from ocat.history_import import ImportedConversation
    from ocat.memory import MemoryStore


def grown_turns(
    store: MemoryStore, pending: Sequence[tuple[ImportedConversation, list[Exchange]]], stored: set[str]
) -> list[Exchange]:
    """The exchanges of re-read sessions that are stored (their ids in `stored`) with another
    prompt or answer than the file now gives: the last stored one of each session, as read now."""
    last_stored: dict[str, Exchange] = {}
    for conversation, exchanges in pending:
        if conversation.file is None:
            continue
        here = [exchange for exchange in exchanges if exchange.exchange_id in stored]
        if here:
            last_stored[here[-1].exchange_id] = here[-1]
    got = store.fetch("exchange", list(last_stored), vectors=False)
    grown = []
    for record_id, metadata in zip(got["ids"], got["metadatas"]):
        now = last_stored[record_id]
        held = metadata or {}
        if (held.get("user_prompt"), held.get("assistant_response")) != (now.user_prompt, now.assistant_response):
            grown.append(now)
    return grown
