"""The history import: conversations from ChatGPT, Claude or llm, and coding agents' sessions
(Claude Code, Codex), become threads of exchanges (`ocat --import-history`, `/import`).

Every id is derived from the source's own ids, so importing the same export again (or a newer
one) writes only what is new. Conversations are written whole, in batches that let the model
embed at its rate; a stop asked for between batches (Ctrl+C, Esc) leaves whole conversations
written, and running the import again completes it. A session file read before and unchanged
since is not read again (operations.history_sessions).
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ocat.errors import Cancelled
from ocat.records import Exchange
from ocat.text.terminal import clean_title, count_of
from ocat import memory
from ocat.history_import import (
    AGENT_FORMATS,
    ConversationProblem,
    count_conversations,
    detect_format,
    read_history,
    UnchangedSession,
)
from ocat.operations.history_sessions import SessionLedger
from ocat.operations.history_turns import grown_turns
from ocat.operations.add import secrets_clause

if TYPE_CHECKING:
    from ocat.history_import import ImportedConversation
    from ocat.memory import MemoryStore

# Exchange ids, thread ids and session ids of imported history: uuid5 in this namespace of
# "<source>:<conversation id>[:<message id>]", so the same conversation always maps to the same ids.
NAMESPACE = uuid.UUID("5f1d3c2e-8b7a-4e0f-9c6d-2a1b0e9f8d7c")
# Exchanges written per step: enough for the model to embed at its rate; whole conversations
# only, so a stop between steps never leaves half of one.
STEP_EXCHANGES = 64
# The longest title kept (as /rename allows).
TITLE_CHARS = 200
# The longest message an import takes, in characters: a longer one (a pasted file, a log) is
# stored whole in its exchange's metadata and would hold gigabytes of memory on the way; such a
# conversation is named and skipped. 50 MB messages import within 1 GB (docs/PERFORMANCE.md).
MAX_MESSAGE_CHARS = 64 * 1024 * 1024


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
    # Conversations whose only change is a turn written over (an agent's answer imported mid-turn).
    completed: int = 0
    exchanges: int = 0
    # Exchanges written over in place, with their ids (operations.history_turns).
    updated: int = 0
    # Turns read that the agent may still be answering (ImportedExchange.maybe_unfinished).
    unfinished: int = 0
    empty: int = 0
    problems: list[ConversationProblem] = field(default_factory=list)
    # Lines passed over inside conversations that were read ("FILE:LINE: not a JSON line").
    warnings: list[str] = field(default_factory=list)
    stopped: bool = False
    # The secrets found in what was written, one kind per secret (`memory.secrets`), and whether
    # they were kept as they were (`keep`) rather than replaced by placeholders.
    secrets: tuple[str, ...] = ()
    secrets_kept: bool = False

    def sentence(self) -> str:
        """'412 conversations: 398 already here, 14 new, 1,203 exchanges', and what could not be read."""
        parts = [f"{self.already_here:,} already here", f"{self.new:,} new"]
        if self.grown:
            parts.append(f"{self.grown:,} with new exchanges")
        if self.completed:
            parts.append(f"{self.completed:,} with an exchange updated")
        if self.empty:
            parts.append(f"{self.empty:,} with nothing to import")
        said = f"{count_of(self.conversations, 'conversation')}: {', '.join(parts)}, "
        said += count_of(self.exchanges, "exchange")
        if self.updated:
            said += f", {self.updated:,} updated"
        if self.unfinished:
            them = "it" if self.unfinished == 1 else "them"
            said += f"; {count_of(self.unfinished, 'turn')} may still be going on: a later import updates {them}"
        if self.problems:
            said += f"; {count_of(len(self.problems), 'conversation')} could not be read"
        if self.warnings:
            said += f"; {count_of(len(self.warnings), 'line')} skipped"
        said += secrets_clause(self.secrets, self.secrets_kept)
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
            "completed": self.completed,
            "empty": self.empty,
            "exchanges": self.exchanges,
            "updated": self.updated,
            "unfinished": self.unfinished,
            "stopped": self.stopped,
            "secrets": list(self.secrets),
            "secrets_kept": self.secrets_kept,
            "problems": [{"id": p.source_id, "title": p.title, "problem": p.problem} for p in self.problems],
            "warnings": list(self.warnings),
        }


def exchanges_of(conversation: ImportedConversation) -> list[Exchange]:
    """A conversation as exchanges of one thread, with ids derived from the source's (from its
    content when it has no id of its own: two conversations without ids are two threads)."""
    key = f"{conversation.source}:{conversation.source_id or _content_key(conversation)}"
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
                project=conversation.project,
                git_branch=imported.git_branch,
            )
        )
    return exchanges


def _content_key(conversation: ImportedConversation) -> str:
    """An id for a conversation its source gave none: its title, its start and its first
    exchange, which a newer export of the same conversation keeps."""
    first = conversation.exchanges[0] if conversation.exchanges else None
    seed = "\0".join([conversation.title, repr(conversation.created),
                       first.prompt if first else "", first.answer[:1000] if first else ""])
    return "content-" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def limit_problem(conversation: ImportedConversation, exchanges: list[Exchange]) -> str | None:
    """Why a conversation breaks an import's limits (a message too long, an id used twice), or None."""
    seen: set[str] = set()
    for imported, exchange in zip(conversation.exchanges, exchanges):
        longest = max(len(imported.prompt), len(imported.answer))
        if longest > MAX_MESSAGE_CHARS:
            return (f"a message of {longest:,} characters is over the limit of {MAX_MESSAGE_CHARS:,} "
                    "(a pasted file? add it with --add-to-vector-store instead)")
        if exchange.exchange_id in seen:
            return f"the message id {imported.source_id!r} appears twice in it"
        seen.add(exchange.exchange_id)
    return None


Progress = Callable[[str, int, int], None]


def import_history(
    store: MemoryStore,
    path: Path,
    fmt: str | None = None,
    *,
    progress: Progress | None = None,
    problem: Callable[[ConversationProblem], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> HistoryImport:
    """Import the conversations at `path` (format told from the content unless `fmt` names it).

    `progress(label, conversations done, total or 0)` hears each step (every few exchanges
    embedded, so a long conversation reports too), and may raise Cancelled to stop there: what
    was written stays, and the same call completes it. `problem` hears each conversation that
    cannot be read, or breaks a limit, as it is met. A conversation listed twice (overlapping
    shards) is imported once; a thread's title is written with its exchanges, and a rerun names
    an imported thread that has no title yet. `warn` hears each line passed over inside a
    conversation that was read (a coding agent's session: "FILE:LINE: not a JSON line").

    A coding agent's session file is noted (size, modification time) once its exchanges are
    written; the next import of it reads it again only when it changed. Secrets are taken out of
    what is written as `memory.secrets` says, and counted in the result.
    """
    with memory.counting_secrets() as seen:
        result = _imported(store, path, fmt, progress=progress, problem=problem, warn=warn)
    result.secrets, result.secrets_kept = tuple(seen.kinds.elements()), seen.mode == "keep"
    return result


def _imported(
    store: MemoryStore, path: Path, fmt: str | None, *, progress: Progress | None,
    problem: Callable[[ConversationProblem], None] | None, warn: Callable[[str], None] | None,
) -> HistoryImport:
    chosen = fmt or detect_format(path)
    ledger = SessionLedger.of(store) if chosen in AGENT_FORMATS else None
    items = read_history(path, chosen, unchanged=ledger.unchanged if ledger else None)
    counted = count_conversations(path, chosen) or 0
    result = HistoryImport(source=chosen)
    label = f"Importing {path.name}"

    def report() -> None:
        if progress is not None:
            # A count the fast pass got wrong (a key inside an odd conversation) is no total.
            progress(label, result.conversations, counted if counted >= result.conversations else 0)

    batch = _Batch(store, result, report, ledger)
    try:
        for item in items:
            result.conversations += 1
            if isinstance(item, UnchangedSession):
                result.already_here += 1
                continue
            if isinstance(item, ConversationProblem):
                _skip(result, item, problem)
                continue
            for line in item.warnings:
                result.warnings.append(line)
                if warn is not None:
                    warn(line)
            exchanges = exchanges_of(item)
            broken = limit_problem(item, exchanges)
            if broken is not None:
                _skip(result, ConversationProblem(item.source, item.source_id, item.title, broken), problem)
                continue
            result.unfinished += sum(1 for turn in item.exchanges if turn.maybe_unfinished)
            batch.add(item, exchanges)
            if batch.size >= STEP_EXCHANGES:
                batch.write()
                report()
        batch.write()
    except Cancelled:
        result.stopped = batch.cut_short or _more_to_read(items)
    finally:
        if ledger is not None:
            ledger.save()
    return result


def _skip(
    result: HistoryImport, item: ConversationProblem, problem: Callable[[ConversationProblem], None] | None
) -> None:
    result.problems.append(item)
    if problem is not None:
        problem(item)


def _more_to_read(items: Iterator[object]) -> bool:
    """Whether the reader had more conversations when a stop came (read one more to tell)."""
    try:
        return next(items, None) is not None
    except Exception:  # a file that breaks past the stop: there was more, whatever it was
        return True


Pending = list[tuple["ImportedConversation", list[Exchange]]]


class _Batch:
    """Conversations waiting to be written together (the model embeds best in batches)."""

    def __init__(
        self, store: MemoryStore, result: HistoryImport, report: Callable[[], None], ledger: SessionLedger | None
    ) -> None:
        self.store = store
        self.result = result
        self.report = report
        self.ledger = ledger
        self.pending: Pending = []
        # Whether a stop came in the middle of a write (some of its exchanges are still to write).
        self.cut_short = False

    @property
    def size(self) -> int:
        """Exchanges waiting."""
        return sum(len(e) for _, e in self.pending)

    def add(self, conversation: ImportedConversation, exchanges: list[Exchange]) -> None:
        """Queue a conversation."""
        self.pending.append((conversation, exchanges))

    def write(self) -> None:
        """Write the queued conversations with their titles, checking for a stop every few
        exchanges; then name the threads imported before whose title is missing.

        A conversation listed twice (overlapping shards, a repeated export) has the same ids
        both times: each exchange is written once, and the second listing counts as already
        here (or as grown, when it is a longer version)."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        unique = {e.exchange_id: e for _, exchanges in pending for e in exchanges}
        stored = set(self.store.existing_ids("exchange", list(unique)))
        titles: dict[str, str] = {}
        for conversation, exchanges in pending:
            title = clean_title(conversation.title)[:TITLE_CHARS].strip()
            if exchanges and title:
                titles.setdefault(exchanges[0].thread_id, title)
        fresh = [e for i, e in unique.items() if i not in stored]
        # Turns of agents' sessions imported mid-answer that have grown since: written over.
        grown = grown_turns(self.store, pending, stored)
        # Each embedded step (EMBED_STEP exchanges) reports, so a stop is heard within a second or
        # two even inside one long conversation; what was embedded is written before it stops.
        try:
            # In writes of STEP_EXCHANGES, however long one conversation is: a stop then waits
            # for one small write, not for the rest of a 256-record batch.
            for start in range(0, len(fresh), STEP_EXCHANGES):
                self.store.add_exchanges(fresh[start : start + STEP_EXCHANGES], titles=titles,
                                         progress=lambda _done: self.report())
        except Cancelled:
            written = set(self.store.existing_ids("exchange", [e.exchange_id for e in fresh]))
            self.cut_short = len(written) < len(fresh)
            self._count(pending, stored, written)
            raise
        self.result.updated += memory.replace_exchanges(self.store, grown)
        self._count(pending, stored, {e.exchange_id for e in fresh}, {e.exchange_id for e in grown})
        if self.ledger is not None:
            for conversation, exchanges in pending:
                if conversation.file is not None:
                    self.ledger.remember(conversation.file, exchanges[-1].exchange_id if exchanges else "")
        before = {e.thread_id for i, e in unique.items() if i in stored}
        _name_untitled(self.store, {thread: title for thread, title in titles.items() if thread in before})

    def _count(self, pending: Pending, stored: set[str], written: set[str], updated: Iterable[str] = ()) -> None:
        """Count each conversation of a write: already here, new, grown or with an exchange updated
        (by what was written now)."""
        claimed, unclaimed_updates = set(stored), set(updated)
        for _, exchanges in pending:
            if not exchanges:
                self.result.empty += 1
                continue
            here = sum(1 for e in exchanges if e.exchange_id in claimed)
            added = sum(1 for e in exchanges if e.exchange_id in written and e.exchange_id not in claimed)
            changed = {e.exchange_id for e in exchanges} & unclaimed_updates
            claimed.update(e.exchange_id for e in exchanges)
            unclaimed_updates -= changed
            if added:
                self.result.exchanges += added
                if here:
                    self.result.grown += 1
                else:
                    self.result.new += 1
            elif changed:
                self.result.completed += 1
            elif here == len(exchanges):
                self.result.already_here += 1


def _name_untitled(store: MemoryStore, titles: dict[str, str]) -> None:
    """Give threads imported before (an import stopped between its writes, by an older ocat) the
    title they lack; a title given since (/rename) is kept."""
    if not titles:
        return
    for thread_id in set(titles) - memory.titled_threads(store, list(titles)):
        memory.set_thread_title(store, thread_id, titles[thread_id])
