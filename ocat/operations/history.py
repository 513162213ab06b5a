"""The history import: conversations from ChatGPT, Claude or llm become threads of exchanges
(`ocat --import-history`, `/import`).

Every id is derived from the source's own ids, so importing the same export again (or a newer
one) writes only what is new. Conversations are written whole, in batches that let the model
embed at its rate; a stop asked for between batches (Ctrl+C, Esc) leaves whole conversations
written, and running the import again completes it.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ocat.errors import Cancelled
from ocat.records import Exchange
from ocat.text import clean_title, count_of

if TYPE_CHECKING:
    from ocat.history_import import ConversationProblem, ImportedConversation
    from ocat.memory.storage.store import MemoryStore

# Exchange ids, thread ids and session ids of imported history: uuid5 in this namespace of
# "<source>:<conversation id>[:<message id>]", so the same conversation always maps to the same ids.
NAMESPACE = uuid.UUID("5f1d3c2e-8b7a-4e0f-9c6d-2a1b0e9f8d7c")
# Exchanges written per step: enough for the model to embed at its rate; whole conversations
# only, so a stop between steps never leaves half of one.
STEP_EXCHANGES = 64
# The longest title kept (as /rename allows).
TITLE_CHARS = 200


# The start of a line of ocat's export: every record names its kind first.
_OCAT_LINE = re.compile(rb'\s*\{\s*"kind"\s*:\s*"(exchange|document|thread)"')


def is_ocat_export(path: Path) -> bool:
    """Whether `path` is a file ocat's `--export-memory` wrote (JSON Lines of exchanges,
    documents and titles); read from its first bytes only (a ChatGPT export is one huge line)."""
    try:
        with path.open("rb") as handle:
            return bool(_OCAT_LINE.match(handle.read(256)))
    except OSError:
        return False


def derived_id(*parts: str) -> str:
    """A stable id for an imported thread, session or exchange."""
    return str(uuid.uuid5(NAMESPACE, ":".join(parts)))


@dataclass
class HistoryImport:
    """What an import of history did: conversations seen, already here, new, exchanges written,
    and the conversations that could not be read."""

    source: str
    conversations: int = 0
    already_here: int = 0
    new: int = 0
    # Conversations of which some exchanges were here already (a newer export of a longer chat).
    grown: int = 0
    exchanges: int = 0
    empty: int = 0
    problems: list[ConversationProblem] = field(default_factory=list)
    stopped: bool = False

    def sentence(self) -> str:
        """'412 conversations: 398 already here, 14 new, 1,203 exchanges', and what could not be read."""
        parts = [f"{self.already_here:,} already here", f"{self.new:,} new"]
        if self.grown:
            parts.append(f"{self.grown:,} with new exchanges")
        if self.empty:
            parts.append(f"{self.empty:,} with nothing to import")
        said = f"{count_of(self.conversations, 'conversation')}: {', '.join(parts)}, "
        said += count_of(self.exchanges, "exchange")
        if self.problems:
            said += f"; {count_of(len(self.problems), 'conversation')} could not be read"
        if self.stopped:
            said += "; stopped: run the same command again to import the rest"
        return said

    def to_dict(self) -> dict[str, object]:
        """The JSON form, with every conversation that could not be read."""
        return {
            "source": self.source,
            "conversations": self.conversations,
            "already_here": self.already_here,
            "new": self.new,
            "grown": self.grown,
            "empty": self.empty,
            "exchanges": self.exchanges,
            "stopped": self.stopped,
            "problems": [{"id": p.source_id, "title": p.title, "problem": p.problem} for p in self.problems],
        }


def exchanges_of(conversation: ImportedConversation) -> list[Exchange]:
    """A conversation as exchanges of one thread, with ids derived from the source's."""
    key = f"{conversation.source}:{conversation.source_id}"
    thread_id, session_id = derived_id(key, "thread"), derived_id(key, "session")
    fallback = conversation.created if conversation.created is not None else time.time()
    exchanges = []
    for n, imported in enumerate(conversation.exchanges):
        stamp = imported.timestamp if imported.timestamp is not None else fallback
        exchanges.append(
            Exchange(
                user_prompt=imported.prompt,
                assistant_response=imported.answer,
                thread_id=thread_id,
                session_id=session_id,
                exchange_id=derived_id(key, imported.source_id or str(n)),
                # Strictly increasing within the thread, so the order survives equal timestamps.
                timestamp=stamp + n * 1e-3 if imported.timestamp is None else stamp,
                thread_continuation_seq=0,
            )
        )
    return exchanges


Progress = Callable[[str, int, int], None]


def import_history(
    store: MemoryStore,
    path: Path,
    fmt: str | None = None,
    *,
    progress: Progress | None = None,
    problem: Callable[[ConversationProblem], None] | None = None,
) -> HistoryImport:
    """Import the conversations at `path` (format told from the content unless `fmt` names it).

    `progress(label, conversations done, total or 0)` hears each step, and may raise
    Cancelled to stop between steps (what was written stays; the same call completes it);
    `problem` hears each conversation that cannot be read, as it is met.
    """
    from ocat.history_import import ConversationProblem, count_conversations, detect_format, read_history

    chosen = fmt or detect_format(path)
    items = read_history(path, chosen)
    total = count_conversations(path, chosen) or 0
    result = HistoryImport(source=chosen)
    pending: Pending = []
    try:
        for item in items:
            result.conversations += 1
            if isinstance(item, ConversationProblem):
                result.problems.append(item)
                if problem is not None:
                    problem(item)
                continue
            pending.append((item, exchanges_of(item)))
            if sum(len(e) for _, e in pending) >= STEP_EXCHANGES:
                _write(store, pending, result)
                pending = []
                if progress is not None:
                    progress(f"Importing {path.name}", result.conversations, total)
        _write(store, pending, result)
        if progress is not None:
            progress(f"Importing {path.name}", result.conversations, total or result.conversations)
    except Cancelled:
        result.stopped = True
    return result


Pending = list[tuple["ImportedConversation", list[Exchange]]]


def _write(store: MemoryStore, pending: Pending, result: HistoryImport) -> None:
    """Write whole conversations, then name their threads; count what was new."""
    from ocat.memory.storage.thread_titles import set_thread_title

    if not pending:
        return
    everything = [e for _, exchanges in pending for e in exchanges]
    stored = set(store.existing_ids("exchange", [e.exchange_id for e in everything]))
    store.add_exchanges([e for e in everything if e.exchange_id not in stored])
    for conversation, exchanges in pending:
        if not exchanges:
            result.empty += 1
            continue
        here = sum(1 for e in exchanges if e.exchange_id in stored)
        if here == len(exchanges):
            result.already_here += 1
            continue
        result.exchanges += len(exchanges) - here
        if here:
            result.grown += 1
        else:
            result.new += 1
        title = clean_title(conversation.title)[:TITLE_CHARS].strip()
        if title:
            set_thread_title(store, exchanges[0].thread_id, title)
