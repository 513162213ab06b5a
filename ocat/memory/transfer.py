"""Export and import of memory as JSON Lines, streamed so any size fits in bounded memory.

Exchanges are `{"kind": "exchange", <the nine exchange fields>}`; document chunks are
`{"kind": "document", "id", "text", "metadata"}`. Import re-embeds with the store's own
model, which is also how memory moves to a new embedding model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from ocat.errors import InputFileError
from ocat.memory.store import MemoryStore
from ocat.models import EXCHANGE_FIELDS, DocumentChunk, Exchange

_STRING_FIELDS = ("exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response")


@dataclass(frozen=True)
class TransferResult:
    """How many records an export wrote or an import read and added."""

    path: str
    exchanges: int
    documents: int
    added: int = 0

    @property
    def records(self) -> int:
        """Exchanges plus documents."""
        return self.exchanges + self.documents


def export_memory(store: MemoryStore, out: IO[str], *, path: str = "-") -> TransferResult:
    """Write every exchange, then every document chunk, one JSON object per line."""
    counts = {"exchange": 0, "document": 0}
    for kind in ("exchange", "document"):
        for record in store.iter_records(kind):
            out.write(json.dumps(_to_line(record), ensure_ascii=False) + "\n")
            counts[kind] += 1
    out.flush()
    return TransferResult(path=path, exchanges=counts["exchange"], documents=counts["document"])


def _to_line(record: Exchange | DocumentChunk) -> dict[str, Any]:
    if isinstance(record, Exchange):
        return {"kind": "exchange", **record.to_record()}
    # Sorted keys make two exports of the same memory byte-identical.
    return {"kind": "document", "id": record.id, "text": record.text, "metadata": dict(sorted(record.metadata.items()))}


def import_memory(
    store: MemoryStore, path: Path, *, progress: Callable[[int, int], None] | None = None
) -> TransferResult:
    """Import a JSONL file: check every line first, then write, so a bad file writes nothing.

    Records already in the store (same id) are skipped, so an interrupted import can
    simply be run again. `progress(done, total)` follows the records as they are written.
    """
    counts = {"exchange": 0, "document": 0}
    for _, record in _records(path):
        counts["exchange" if isinstance(record, Exchange) else "document"] += 1
    total = counts["exchange"] + counts["document"]
    exchanges = (r for _, r in _records(path) if isinstance(r, Exchange))
    added = store.add_exchanges(exchanges, progress=(lambda done: progress(done, total)) if progress else None)
    documents = (r for _, r in _records(path) if isinstance(r, DocumentChunk))
    offset = counts["exchange"]
    added += store.add_chunks(documents, progress=(lambda done: progress(offset + done, total)) if progress else None)
    return TransferResult(path=str(path), exchanges=counts["exchange"], documents=counts["document"], added=added)


def _records(path: Path) -> Iterator[tuple[int, Exchange | DocumentChunk]]:
    try:
        handle = path.open("r", encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputFileError(f"no such file: {path}") from exc
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, parse_line(line, number, path)
        except UnicodeDecodeError as exc:
            raise InputFileError(f"{path} is not UTF-8 text") from exc


def parse_line(line: str, number: int, path: Path | str) -> Exchange | DocumentChunk:
    """One JSONL line as a record, or an InputFileError naming the file and line."""

    def bad(why: str) -> InputFileError:
        return InputFileError(f"{path}:{number}: {why}; nothing was imported")

    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise bad("expected a JSON object")
    kind = data.get("kind")
    if kind == "exchange":
        missing = [f for f in EXCHANGE_FIELDS if f not in data]
        if missing:
            raise bad(f"exchange is missing {', '.join(missing)}")
        for name in _STRING_FIELDS:
            if not isinstance(data[name], str):
                raise bad(f"{name} must be a string")
        if not data["exchange_id"] or not data["thread_id"] or not data["session_id"]:
            raise bad("exchange_id, thread_id and session_id must not be empty")
        if isinstance(data["timestamp"], bool) or not isinstance(data["timestamp"], (int, float)):
            raise bad("timestamp must be a number")
        prior = data["prior_exchange_ids"]
        if not isinstance(prior, list) or not all(isinstance(p, str) for p in prior):
            raise bad("prior_exchange_ids must be a list of strings")
        seq = data["thread_continuation_seq"]
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise bad("thread_continuation_seq must be an integer")
        if data["thread_session_id"] != f"{data['thread_id']}_{data['session_id']}":
            raise bad("thread_session_id must be '{thread_id}_{session_id}'")
        return Exchange.from_metadata(data)
    if kind == "document":
        record_id, text, metadata = data.get("id"), data.get("text"), data.get("metadata", {})
        if not isinstance(record_id, str) or not record_id:
            raise bad("document id must be a non-empty string")
        if not isinstance(text, str) or not text.strip():
            raise bad("document text must be a non-empty string")
        if not isinstance(metadata, dict) or not all(_is_metadata_value(v) for v in metadata.values()):
            raise bad("document metadata must be an object of strings, numbers, booleans or non-empty lists of them")
        return DocumentChunk(id=record_id, text=text, metadata=metadata)
    raise bad(f"unknown kind {kind!r} (expected 'exchange' or 'document')")


def _is_metadata_value(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool)):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, (str, int, float, bool)) for v in value)
