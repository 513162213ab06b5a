"""Pinned memories: the ones the wake block always gives the model (/pin, /remember, `ocat --pin`).

A pin is the time it was made, in the pinned record's own Chroma metadata (ocat.records.PINNED_KEY),
so it lives in the primary store: exports carry it, imports restore it, and no derived file
holds it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ocat.errors import NotFound, StoreError
from ocat.records import PINNED_KEY, RECORD_KINDS, DocumentChunk, Exchange, RecordKind

if TYPE_CHECKING:
    from chromadb.api.types import Metadata, Where

    from ocat.memory.storage.parts import StoreParts


@dataclass(frozen=True)
class Pinned:
    """A pinned memory and when it was pinned."""

    record: Exchange | DocumentChunk
    pinned_at: float
    # The record's metadata as stored: an exchange's holds more than its fields (a link to a newer version).
    stored: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The record's id."""
        return self.record.exchange_id if isinstance(self.record, Exchange) else self.record.id

    def record_metadata(self) -> dict[str, Any]:
        """The pinned record's metadata as stored (else a chunk's own; an exchange's fields)."""
        if self.stored:
            return self.stored
        return self.record.to_metadata() if isinstance(self.record, Exchange) else self.record.metadata


def set_pinned(store: StoreParts, record_id: str, pinned_at: float | None) -> RecordKind:
    """Pin a memory (at `pinned_at`, now if 0) or unpin it (None); returns its kind.
    NotFound when no memory has this id."""
    for kind in RECORD_KINDS:
        if store.existing_ids(kind, [record_id]):
            when = None if pinned_at is None else (pinned_at or time.time())
            try:
                # Chroma merges an update into the stored metadata; None removes the key.
                store.collection(kind).update(ids=[record_id], metadatas=[cast("Metadata", {PINNED_KEY: when})])
            except Exception as exc:
                raise StoreError(f"cannot pin the memory in the memory store: {exc}") from exc
            return kind
    raise NotFound(f"no memory with id {record_id}")


def pinned(store: StoreParts) -> list[Pinned]:
    """Every pinned memory, the latest pinned first (one filtered read per kind)."""
    found: list[Pinned] = []
    for kind in RECORD_KINDS:
        try:
            got = store.collection(kind).get(where=cast("Where", {PINNED_KEY: {"$gt": 0}}),
                                             include=["documents", "metadatas"])
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        for record_id, text, metadata in zip(got["ids"], got["documents"] or [], got["metadatas"] or []):
            when = (metadata or {}).get(PINNED_KEY)
            if not isinstance(when, (int, float)) or isinstance(when, bool):
                continue  # another client's value: not a pin ocat made
            record: Exchange | DocumentChunk = (
                Exchange.from_metadata(metadata or {}) if kind == "exchange"
                else DocumentChunk(id=record_id, text=text or "", metadata=dict(metadata or {}))
            )
            found.append(Pinned(record, float(when), dict(metadata or {})))
    return sorted(found, key=lambda p: p.pinned_at, reverse=True)
