"""The prompt side of each exchange: a second vector, of the user's prompt alone.

An exchange is embedded as "User: ...\\nAssistant: ...". With an assistant's long answers that
vector is mostly the answer, so a question that asks again what the user once asked can be
far from it. Retrieval scores an exchange by the better of the two cosines (docs/RETRIEVAL.md:
on chats-dev R@5 +2.6 and quiet off-topic +1.7 points, LoCoMo held).

The vectors are derived data, like the lexical index: each can be embedded again from the
prompt Chroma keeps. They live in a small SQLite file beside the lexical index (float32
blobs under the exchange's id) because a chat turn reads a hundred of them by id, and
SQLite does that in about a millisecond, where a Chroma read by id took 4.5 ms at 100k
exchanges (docs/RETRIEVAL.md). Opening a store embeds whatever is missing
(ocat.memory.storage.reconcile.sync_prompts).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ocat.memory.storage.derived import DerivedFileError

if TYPE_CHECKING:
    from ocat.memory.embedding.embedders import Embedder

# SQLite's limit on the parameters of one statement is 32,766 nowadays; stay well below it.
IDS_PER_SELECT = 900


class PromptVectors:
    """The prompt vectors of one store's exchanges, keyed by exchange id; safe to share between threads."""

    def __init__(self, path: Path | str, embedder: Embedder) -> None:
        self.path = str(path)
        self.embedder = embedder
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A rowid table: a 1.5 KB vector fits in its leaf page, where WITHOUT ROWID would
            # spill every row to an overflow page (3x the file, 4x slower reads at 100k).
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS prompt_vectors (record_id TEXT PRIMARY KEY, vector BLOB NOT NULL)"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
            )
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot open the prompt vectors {self.path}: {exc}", self.path) from exc
        # A store's model never changes, but a cache file (a server's store) could outlive the
        # collection it was made for: vectors of another model are dropped, and embedded again.
        if self.get_meta("model") != embedder.name:
            self._write("DELETE FROM prompt_vectors", [()])
            self._write("DELETE FROM meta", [()])
            self.set_meta("model", embedder.name)

    def count(self) -> int:
        """How many exchanges have a prompt vector."""
        return int(self._read("SELECT count(*) FROM prompt_vectors", ())[0][0])

    def write(self, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Store prompt vectors (an id already present gets the new one: the same prompt, the same vector)."""
        import numpy as np

        rows = [(i, np.asarray(v, dtype=np.float32).tobytes()) for i, v in zip(ids, vectors, strict=True)]
        self._write("INSERT OR REPLACE INTO prompt_vectors VALUES (?, ?)", rows)

    def delete(self, ids: Sequence[str]) -> None:
        """Forget the prompt vectors of deleted exchanges."""
        self._write("DELETE FROM prompt_vectors WHERE record_id = ?", [(i,) for i in ids])

    def similarities(self, ids: Sequence[str], queries: Sequence[Sequence[float]]) -> dict[str, list[float]]:
        """Each id's cosine with each query vector, in one read; ids without a vector are left out
        (an exchange written a moment ago by an older ocat, until the next open embeds it)."""
        import numpy as np

        unique = list(dict.fromkeys(ids))
        if not unique or not queries:
            return {}
        found: list[tuple[str, bytes]] = []
        for start in range(0, len(unique), IDS_PER_SELECT):
            part = unique[start : start + IDS_PER_SELECT]
            marks = ",".join("?" * len(part))
            found += self._read(
                f"SELECT record_id, vector FROM prompt_vectors WHERE record_id IN ({marks})", part
            )
        width = 4 * self.embedder.dimensions
        found = [(i, blob) for i, blob in found if len(blob) == width]
        if not found:
            return {}
        matrix = np.frombuffer(b"".join(blob for _, blob in found), dtype=np.float32).reshape(len(found), -1)
        # Both sides are unit vectors: the dot product is the cosine similarity.
        cosines = np.clip(matrix @ np.asarray(queries, dtype=np.float32).T, 0.0, 1.0)
        return {i: [float(c) for c in row] for (i, _), row in zip(found, cosines)}

    def ids(self) -> set[str]:
        """The ids of every exchange that has a prompt vector."""
        return {row[0] for row in self._read("SELECT record_id FROM prompt_vectors", ())}

    def get_meta(self, key: str) -> str | None:
        """A value kept beside the vectors (the store's floor: ocat.memory.retrieval.store_floor), or None."""
        found = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return str(found[0][0]) if found else None

    def set_meta(self, key: str, value: str) -> None:
        """Keep a value beside the vectors."""
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(key, value)])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _read(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        try:
            with self._lock:
                return self._db.execute(sql, parameters).fetchall()
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot read the prompt vectors {self.path}: {exc}", self.path) from exc

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(sql, rows)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot write the prompt vectors {self.path}: {exc}", self.path) from exc

