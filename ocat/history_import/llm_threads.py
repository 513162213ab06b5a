"""Reading one conversation from llm's content-addressed message store (llm 0.32 and later).

A thread points at the tip of a chain of messages (each names its parent); a message's text is
in its `parts`, where text borrowed from a fragment is stored as references (`text_ref`).
Turns (model calls) say when a prompt was answered and give it a stable id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ocat.errors import InputFileError
from ocat.history_import.llm_database import LogsDatabase
from ocat.history_import.model import ConversationProblem, HistoryItem, ImportedConversation
from ocat.history_import.pairing import Message, pair_messages
from ocat.history_import.values import ident, iso_epoch, text

SOURCE = "llm"
# SQLite allows 999 parameters in old builds; stay well under.
_BATCH = 500



@dataclass(frozen=True)
class Thread:
    """A row of the threads table."""

    id: str
    name: str
    tip: str
    started: float | None


class _BrokenChain(Exception):
    """The chain of messages cannot be walked; the text says where."""


def read_llm_thread(db: LogsDatabase, thread: Thread, legacy: Sequence[sqlite3.Row] = ()) -> HistoryItem:
    """The thread's conversation: its chain from the first message to the tip, paired.

    `legacy` holds the responses rows of the same conversation logged by an older llm: when
    llm 0.32 continued such a conversation it wrote that history into the chain without turns,
    so those rows give the old messages back their response ids and times.
    """
    try:
        chain = _chain(db, thread.tip)
        hashes = [row["hash"] for row in chain]
        texts = _texts(db, hashes)
    except _BrokenChain as exc:
        return ConversationProblem(SOURCE, thread.id, thread.name, str(exc))
    answered: dict[str, tuple[str, float | None]] = {}  # prompt message -> (turn id, time)
    written: dict[str, float | None] = {}  # reply message -> time
    for turn in _turns(db, hashes):
        when = iso_epoch(turn["datetime_utc"])
        answered.setdefault(turn["parent_message_hash"], (ident(turn["id"]), when))
        written.setdefault(turn["tip_message_hash"], when)
    old = [(text(row["prompt"]), ident(row["id"]), iso_epoch(row["datetime_utc"])) for row in legacy]
    messages = []
    for row in chain:
        key, role, body = row["hash"], text(row["role"]), texts.get(row["hash"], "")
        source_id, when = answered.get(key, (key, written.get(key)))
        if role == "user" and key not in answered:
            match = next((entry for entry in old if entry[0] == body), None)
            if match:
                old.remove(match)
                source_id, when = match[1], match[2]
        messages.append(Message(role, body, when, source_id))
    exchanges = pair_messages(messages)
    started = thread.started if thread.started is not None else next(
        (e.timestamp for e in exchanges if e.timestamp is not None), None
    )
    return ImportedConversation(SOURCE, thread.id, thread.name, started, exchanges)


def _chain(db: LogsDatabase, tip: str) -> list[sqlite3.Row]:
    """The messages from the first to `tip`, walked up the parent links one lookup at a time
    (a recursive query cannot tell a corrupt, looping chain from a long one)."""
    rows: list[sqlite3.Row] = []
    seen: set[str] = set()
    key: str | None = tip or None
    while key is not None:
        if key in seen:
            raise _BrokenChain(f"the chain of messages has a cycle at message {key}")
        seen.add(key)
        found = db.query("select hash, parent_hash, role from messages where hash = ?", (key,))
        if not found:
            if not rows:
                raise _BrokenChain(f"the thread's last message {key} is not in the database")
            raise _BrokenChain(f"message {rows[-1]['hash']} has the parent {key}, which is not in the database")
        rows.append(found[0])
        key = found[0]["parent_hash"]
    rows.reverse()
    return rows


def _batches(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[i : i + _BATCH] for i in range(0, len(values), _BATCH)]


def _turns(db: LogsDatabase, hashes: Sequence[str]) -> list[sqlite3.Row]:
    """The turns (of any thread: forks share messages) that asked or answered these messages."""
    rows: list[sqlite3.Row] = []
    for batch in _batches(hashes):
        marks = ",".join("?" * len(batch))
        rows += db.query(
            f"select id, parent_message_hash, tip_message_hash, datetime_utc from turns "
            f"where parent_message_hash in ({marks}) or tip_message_hash in ({marks}) order by id",
            [*batch, *batch],
        )
    return rows


def _texts(db: LogsDatabase, hashes: Sequence[str]) -> dict[str, str]:
    """Each message's text: its text parts in order (reasoning, tool calls and results left out)."""
    rows: list[sqlite3.Row] = []
    for batch in _batches(hashes):
        marks = ",".join("?" * len(batch))
        rows += db.query(
            f"select message_hash, text, payload from parts where message_hash in ({marks}) "
            "and type = 'text' order by message_hash, position",
            list(batch),
        )
    refs = [_text_ref(row["payload"]) if row["text"] is None else None for row in rows]
    fragments = _fragments(db, {p["fragment"] for ref in refs if ref for p in ref if "fragment" in p})
    pieces: dict[str, list[str]] = {}
    for row, ref in zip(rows, refs):
        if ref is None:
            piece = text(row["text"])
        else:
            piece = "".join(
                text(p.get("literal")) if "literal" in p else fragments.get(p.get("fragment"), "") for p in ref
            )
        pieces.setdefault(row["message_hash"], []).append(piece)
    # llm joins a message's text parts with nothing between them; so does this.
    return {key: values[0] if len(values) == 1 else "".join(values) for key, values in pieces.items()}


def _text_ref(payload: Any) -> list[dict[str, Any]]:
    """The text_ref pieces of a part's payload ([] when it has none or is no JSON)."""
    try:
        ref = json.loads(payload).get("text_ref") if isinstance(payload, str) else None
    except (ValueError, AttributeError):
        return []
    return [piece for piece in ref if isinstance(piece, dict)] if isinstance(ref, list) else []


def _fragments(db: LogsDatabase, ids: set[Any]) -> dict[Any, str]:
    """The content of these fragments, by id."""
    wanted = sorted(i for i in ids if isinstance(i, int) and not isinstance(i, bool))
    found: dict[Any, str] = {}
    for start in range(0, len(wanted), _BATCH):
        batch = wanted[start : start + _BATCH]
        marks = ",".join("?" * len(batch))
        try:
            rows = db.query(f"select id, content from fragments where id in ({marks})", batch)
        except InputFileError as exc:
            if "no such table" not in str(exc):
                raise
            # Text kept as fragments in a database without them: this conversation cannot be told.
            raise _BrokenChain("its messages refer to fragments, and the database has no fragments table") from None
        for row in rows:
            found[row["id"]] = text(row["content"])
    return found
