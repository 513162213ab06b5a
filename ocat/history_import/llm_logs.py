"""Reading simonw/llm's `logs.db`: the `responses` table older llm wrote, and the message store
(threads, turns, messages, parts) that llm 0.32 and later write instead, merged like `llm logs`.

Each legacy response row is one exchange, grouped by conversation_id (a row without one is a
conversation of its own); each thread is a conversation. A legacy row whose id is also a turn
(written twice while llm moved to the new tables), and a legacy conversation that was continued
as a thread (which then holds its whole history), are read once, from the new tables.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ocat.errors import InputFileError
from ocat.history_import.llm_database import LOCK_TIMEOUT, LogsDatabase
from ocat.history_import.llm_threads import Thread, read_llm_thread
from ocat.history_import.model import ConversationProblem, HistoryItem, ImportedConversation
from ocat.history_import.pairing import Message, pair_messages
from ocat.history_import.values import ident, iso_epoch, text

SOURCE = "llm"
_STORE_TABLES = frozenset({"threads", "turns", "messages", "parts"})
_ROW_COLUMNS = "id, prompt, response, datetime_utc"


@dataclass(frozen=True)
class _Entry:
    """One conversation to read: a thread, a legacy conversation, or a legacy response alone."""

    started: float
    kind: str  # "thread" | "conversation" | "response"
    key: str


def is_llm_database(path: Path) -> bool:
    """Whether an SQLite file holds llm logs (a responses table, or llm's message store)."""
    db = LogsDatabase(path)
    try:
        tables = db.tables()
    finally:
        db.close()
    return "responses" in tables or _STORE_TABLES <= tables


def read_llm(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[HistoryItem]:
    """One ImportedConversation or ConversationProblem per llm conversation, oldest first."""
    db = LogsDatabase(path, timeout)
    try:
        reader = _Reader(db)
        for entry in reader.entries():
            try:
                yield reader.read(entry)
            except InputFileError:
                raise
            except Exception as exc:  # one odd conversation must not stop the others
                yield ConversationProblem(SOURCE, entry.key, "", f"the conversation could not be read: {exc!r}")
    finally:
        db.close()


def count_llm(path: Path, timeout: float = LOCK_TIMEOUT) -> int:
    """How many conversations read_llm yields."""
    db = LogsDatabase(path, timeout)
    try:
        return len(_Reader(db).entries())
    finally:
        db.close()


class _Reader:
    def __init__(self, db: LogsDatabase) -> None:
        self.db = db
        tables = db.tables()
        self.legacy = "responses" in tables
        self.store = _STORE_TABLES <= tables
        if not self.legacy and not self.store:
            raise InputFileError(f"{db.path} is not an llm logs database: it has no responses or threads table")
        # Rows already in the new tables are read from there.
        self.unique = " and id not in (select id from turns)" if "turns" in tables else ""
        self.threads: dict[str, Thread] = {}
        if self.store:
            for row in db.query("select id, name, tip_message_hash, datetime_utc from threads"):
                thread_id = ident(row["id"])
                self.threads[thread_id] = Thread(
                    thread_id, text(row["name"]), ident(row["tip_message_hash"]), iso_epoch(row["datetime_utc"])
                )
        self.names: dict[str, str] = {}
        if self.legacy and "conversations" in tables:
            self.names = {ident(row["id"]): text(row["name"]) for row in db.query("select id, name from conversations")}

    def entries(self) -> list[_Entry]:
        """Every conversation, in the order they were started."""
        found: list[_Entry] = []
        if self.legacy:
            for row in self.db.query(
                "select conversation_id, min(datetime_utc) as started from responses "
                f"where conversation_id is not null{self.unique} group by conversation_id"
            ):
                key = ident(row["conversation_id"])
                if key not in self.threads:
                    found.append(_Entry(_sortable(row["started"]), "conversation", key))
            for row in self.db.query(
                f"select id, datetime_utc from responses where conversation_id is null{self.unique}"
            ):
                found.append(_Entry(_sortable(row["datetime_utc"]), "response", ident(row["id"])))
        for thread in self.threads.values():
            found.append(_Entry(_sortable(thread.started), "thread", thread.id))
        found.sort(key=lambda entry: (entry.started, entry.key))
        return found

    def read(self, entry: _Entry) -> HistoryItem:
        """The conversation `entry` names."""
        if entry.kind == "thread":
            legacy = self._rows("conversation_id = ?", entry.key) if self.legacy else []
            thread = self.threads[entry.key]
            if not thread.name and entry.key in self.names:
                thread = Thread(thread.id, self.names[entry.key], thread.tip, thread.started)
            return read_llm_thread(self.db, thread, legacy)
        if entry.kind == "conversation":
            rows = self._rows("conversation_id = ?", entry.key)
            title = self.names.get(entry.key, "")
        else:
            rows = self._rows("id = ?", entry.key)
            title = ""
        messages: list[Message] = []
        for row in rows:
            source_id, when = ident(row["id"]), iso_epoch(row["datetime_utc"])
            # A response with no prompt (a tool loop's next step) goes on answering the last one.
            messages.append(Message("user", text(row["prompt"]), when, source_id))
            messages.append(Message("assistant", text(row["response"]), when, source_id))
        exchanges = pair_messages(messages)
        created = next((iso_epoch(row["datetime_utc"]) for row in rows if row["datetime_utc"]), None)
        return ImportedConversation(SOURCE, entry.key, title, created, exchanges)

    def _rows(self, where: str, key: str) -> list[sqlite3.Row]:
        return self.db.query(
            f"select {_ROW_COLUMNS} from responses where {where}{self.unique} order by datetime_utc, id", (key,)
        )


def _sortable(value: object) -> float:
    moment = value if isinstance(value, float) else iso_epoch(value)
    return moment if moment is not None else -math.inf
