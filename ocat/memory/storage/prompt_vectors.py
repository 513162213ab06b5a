"""The other sides of each exchange: a vector of the user's prompt alone, and one per passage
of a text longer than the embedding model's window.

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

Passages: all-MiniLM-L6-v2 reads 256 word pieces, so a fact late in a long answer is not in
the exchange's vector. Each window past the first (ocat.memory.embedding.embedders.passages_of)
gets a vector here too, and an exchange scores by the best of all its vectors. An exchange's
prompt vector and its passages are written in one transaction, and the prompt row records how
many passages it has (NULL: not yet made, after a bulk write or in a store from before
passages; ocat.memory.storage.passages makes them in the background, a step
at a time, so a crash loses only the step).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ocat.memory.storage.derived import DerivedFileError, checkpoint_at_exit
from ocat.memory.embedding.embedders import passages_of

if TYPE_CHECKING:
    from ocat.memory.embedding.embedders import Embedder


# One exchange's other sides: its prompt's vector and its passages' vectors.
Sides = tuple[Sequence[float], list[Sequence[float]]]


def other_sides(embedder: Embedder, text: str, metadata: Mapping[str, Any], *, passages: bool = True) -> list[str]:
    """The texts of an exchange's other sides, to embed: its prompt first, then (with `passages`) its passages."""
    return [str(metadata.get("user_prompt", "")), *(passages_of(embedder, text) if passages else [])]


def regroup(vectors: Sequence[Sequence[float]], groups: Sequence[Sequence[str]]) -> list[list[Sequence[float]]]:
    """The vectors of several groups of texts, embedded in one call, back per group."""
    out: list[list[Sequence[float]]] = []
    at = 0
    for group in groups:
        out.append(list(vectors[at : at + len(group)]))
        at += len(group)
    return out


def split_sides(vectors: Sequence[Sequence[float]], texts: Sequence[Sequence[str]]) -> list[Sides]:
    """The vectors of several exchanges' `other_sides` (embedded in one call) back per exchange."""
    return [(group[0], group[1:]) for group in regroup(vectors, texts)]


# SQLite's limit on the parameters of one statement is 32,766 nowadays; stay well below it.
IDS_PER_SELECT = 900


# Only for exchanges still here: one deleted while its passages were being made gets none.
_INSERT_PASSAGES = (
    "INSERT OR REPLACE INTO passage_vectors SELECT ?, ?, ?"
    " WHERE EXISTS (SELECT 1 FROM prompt_vectors WHERE record_id = ?)"
)


def _blob(vector: Sequence[float]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


def _passage_rows(ids: Sequence[str], passages: Sequence[Sequence[Sequence[float]]]) -> list[tuple[Any, ...]]:
    return [(i, n, _blob(v), i) for i, p in zip(ids, passages) for n, v in enumerate(p)]


class PromptVectors:
    """The prompt vectors of one store's exchanges, keyed by exchange id; safe to share between threads."""

    def __init__(self, path: Path | str, embedder: Embedder) -> None:
        self.path = str(path)
        self.embedder = embedder
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            checkpoint_at_exit(self.path)
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
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS passage_vectors (record_id TEXT NOT NULL, n INTEGER NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (record_id, n))"
            )
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(prompt_vectors)")}
            if "passages" not in columns:  # a file from before passages: every row is still to do
                self._db.execute("ALTER TABLE prompt_vectors ADD COLUMN passages INTEGER")
            # The exchanges whose passages are still to make, found without a scan: each step of the
            # backfill asks for the next few, and at 100k a scan past the done rows grew with them.
            self._db.execute(
                "CREATE INDEX IF NOT EXISTS prompt_vectors_waiting ON prompt_vectors(record_id) WHERE passages IS NULL"
            )
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot open the prompt vectors {self.path}: {exc}", self.path) from exc
        # A store's model never changes, but a cache file (a server's store) could outlive the
        # collection it was made for: vectors of another model are dropped, and embedded again.
        if self.get_meta("model") != embedder.name:
            self._write("DELETE FROM prompt_vectors", [()])
            self._write("DELETE FROM passage_vectors", [()])
            self._write("DELETE FROM meta", [()])
            self.set_meta("model", embedder.name)

    def count(self) -> int:
        """How many exchanges have a prompt vector."""
        return int(self._read("SELECT count(*) FROM prompt_vectors", ())[0][0])

    def write(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        passages: Sequence[Sequence[Sequence[float]]] | None = None,
    ) -> None:
        """Store prompt vectors and, with `passages`, each exchange's passage vectors (an id already
        present gets the new ones: the same text, the same vectors), in one transaction.

        Without `passages` (a caller that has not made them) the rows are marked to be done.
        """
        counts: list[int | None] = [None] * len(ids) if passages is None else [len(p) for p in passages]
        rows = [(i, _blob(v), n) for i, v, n in zip(ids, vectors, counts, strict=True)]
        self._transaction([
            ("DELETE FROM passage_vectors WHERE record_id = ?", [(i,) for i in ids] if passages is not None else []),
            ("INSERT OR REPLACE INTO prompt_vectors VALUES (?, ?, ?)", rows),
            (_INSERT_PASSAGES, _passage_rows(ids, passages or [])),
        ])

    def write_passages(self, ids: Sequence[str], passages: Sequence[Sequence[Sequence[float]]]) -> None:
        """Give exchanges that have a prompt vector their passages (the backfill of an older store)."""
        self._transaction([
            ("DELETE FROM passage_vectors WHERE record_id = ?", [(i,) for i in ids]),
            (_INSERT_PASSAGES, _passage_rows(ids, passages)),
            ("UPDATE prompt_vectors SET passages = ? WHERE record_id = ?",
             [(len(p), i) for i, p in zip(ids, passages)]),
        ])

    def without_passages(self, limit: int) -> list[str]:
        """Up to `limit` exchanges whose passages are still to be made."""
        return [row[0] for row in self._read("SELECT record_id FROM prompt_vectors WHERE passages IS NULL LIMIT ?",
                                             (limit,))]

    def delete_passages(self) -> None:
        """Forget every passage vector and mark every exchange to be done again (the evaluation's
        "without passages"; the next open makes them again)."""
        self._transaction([
            ("DELETE FROM passage_vectors", [()]),
            ("UPDATE prompt_vectors SET passages = NULL", [()]),
        ])

    def passage_count(self) -> int:
        """How many passage vectors there are (for stats and tests)."""
        return int(self._read("SELECT count(*) FROM passage_vectors", ())[0][0])

    def delete(self, ids: Sequence[str]) -> None:
        """Forget the prompt and passage vectors of deleted exchanges."""
        rows = [(i,) for i in ids]
        self._transaction([
            ("DELETE FROM prompt_vectors WHERE record_id = ?", rows),
            ("DELETE FROM passage_vectors WHERE record_id = ?", rows),
        ])

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The prompt vectors of these exchanges (those that have one), by id."""
        import numpy as np

        found: dict[str, list[float]] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), IDS_PER_SELECT):
            part = unique[start : start + IDS_PER_SELECT]
            marks = ",".join("?" * len(part))
            query = f"SELECT record_id, vector FROM prompt_vectors WHERE record_id IN ({marks})"
            for record_id, blob in self._read(query, part):
                if len(blob) == 4 * self.embedder.dimensions:
                    found[record_id] = np.frombuffer(blob, dtype=np.float32).tolist()
        return found

    def similarities(
        self, ids: Sequence[str], queries: Sequence[Sequence[float]], *, passages: bool = True
    ) -> dict[str, list[float]]:
        """Each id's best cosine with each query vector over its prompt vector and (with `passages`)
        its passages, in one read per table; ids without any are left out (an exchange written a
        moment ago by an older ocat, until the next open embeds it)."""
        import numpy as np

        unique = list(dict.fromkeys(ids))
        if not unique or not queries:
            return {}
        found: list[tuple[str, bytes]] = []
        for start in range(0, len(unique), IDS_PER_SELECT):
            part = unique[start : start + IDS_PER_SELECT]
            marks = ",".join("?" * len(part))
            for table in ("prompt_vectors", "passage_vectors") if passages else ("prompt_vectors",):
                found += self._read(f"SELECT record_id, vector FROM {table} WHERE record_id IN ({marks})", part)
        width = 4 * self.embedder.dimensions
        found = [(i, blob) for i, blob in found if len(blob) == width]
        if not found:
            return {}
        matrix = np.frombuffer(b"".join(blob for _, blob in found), dtype=np.float32).reshape(len(found), -1)
        # Both sides are unit vectors: the dot product is the cosine similarity.
        cosines = np.clip(matrix @ np.asarray(queries, dtype=np.float32).T, 0.0, 1.0)
        best: dict[str, Any] = {}
        for (i, _), row in zip(found, cosines):
            best[i] = row if i not in best else np.maximum(best[i], row)
        return {i: [float(c) for c in row] for i, row in best.items()}

    def ids(self) -> set[str]:
        """The ids of every exchange that has a prompt vector."""
        return {row[0] for row in self._read("SELECT record_id FROM prompt_vectors", ())}

    def missing(self, ids: Sequence[str]) -> list[str]:
        """Which of these exchanges have no prompt vector here, in their order."""
        unique = list(dict.fromkeys(ids))
        found: set[str] = set()
        for start in range(0, len(unique), IDS_PER_SELECT):
            part = unique[start : start + IDS_PER_SELECT]
            marks = ",".join("?" * len(part))
            found.update(row[0] for row in self._read(
                f"SELECT record_id FROM prompt_vectors WHERE record_id IN ({marks})", part))
        return [i for i in unique if i not in found]

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
        self._transaction([(sql, rows)])

    def _transaction(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Run statements (each over its rows) as one transaction: all of them or none."""
        statements = [(sql, rows) for sql, rows in statements if rows]
        if not statements:
            return
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for sql, rows in statements:
                        self._db.executemany(sql, rows)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot write the prompt vectors {self.path}: {exc}", self.path) from exc
