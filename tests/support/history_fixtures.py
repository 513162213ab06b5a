"""Made-up chat exports for the history parsers: ChatGPT and Claude conversations as the real
exports shape them, llm's logs.db with its real schema, and ways to write them to disk."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any, Iterable

# -- ChatGPT (conversations.json) --------------------------------------------------------------

BASE_TIME = 1_700_000_000.0


def gpt_text(*parts: Any) -> dict[str, Any]:
    """A `text` content (or `multimodal_text` when a part is not a string)."""
    kind = "text" if all(isinstance(p, str) for p in parts) else "multimodal_text"
    return {"content_type": kind, "parts": list(parts)}


def gpt_image() -> dict[str, Any]:
    """An image part of a multimodal message, as the export writes it."""
    return {
        "content_type": "image_asset_pointer",
        "asset_pointer": "file-service://file-MadeUp123",
        "size_bytes": 120_000,
        "width": 800,
        "height": 600,
        "metadata": {"dalle": None},
    }


def gpt_message(
    node_id: str,
    role: str,
    content: dict[str, Any] | str,
    create_time: float | None = None,
    hidden: bool = False,
    recipient: str = "all",
) -> dict[str, Any]:
    """A message as the export holds it (a str content is a one-part text)."""
    metadata: dict[str, Any] = {"timestamp_": "absolute"}
    if hidden:
        metadata["is_visually_hidden_from_conversation"] = True
    return {
        "id": node_id,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": create_time,
        "update_time": None,
        "content": gpt_text(content) if isinstance(content, str) else content,
        "status": "finished_successfully",
        "end_turn": role == "assistant" or None,
        "weight": 1.0,
        "metadata": metadata,
        "recipient": recipient,
        "channel": None,
    }


def gpt_conversation(
    conversation_id: str,
    title: str | None,
    nodes: list[tuple[str, str | None, dict[str, Any] | None]],
    current_node: str | None = None,
    create_time: float | None = BASE_TIME,
) -> dict[str, Any]:
    """A conversation from (node id, parent id, message) triples; children are derived, and the
    current node is the last node unless given."""
    mapping: dict[str, Any] = {
        node_id: {"id": node_id, "message": message, "parent": parent, "children": []}
        for node_id, parent, message in nodes
    }
    for node_id, parent, _ in nodes:
        if parent in mapping:
            mapping[parent]["children"].append(node_id)
    return {
        "title": title,
        "create_time": create_time,
        "update_time": (create_time or BASE_TIME) + 600,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": nodes[-1][0] if current_node is None else current_node,
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": conversation_id,
    }


def gpt_linear(conversation_id: str, title: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    """A conversation without branches: a root, then (role, text) messages one after another."""
    nodes: list[tuple[str, str | None, dict[str, Any] | None]] = [(f"{conversation_id}-root", None, None)]
    for index, (role, text) in enumerate(turns):
        node_id = f"{conversation_id}-{index}"
        message = gpt_message(node_id, role, text, create_time=BASE_TIME + index)
        nodes.append((node_id, nodes[-1][0], message))
    return gpt_conversation(conversation_id, title, nodes)


# -- Claude (conversations.json) ----------------------------------------------------------------


def claude_message(
    uuid: str,
    sender: str,
    text: Any = "",
    content: list[dict[str, Any]] | None = None,
    created_at: str = "2024-05-01T09:00:00.000000Z",
    attachments: Iterable[dict[str, Any]] = (),
    files: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A chat message; its content blocks mirror its text unless given."""
    if content is None:
        content = [
            {
                "start_timestamp": created_at,
                "stop_timestamp": created_at,
                "type": "text",
                "text": text,
                "citations": [],
            }
        ]
    return {
        "uuid": uuid,
        "text": text,
        "content": content,
        "sender": sender,
        "created_at": created_at,
        "updated_at": created_at,
        "attachments": list(attachments),
        "files": list(files),
    }


def claude_attachment(file_name: str, extracted_content: str) -> dict[str, Any]:
    """A text file attached to a human message, with the text Claude extracted from it."""
    return {
        "file_name": file_name,
        "file_size": len(extracted_content),
        "file_type": "text/plain",
        "extracted_content": extracted_content,
    }


def claude_conversation(
    uuid: str, name: str, messages: list[dict[str, Any]], created_at: str = "2024-05-01T08:59:00.000000Z"
) -> dict[str, Any]:
    """A conversation as the export holds it."""
    return {
        "uuid": uuid,
        "name": name,
        "summary": "",
        "created_at": created_at,
        "updated_at": created_at,
        "account": {"uuid": "00000000-made-up-account"},
        "chat_messages": messages,
    }


# -- llm's logs.db ----------------------------------------------------------------------------

# The tables as llm's migrations leave them (docs/logging.md, "SQL schema"), the ones read here.
LLM_SCHEMA = """
CREATE TABLE "conversations" ("id" TEXT PRIMARY KEY, "name" TEXT, "model" TEXT);
CREATE TABLE "schemas" ("id" TEXT PRIMARY KEY, "content" TEXT);
CREATE TABLE "responses" (
  "id" TEXT PRIMARY KEY, "model" TEXT, "prompt" TEXT, "system" TEXT, "prompt_json" TEXT,
  "options_json" TEXT, "response" TEXT, "response_json" TEXT,
  "conversation_id" TEXT REFERENCES "conversations"("id"), "duration_ms" INTEGER,
  "datetime_utc" TEXT, "input_tokens" INTEGER, "output_tokens" INTEGER, "token_details" TEXT,
  "schema_id" TEXT REFERENCES "schemas"("id"), "resolved_model" TEXT, "reasoning" TEXT
);
CREATE TABLE "fragments" (
  "id" INTEGER PRIMARY KEY, "hash" TEXT, "content" TEXT, "datetime_utc" TEXT, "source" TEXT
);
CREATE TABLE "messages" (
  "hash" TEXT PRIMARY KEY, "parent_hash" TEXT REFERENCES "messages"("hash"), "role" TEXT,
  "provider_metadata" TEXT
);
CREATE TABLE "parts" (
  "id" INTEGER PRIMARY KEY, "message_hash" TEXT REFERENCES "messages"("hash"), "position" INTEGER,
  "type" TEXT, "tool_name" TEXT, "text" TEXT, "payload" TEXT
);
CREATE TABLE "threads" (
  "id" TEXT PRIMARY KEY, "name" TEXT, "tip_message_hash" TEXT REFERENCES "messages"("hash"),
  "forked_from" TEXT REFERENCES "threads"("id"), "datetime_utc" TEXT
);
CREATE TABLE "turns" (
  "id" TEXT PRIMARY KEY, "thread_id" TEXT REFERENCES "threads"("id"),
  "parent_message_hash" TEXT REFERENCES "messages"("hash"),
  "tip_message_hash" TEXT REFERENCES "messages"("hash"), "model" TEXT, "resolved_model" TEXT,
  "options_json" TEXT, "schema_id" TEXT REFERENCES "schemas"("id"), "input_tokens" INTEGER,
  "output_tokens" INTEGER, "token_details" TEXT, "duration_ms" INTEGER, "datetime_utc" TEXT,
  "response_json" TEXT
);
"""


def create_llm_db(path: Path, wal: bool = False) -> None:
    """An empty logs.db with llm's schema."""
    with sqlite3.connect(path) as db:
        if wal:
            db.execute("pragma journal_mode=wal")
        db.executescript(LLM_SCHEMA)
    db.close()


def add_llm_conversation(db: sqlite3.Connection, conversation_id: str, name: str) -> None:
    """A row of the legacy conversations table."""
    db.execute("insert into conversations (id, name, model) values (?, ?, 'gpt-4o-mini')", (conversation_id, name))


def add_llm_response(
    db: sqlite3.Connection,
    response_id: str,
    prompt: str | None,
    response: str | None,
    conversation_id: str | None,
    datetime_utc: str,
) -> None:
    """A row of the legacy responses table, as llm before 0.32 logged each prompt."""
    db.execute(
        "insert into responses (id, model, prompt, system, options_json, response, conversation_id, "
        "duration_ms, datetime_utc) values (?, 'gpt-4o-mini', ?, null, '{}', ?, ?, 812, ?)",
        (response_id, prompt, response, conversation_id, datetime_utc),
    )


def add_llm_message(
    db: sqlite3.Connection, message_hash: str, parent: str | None, role: str, parts: list[tuple[str, str | None, Any]]
) -> None:
    """A message of the message store with its (type, text, payload) parts."""
    db.execute(
        "insert into messages (hash, parent_hash, role, provider_metadata) values (?, ?, ?, null)",
        (message_hash, parent, role),
    )
    for position, (kind, text, payload) in enumerate(parts):
        db.execute(
            "insert into parts (message_hash, position, type, text, payload) values (?, ?, ?, ?, ?)",
            (message_hash, position, kind, text, None if payload is None else json.dumps(payload)),
        )


def add_llm_thread(
    db: sqlite3.Connection,
    thread_id: str,
    name: str,
    turns: list[tuple[str, str]],
    datetime_utc: str = "2026-08-05T10:00:00+00:00",
    prefix: tuple[tuple[str, str], ...] = (),
) -> None:
    """A thread of (prompt, reply) turns as llm 0.32 logs it: a chain of messages, one turn per
    prompt. `prefix` pairs are history already in the chain without turns of their own."""
    parent: str | None = None
    for index, (prompt, reply) in enumerate([*prefix, *turns]):
        asked, answered = f"b2:{thread_id}-u{index}", f"b2:{thread_id}-a{index}"
        add_llm_message(db, asked, parent, "user", [("text", prompt, None)])
        add_llm_message(db, answered, asked, "assistant", [("text", reply, None)])
        if index >= len(prefix):
            db.execute(
                "insert into turns (id, thread_id, parent_message_hash, tip_message_hash, model, datetime_utc) "
                "values (?, ?, ?, ?, 'gpt-5.6-luna', ?)",
                (f"{thread_id}-turn{index}", thread_id, asked, answered, f"{datetime_utc[:17]}{index:02d}+00:00"),
            )
        parent = answered
    db.execute(
        "insert into threads (id, name, tip_message_hash, forked_from, datetime_utc) values (?, ?, ?, null, ?)",
        (thread_id, name, parent, datetime_utc),
    )


# -- ready-made exports for the tests ---------------------------------------------------------


def branched_conversation() -> dict[str, Any]:
    """A regenerated answer (a1 -> a1b) and an edited prompt (u2 -> u2b): the current node ends
    the path u1, a1b, u2b, a2b."""
    m = gpt_message
    return gpt_conversation(
        "conv-branches",
        "Branches",
        [
            ("root", None, None),
            ("sys", "root", m("sys", "system", "", hidden=True)),
            ("u1", "sys", m("u1", "user", "Name a river in Peru", BASE_TIME + 1)),
            ("a1", "u1", m("a1", "assistant", "The Amazon (first try)", BASE_TIME + 2)),
            ("a1b", "u1", m("a1b", "assistant", "The Ucayali", BASE_TIME + 3)),
            ("u2", "a1b", m("u2", "user", "How long is it?", BASE_TIME + 4)),
            ("a2", "u2", m("a2", "assistant", "About 1,600 km", BASE_TIME + 5)),
            ("u2b", "a1b", m("u2b", "user", "How long is it, in miles?", BASE_TIME + 6)),
            ("a2b", "u2b", m("a2b", "assistant", "About 1,000 miles", BASE_TIME + 7)),
        ],
        current_node="a2b",
    )


def three_conversations() -> list[dict[str, Any]]:
    """Three small ChatGPT conversations, c0 to c2."""
    return [gpt_linear(f"c{i}", f"C{i}", [("user", f"question {i}"), ("assistant", f"answer {i}")]) for i in range(3)]


def legacy_db(path: Path, wal: bool = False) -> Path:
    """A logs.db as llm before 0.32 wrote it: four responses in three conversations."""
    create_llm_db(path, wal=wal)
    with sqlite3.connect(path) as db:
        add_llm_conversation(db, "01conv-b", "capital of peru")
        add_llm_response(db, "01resp-2", "capital of peru?", "Lima.", "01conv-b", "2024-02-01T10:00:00+00:00")
        add_llm_response(db, "01resp-3", "and its population?", "About 10 million.", "01conv-b", "2024-02-01T10:01:00+00:00")
        add_llm_response(db, "01resp-1", "a haiku about tea", "Steam rises, leaves unfurl", None, "2024-01-15 08:30:00.123456")
        # An older llm logged this conversation without a conversations row.
        add_llm_response(db, "01resp-4", "tell a joke", "No.", "01conv-c", "2024-03-01T12:00:00+00:00")
    db.close()
    return path


def message_store_db(path: Path) -> Path:
    """A logs.db as llm 0.32 writes it: threads 01thread-a (also written as a legacy row),
    01old (a legacy conversation continued as a thread), 01frag (fragment text, a tool loop,
    reasoning) and 01broken (its chain points at a missing message)."""
    create_llm_db(path)
    with sqlite3.connect(path) as db:
        add_llm_thread(db, "01thread-a", "pelican names", [("Name a pelican", "Percy"), ("Now a walrus", "Wallace")])
        # Written to both generations of tables: only the thread's copy counts.
        add_llm_response(db, "01thread-a-turn0", "Name a pelican", "Percy", "01thread-a", "2026-08-05T10:00:00+00:00")
        # A legacy conversation continued by llm 0.32: the chain holds the old exchange.
        add_llm_conversation(db, "01old", "old chat")
        add_llm_response(db, "01old-r1", "first question", "first answer", "01old", "2024-01-01T09:00:00+00:00")
        add_llm_thread(db, "01old", "", [("second question", "second answer")],
                       datetime_utc="2026-08-05T11:00:00+00:00", prefix=(("first question", "first answer"),))
        # Text from a fragment, a tool loop, and reasoning that is not said.
        add_llm_message(db, "b2:f-u", None, "user", [("text", None, {"text_ref": [{"fragment": 7}, {"literal": "\nwhat is this?"}]})])
        add_llm_message(db, "b2:f-a", "b2:f-u", "assistant", [("reasoning", "hmm", None), ("tool_call", None, {"name": "look"})])
        add_llm_message(db, "b2:f-t", "b2:f-a", "tool", [("tool_result", None, {"output": "a poem"})])
        add_llm_message(db, "b2:f-a2", "b2:f-t", "assistant", [("text", "It is ", None), ("text", "a poem.", None)])
        db.execute("insert into fragments (id, hash, content) values (7, 'h7', 'Roses are red')")
        db.execute("insert into threads values ('01frag', 'fragment', 'b2:f-a2', null, '2026-08-05T12:00:00+00:00')")
        db.execute("insert into turns (id, thread_id, parent_message_hash, tip_message_hash, datetime_utc) "
                   "values ('01frag-t', '01frag', 'b2:f-u', 'b2:f-a', '2026-08-05T12:00:01+00:00')")
        # A thread whose chain points at a message that is not there.
        add_llm_message(db, "b2:orphan", "b2:nowhere", "user", [("text", "lost", None)])
        db.execute("insert into threads values ('01broken', 'broken', 'b2:orphan', null, '2026-08-05T13:00:00+00:00')")
    db.close()
    return path


class CountingStream(io.BytesIO):
    """Counts what has been read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self.taken += len(data)
        return data


# -- files ------------------------------------------------------------------------------------


def write_json(path: Path, items: list[Any]) -> Path:
    """Write `items` as a JSON array, as the exports do (indented, non-ASCII kept)."""
    path.write_text(json.dumps(items, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def write_zip(path: Path, members: dict[str, Any]) -> Path:
    """A zip of members: a list or dict is written as JSON, bytes and str as they are."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, value in members.items():
            data = value if isinstance(value, (bytes, str)) else json.dumps(value, ensure_ascii=False)
            archive.writestr(name, data)
    return path
