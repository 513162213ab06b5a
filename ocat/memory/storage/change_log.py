"""The change log of a store on a Chroma server: what each machine wrote, deleted or renamed,
so that the others catch up by reading only that.

Every write, replace, delete and thread rename through a server adds a record to the collection
`<store>-changes`: what was done (`op`: add, update, delete, title), to which kind of record,
and the ids (one per line in its text, at most LOG_IDS per record) or the thread and its title.
Records are only ever added, so the collection's count is a change counter: a machine keeps the
count it has caught up to (in its lexical index), and each search asks the count (one small
request) and reads the records past it, in the order the server took them
(ocat.memory.storage.remote_sync). Pins need no entry: they are read from the records themselves.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Literal, Sequence, cast

from ocat.errors import StoreError
from ocat.memory.storage.shared_sides import MARK

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Metadata

    from ocat.records import RecordKind

CHANGES_SUFFIX = "changes"
# Ids named by one record of the log (a bulk write's batch is one record: 256 ids of 32 characters).
LOG_IDS = 256
# Log records read per request when catching up.
LOG_PAGE = 500

Op = Literal["add", "update", "delete", "title"]


@dataclass(frozen=True)
class Change:
    """One entry of the log: an operation on some records, or a thread's new title ('' for none)."""

    op: str
    kind: str
    ids: tuple[str, ...] = ()
    thread: str = ""
    title: str = ""


class ChangeLog:
    """The `<store>-changes` collection; `following` is held by the one catch-up running at a time."""

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.following = threading.Lock()

    @classmethod
    def open(cls, client: ClientAPI, store: str) -> ChangeLog:
        """The store's change log, made if missing."""
        try:
            return cls(client.get_or_create_collection(f"{store}-{CHANGES_SUFFIX}", embedding_function=None))
        except Exception as exc:
            raise StoreError(f"cannot open the change log of store {store!r}: {exc}") from exc

    def record(self, op: Op | str, kind: RecordKind, ids: Sequence[str] = (), *, thread: str = "",
               title: str | None = None) -> None:
        """Log one operation (an add, update or delete of `ids`, or `thread`'s new `title`)."""
        if not ids and op != "title":
            return
        parts = [list(ids[start : start + LOG_IDS]) for start in range(0, len(ids), LOG_IDS)] or [[]]
        metadata: dict[str, Any] = {"op": op, "kind": kind}
        if op == "title":
            metadata.update(thread=thread, title=title or "")
        try:
            self.collection.add(ids=[uuid.uuid4().hex for _ in parts],
                                embeddings=cast("Any", [list(MARK)] * len(parts)),
                                documents=["\n".join(part) for part in parts],
                                metadatas=cast("list[Metadata]", [dict(metadata) for _ in parts]))
        except Exception as exc:
            raise StoreError(f"cannot log a change in the memory store: {exc}") from exc

    def count(self) -> int:
        """How many changes were ever logged (the log only grows)."""
        try:
            return int(self.collection.count())
        except Exception as exc:
            raise StoreError(f"cannot read the change log: {exc}") from exc

    def since(self, seen: int, upto: int) -> Iterator[Change]:
        """The changes after the first `seen`, up to `upto`, oldest first."""
        offset = seen
        while offset < upto:
            try:
                got = self.collection.get(include=cast("Any", ["documents", "metadatas"]), offset=offset,
                                          limit=min(LOG_PAGE, upto - offset))
            except Exception as exc:
                raise StoreError(f"cannot read the change log: {exc}") from exc
            if not got["ids"]:
                return
            for text, metadata in zip(got["documents"] or [], got["metadatas"] or []):
                meta = metadata or {}
                yield Change(op=str(meta.get("op", "")), kind=str(meta.get("kind", "")),
                             ids=tuple(i for i in (text or "").split("\n") if i),
                             thread=str(meta.get("thread", "")), title=str(meta.get("title", "")))
            offset += len(got["ids"])
