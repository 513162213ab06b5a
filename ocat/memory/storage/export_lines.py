"""The lines of an export file, read and checked: what `--import-memory` accepts.

A line that passes holds a record Chroma stores exactly as it is (no value dropped, rounded or
refused), whose text and dates can be embedded and shown, and whose metadata ocat can read
(every key ocat reads is checked by type and range). Anything else names its line and why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocat.errors import InputFileError
from ocat.memory.storage.link_records import HOWS
from ocat.text.limits import MAX_DOCUMENT_CHUNKS, MAX_TITLE_CHARS, stored_count
# Chroma keeps integers as signed 64-bit numbers; a larger one silently becomes an approximate float.
from ocat.text.limits import FIRST_DATE, INT64_MAX, INT64_MIN, LAST_DATE
from ocat.records import (
    EXCHANGE_FIELDS,
    FORKED_EXCHANGE_KEY,
    FORKED_THREAD_KEY,
    GIT_BRANCH_KEY,
    ORIGIN_KEY,
    PROJECT_KEY,
    SHORTENED_KEY,
    SUPERSEDED_KEY,
    TOOL_CALLS_KEY,
    UPDATE_EVIDENCE_KEY,
    UPDATE_HOW_KEY,
    UPDATED_BY_KEY,
    DocumentChunk,
    Exchange,
)
from ocat.text.terminal import clean_title

_STRING_FIELDS = ("exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response")
# The times a date can show in every time zone (years 1 to 9999, with a day to spare at each
# end): past them, printing the date raises OverflowError wherever the record is shown.
EARLIEST_TIME = datetime.fromisoformat(FIRST_DATE).replace(tzinfo=timezone.utc).timestamp()
LATEST_TIME = datetime.fromisoformat(LAST_DATE).replace(tzinfo=timezone.utc).timestamp()
# Chroma refuses metadata keys starting with these, and silently drops keys starting with "chroma:".
_RESERVED_KEY_STARTS = ("#", "$", "chroma:")

@dataclass(frozen=True)
class ThreadTitle:
    """A title given to a thread (/rename), as a line of an export file."""

    thread_id: str
    title: str


@dataclass(frozen=True)
class Pin:
    """A pinned memory (/pin), as a line of an export file."""

    id: str
    pinned_at: float


@dataclass(frozen=True)
class Link:
    """A link between two exchanges, versions of a fact (ocat.memory.storage.versions), as a line of an
    export file: a note's link travels in its chunks' metadata instead."""

    older: str
    newer: str
    how: str
    evidence: str

Line = Exchange | DocumentChunk | ThreadTitle | Pin | Link


class _Refused(Exception):
    """Why a line cannot be imported; `parse_line` names the file and the line."""


def parse_line(line: str, number: int, path: Path | str) -> Line:
    """One JSONL line as a record, or an InputFileError naming the file and line.

    A record that passes is one Chroma stores exactly as it is (no value dropped, rounded or
    refused), and whose text and dates can be embedded and shown.
    """
    try:
        return _parse(line)
    except _Refused as exc:
        raise InputFileError(f"{path}:{number}: {exc}; nothing was imported") from None


def _parse(line: str) -> Line:
    try:
        data = json.loads(line)
    except RecursionError:
        raise _Refused("the JSON is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of more than 4,300 digits
        raise _Refused(f"not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(data, dict):
        raise _Refused("expected a JSON object")
    kind = data.get("kind")
    if kind == "exchange":
        return _exchange(data)
    if kind == "document":
        return _document(data)
    if kind == "thread":
        return _thread_title(data)
    if kind == "pin":
        return _pin(data)
    if kind == "link":
        return _link(data)
    if "kind" not in data:
        raise _Refused("the record has no kind (expected 'exchange', 'document', 'thread', 'pin' or 'link')")
    raise _Refused(f"unknown kind {_shown(kind)} (expected 'exchange', 'document', 'thread', 'pin' or 'link')")


def _link(data: dict[str, Any]) -> Link:
    """A link: two exchange ids that differ, how it was made, and its evidence (a string)."""
    older, newer, how, evidence = data.get("older"), data.get("newer"), data.get("how"), data.get("evidence", "")
    for name, value in (("older", older), ("newer", newer)):
        if not isinstance(value, str) or not value:
            raise _Refused(f"a link's {name} must be a non-empty string")
        _check_text(value, name)
    if older == newer:
        raise _Refused("a link's older and newer are the same memory")
    if how not in HOWS:
        raise _Refused(f"a link's how must be one of {', '.join(HOWS)}, not {_shown(how)}")
    if not isinstance(evidence, str):
        raise _Refused("a link's evidence must be a string")
    _check_text(evidence, "evidence")
    return Link(str(older), str(newer), str(how), evidence)


def _pin(data: dict[str, Any]) -> Pin:
    """A pin: the id of a memory of the file, and when it was pinned (a date every zone can show)."""
    record_id, when = data.get("id"), data.get("pinned_at")
    if not isinstance(record_id, str) or not record_id:
        raise _Refused("a pin's id must be a non-empty string")
    _check_text(record_id, "id")
    # A pin is a moment after 1970: the store finds pins by `pinned_at > 0`, so an earlier one
    # would import without a word and pin nothing.
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not 0 < when <= LATEST_TIME:
        raise _Refused(f"pinned_at must be a time in seconds since 1970 (above 0), not {_shown(when)}")
    return Pin(record_id, float(when))


def _exchange(data: dict[str, Any]) -> Exchange:
    missing = [f for f in EXCHANGE_FIELDS if f not in data]
    if missing:
        raise _Refused(f"exchange is missing {', '.join(missing)}")
    for name in _STRING_FIELDS:
        if not isinstance(data[name], str):
            raise _Refused(f"{name} must be a string")
        _check_text(data[name], name)
    if not data["exchange_id"] or not data["thread_id"] or not data["session_id"]:
        raise _Refused("exchange_id, thread_id and session_id must not be empty")
    _check_timestamp(data["timestamp"])
    prior = data["prior_exchange_ids"]
    if not isinstance(prior, list) or not all(isinstance(p, str) for p in prior):
        raise _Refused("prior_exchange_ids must be a list of strings")
    for p in prior:
        _check_text(p, "prior_exchange_ids")
    seq = data["thread_continuation_seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise _Refused("thread_continuation_seq must be an integer")
    if not INT64_MIN <= seq <= INT64_MAX:
        raise _Refused(f"thread_continuation_seq {_shown(seq)} is beyond the 64-bit integers Chroma stores")
    if data["thread_session_id"] != f"{data['thread_id']}_{data['session_id']}":
        raise _Refused("thread_session_id must be '{thread_id}_{session_id}'")
    if TOOL_CALLS_KEY in data:
        _check_tool_calls(data[TOOL_CALLS_KEY])
    for key in (ORIGIN_KEY, PROJECT_KEY, GIT_BRANCH_KEY, FORKED_THREAD_KEY, FORKED_EXCHANGE_KEY):
        if key in data and not isinstance(data[key], str):
            raise _Refused(f"{key} must be a string")
    return Exchange.from_metadata(data)


def _check_tool_calls(calls: Any) -> None:
    """An exchange's tool calls: a list of objects, each with a name, and ids as strings."""
    if not isinstance(calls, list):
        raise _Refused("tool_calls must be a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise _Refused("each of tool_calls must be an object with a name")
        ids = call.get("ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise _Refused("the ids of a tool call must be a list of strings")
        for key in ("count", "ms"):
            if call.get(key) is not None and (isinstance(call[key], bool) or not isinstance(call[key], int)):
                raise _Refused(f"the {key} of a tool call must be a whole number or null")


def _document(data: dict[str, Any]) -> DocumentChunk:
    record_id, text, metadata = data.get("id"), data.get("text"), data.get("metadata")
    if not isinstance(record_id, str) or not record_id:
        raise _Refused("document id must be a non-empty string")
    _check_text(record_id, "id")
    if not isinstance(text, str) or not text.strip():
        raise _Refused("document text must be a non-empty string")
    _check_text(text, "text")
    if metadata is None:  # optional: absent (or null) is no metadata
        metadata = {}
    if not isinstance(metadata, dict):
        raise _Refused("document metadata must be an object")
    for key, value in metadata.items():
        _check_metadata(key, value)
    _check_known_keys(metadata)
    return DocumentChunk(id=record_id, text=text, metadata=metadata)


# The document metadata ocat itself reads, and what each must be: an import that stored
# `total_chunks: "many"` made every later stats call fail, and `1e18` invented a partial document.
_TEXT_KEYS = ("kind", "source", "source_file", "source_path", "source_folder", "filename", "section", "prefix",
              "content_hash", "document_id", SHORTENED_KEY, SUPERSEDED_KEY, UPDATED_BY_KEY, UPDATE_EVIDENCE_KEY)


def _check_known_keys(metadata: dict[str, Any]) -> None:
    """Refuse a value of a key ocat reads that is not of that key's type and range."""
    for key in _TEXT_KEYS:
        if key in metadata and not isinstance(metadata[key], str):
            raise _Refused(f"metadata {_shown(key)} must be a string, not {_shown(metadata[key])}")
    if UPDATE_HOW_KEY in metadata and metadata[UPDATE_HOW_KEY] not in HOWS:
        raise _Refused(f"metadata {_shown(UPDATE_HOW_KEY)} must be one of {', '.join(HOWS)}, "
                       f"not {_shown(metadata[UPDATE_HOW_KEY])}")
    if "manual_entry" in metadata and not isinstance(metadata["manual_entry"], bool):
        raise _Refused(f"metadata \"manual_entry\" must be true or false, not {_shown(metadata['manual_entry'])}")
    for key in ("date_added", "timestamp"):
        if key in metadata:
            try:
                _check_timestamp(metadata[key])
            except _Refused:
                raise _Refused(f"metadata {_shown(key)} must be a date (seconds since 1970, years 1 to 9999), "
                               f"not {_shown(metadata[key])}") from None
    total = metadata.get("total_chunks")
    if "total_chunks" in metadata and stored_count(total, least=1) is None:
        raise _Refused(f"metadata \"total_chunks\" must be a whole number from 1 to {MAX_DOCUMENT_CHUNKS:,}, "
                       f"not {_shown(total)}")
    if "chunk_index" in metadata:
        index = stored_count(metadata["chunk_index"])
        top = (total if isinstance(total, int) else MAX_DOCUMENT_CHUNKS) - 1
        if index is None or index > top:
            raise _Refused(f"metadata \"chunk_index\" must be a whole number from 0 to {top:,} "
                           f"(below total_chunks), not {_shown(metadata['chunk_index'])}")


def _thread_title(data: dict[str, Any]) -> ThreadTitle:
    """A thread's title as /rename would store it: one line of printable text, whitespace runs as one space."""
    thread_id, title = data.get("thread_id"), data.get("title")
    if not isinstance(thread_id, str) or not thread_id:
        raise _Refused("thread_id must be a non-empty string")
    _check_text(thread_id, "thread_id")
    if not isinstance(title, str):
        raise _Refused("title must be a string")
    _check_text(title, "title")
    # The rule /rename applies: controls and bidi overrides are dropped, not refused, so a
    # backup made by any ocat restores.
    cleaned = clean_title(title)
    if not cleaned:
        raise _Refused("title must not be empty")
    if len(cleaned) > MAX_TITLE_CHARS:
        raise _Refused(f"title is {len(cleaned)} characters; a title is at most {MAX_TITLE_CHARS}")
    return ThreadTitle(thread_id, cleaned)


def _check_metadata(key: str, value: Any) -> None:
    """A metadata entry Chroma stores as it is (its own checks, and the ones it skips)."""
    shown = _shown(key)
    if not key:
        raise _Refused('metadata key "" is empty')
    _check_text(key, f"metadata key {shown}")
    if key.startswith(_RESERVED_KEY_STARTS):
        start = next(s for s in _RESERVED_KEY_STARTS if key.startswith(s))
        raise _Refused(f"metadata key {shown} starts with {start!r}, which Chroma reserves")
    where = f"metadata {shown}"
    if not isinstance(value, list):
        _scalar_type(value, where)
        return
    if not value:
        raise _Refused(f"{where} is an empty list (Chroma stores only non-empty lists)")
    types = sorted({_scalar_type(item, f"{where} (in the list)") for item in value})
    if len(types) > 1:
        raise _Refused(f"{where} is a list mixing {' and '.join(types)} (Chroma needs one type per list)")


def _scalar_type(value: Any, where: str) -> str:
    """The kind of a single metadata value, or _Refused if Chroma would refuse or alter it."""
    if isinstance(value, bool):
        return "booleans"
    if isinstance(value, str):
        _check_text(value, where)
        return "strings"
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise _Refused(f"{where} is {_shown(value)}, beyond the 64-bit integers Chroma stores")
        return "integers"
    if isinstance(value, float):
        if not math.isfinite(value):
            # A NaN is dropped by Chroma; in a list it breaks the whole collection.
            raise _Refused(f"{where} is {_shown(value)}, which Chroma cannot store")
        return "floats"
    what = "null" if value is None else "an object" if isinstance(value, dict) else "a list inside a list"
    raise _Refused(f"{where} is {what}; values must be strings, numbers, booleans or non-empty lists of one of them")


def _check_timestamp(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Refused("timestamp must be a number")
    if not EARLIEST_TIME <= value <= LATEST_TIME:  # NaN compares false, so it is refused too
        raise _Refused(f"timestamp {_shown(value)} is not a date between the years 1 and 9999")


def _check_text(text: str, name: str) -> None:
    """Refuse a lone surrogate (JSON "\\udfff"): it is no character, and the embedder, Chroma and
    SQLite all fail on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(
            f"{name} holds a lone surrogate (\\u{ord(text[exc.start]):04x} at character {exc.start + 1}), "
            "which is not text"
        ) from None


def _shown(value: Any) -> str:
    """A value for a message: as JSON (quoted, with control characters and surrogates escaped),
    and cut short when long (a 400-digit integer)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:24]}… ({len(text)} characters)"
