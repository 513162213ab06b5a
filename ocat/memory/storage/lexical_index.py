"""The lexical side of retrieval: an SQLite FTS5 index (BM25) beside the Chroma store.

Texts are reduced to normalised terms in Python (lower case, stop words dropped, a light
stemmer) and FTS5 indexes those terms, so the same function decides what a "term" is when
indexing, querying and scoring a candidate's coverage of the query.

Each term's document count is kept in a table of its own, updated with every write, so that
a query never walks a term's whole posting list to learn how common it is; and the BM25
search leaves out a query's most common terms once the rarer ones already mean reading
POSTINGS_BUDGET postings, so its cost stays flat as the store grows (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ocat.memory.storage.derived import DerivedFileError, checkpoint_at_exit
from ocat.memory.storage.index_file import IndexFile
from ocat.memory.storage.terms import MAX_QUERY_TERMS, terms, within_postings_budget
from ocat.memory.storage.thread_catalogue import ThreadCatalogue, like_prefix
from ocat.records import RECORD_KINDS, THREAD_TITLE_KEY, searched_text

# PRAGMA user_version of an index whose per-term document counts (df_<kind>) are filled in.
SCHEMA_VERSION = 1
# Parameters per `IN (...)` list: SQLite's limit is 32,766 nowadays (999 in old builds).
IDS_PER_SELECT = 500
# A document chunk's id, `doc-KEY-N` (32 hex digits of its document's key, ocat.memory.ingest.documents.chunk_id,
# and its index), or its short form with only the start of the key (hex only: nothing a GLOB reads).
CHUNK_ID = re.compile(r"^doc-([0-9a-f]{1,32})-(\d+)$")


class LexicalIndex:
    """FTS5 tables (one per record kind) in one SQLite file, safe to share between threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        # Counts are read on every query (for IDF); keep them rather than count(*) each time.
        self._counts: dict[str, int] = {}
        self._data_version = -1
        try:
            # The file and its lock, shared with the thread catalogue.
            self.file = IndexFile(self.path)
            self._db = self.file.connection
            checkpoint_at_exit(self.path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            for kind in RECORD_KINDS:
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS ids_{kind} (rowid INTEGER PRIMARY KEY, record_id TEXT UNIQUE NOT NULL)"
                )
                self._db.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS fts_{kind} USING fts5(body, "
                    "tokenize='unicode61 remove_diacritics 0')"
                )
                # How many records contain each term (IDF, and choosing which terms to search).
                self._db.execute(
                    f"CREATE TABLE IF NOT EXISTS df_{kind} (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID"
                )
            # Thread order of exchanges, so a hit's neighbours are one indexed lookup away
            # (Chroma could only find them with a slow metadata filter).
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS thread_order (record_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
                "ts REAL NOT NULL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS thread_order_by_time ON thread_order(thread_id, ts)")
            # A copy of the titles the user gave threads (/rename), for listing threads: the titles
            # themselves are in Chroma (ocat.records.THREAD_TITLE_KEY), and this table is rebuilt from
            # there (ocat.memory.storage.reconcile.sync_titles). A thread without one is named by its first prompt.
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS thread_titles "
                "(thread_id TEXT PRIMARY KEY, title TEXT NOT NULL) WITHOUT ROWID"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
            )
            self._upgrade()
        except sqlite3.Error as exc:
            raise DerivedFileError(f"cannot open the lexical index {self.path}: {exc}", self.path) from exc
        # The threads the file records beside the terms: their exchanges' order and their titles.
        self.threads = ThreadCatalogue(self.file)

    def _upgrade(self) -> None:
        """Fill the term counts of an index made before they were kept (once, from the indexed texts)."""
        if self._db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        with self.file.transaction():
            # Another process may have upgraded it while this one waited for the write lock.
            if self._db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
                return
            for kind in RECORD_KINDS:
                self._db.execute(f"DROP TABLE IF EXISTS vocab_{kind}")  # what counted terms before
                self._db.execute(f"DELETE FROM df_{kind}")
                counts: Counter[str] = Counter()
                for (body,) in self._db.execute(f"SELECT body FROM fts_{kind}"):
                    counts.update(set(body.split()))
                self._bump(kind, counts, 1)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _bump(self, kind: str, counts: Mapping[str, int], sign: int) -> None:
        """Add (sign 1) or take away (sign -1) per-term document counts; drop terms no record has."""
        self._db.executemany(
            f"INSERT INTO df_{kind}(term, docs) VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs",
            ((term, sign * n) for term, n in counts.items()),
        )
        if sign < 0:
            self._db.execute(f"DELETE FROM df_{kind} WHERE docs <= 0")

    def add(self, kind: str, rows: Iterable[tuple[str, str, Mapping[str, Any]]]) -> None:
        """Index (id, text, metadata) rows; ids already indexed are left as they are."""
        with self.file.guarded(), self.file.transaction():
            self._counts.pop(kind, None)
            new_terms: Counter[str] = Counter()
            for record_id, text, metadata in rows:
                cursor = self._db.execute(f"INSERT OR IGNORE INTO ids_{kind}(record_id) VALUES (?)", (record_id,))
                if cursor.rowcount:
                    body = terms(searched_text(text))
                    self._db.execute(
                        f"INSERT INTO fts_{kind}(rowid, body) VALUES (?, ?)", (cursor.lastrowid, " ".join(body))
                    )
                    new_terms.update(set(body))
                if kind == "exchange" and "thread_id" in metadata:
                    self._db.execute(
                        "INSERT OR IGNORE INTO thread_order VALUES (?, ?, ?)",
                        (record_id, str(metadata["thread_id"]), float(metadata.get("timestamp", 0.0))),
                    )
                    title = metadata.get(THREAD_TITLE_KEY)
                    if isinstance(title, str) and title:  # the copy of a title written with its exchange
                        self._db.execute(
                            "INSERT INTO thread_titles(thread_id, title) VALUES (?, ?) "
                            "ON CONFLICT(thread_id) DO UPDATE SET title = excluded.title",
                            (str(metadata["thread_id"]), title),
                        )
            self._bump(kind, new_terms, 1)

    def delete(self, kind: str, record_ids: Sequence[str]) -> None:
        """Remove records from the index (unknown ids are ignored)."""
        with self.file.guarded(), self.file.transaction():
            self._counts.pop(kind, None)
            gone: Counter[str] = Counter()
            for record_id in record_ids:
                row = self._db.execute(f"SELECT rowid FROM ids_{kind} WHERE record_id = ?", (record_id,)).fetchone()
                if row:
                    body = self._db.execute(f"SELECT body FROM fts_{kind} WHERE rowid = ?", (row[0],)).fetchone()
                    gone.update(set(body[0].split()) if body else ())
                    self._db.execute(f"DELETE FROM fts_{kind} WHERE rowid = ?", (row[0],))
                    self._db.execute(f"DELETE FROM ids_{kind} WHERE rowid = ?", (row[0],))
                if kind == "exchange":
                    self._db.execute("DELETE FROM thread_order WHERE record_id = ?", (record_id,))
            self._bump(kind, gone, -1)

    def clear(self, kind: str) -> None:
        """Empty one kind's index (before a rebuild)."""
        with self.file.guarded(), self.file.transaction():
            self._counts.pop(kind, None)
            self._db.execute(f"DELETE FROM fts_{kind}")
            self._db.execute(f"DELETE FROM ids_{kind}")
            self._db.execute(f"DELETE FROM df_{kind}")
            if kind == "exchange":
                self._db.execute("DELETE FROM thread_order")

    def count(self, kind: str) -> int:
        """How many records of a kind are indexed."""
        with self.file.guarded():
            # Another process (writing through the owner's server) may have changed the index.
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:
                self._counts.clear()
                self._data_version = version
            if kind not in self._counts:
                self._counts[kind] = int(self._db.execute(f"SELECT count(*) FROM ids_{kind}").fetchone()[0])
            return self._counts[kind]

    def ids(self, kind: str) -> set[str]:
        """The ids of every indexed record of a kind (for levelling by ids: ocat.memory.storage.remote_sync)."""
        with self.file.guarded():
            return {row[0] for row in self._db.execute(f"SELECT record_id FROM ids_{kind}")}

    def missing(self, kind: str, record_ids: Sequence[str]) -> list[str]:
        """Which of these ids are not indexed, in their order."""
        unique = list(dict.fromkeys(record_ids))
        found: set[str] = set()
        with self.file.guarded():
            for start in range(0, len(unique), IDS_PER_SELECT):
                part = unique[start : start + IDS_PER_SELECT]
                marks = ",".join("?" * len(part))
                found.update(row[0] for row in self._db.execute(
                    f"SELECT record_id FROM ids_{kind} WHERE record_id IN ({marks})", part))
        return [i for i in unique if i not in found]

    def search(self, kind: str, query_terms: Sequence[str], k: int) -> list[tuple[str, float]]:
        """The k best BM25 matches for any of the terms, as (id, bm25 score >= 0), best first.

        Only the rarer terms are searched once the postings they make reach POSTINGS_BUDGET
        (the most common terms add least to BM25 and most to its cost).
        """
        # The rarest MAX_QUERY_TERMS are searched at most: the MATCH expression stays small.
        unique = list(dict.fromkeys(query_terms))
        if not unique or k <= 0:
            return []
        with self.file.guarded():
            chosen = within_postings_budget(self._doc_freqs(kind, unique))[:MAX_QUERY_TERMS]
            if not chosen:
                return []
            rows = self._db.execute(
                f"SELECT i.record_id, -bm25(fts_{kind}) AS score FROM fts_{kind} "
                f"JOIN ids_{kind} i ON i.rowid = fts_{kind}.rowid "
                f"WHERE fts_{kind} MATCH ? ORDER BY bm25(fts_{kind}) LIMIT ?",
                (" OR ".join(f'"{t}"' for t in chosen), k),
            ).fetchall()
        return [(record_id, float(score)) for record_id, score in rows]

    def doc_freqs(self, kind: str, query_terms: Sequence[str]) -> dict[str, int]:
        """How many records of a kind contain each term (0 for unseen terms)."""
        unique = list(dict.fromkeys(query_terms))
        if not unique:
            return {}
        with self.file.guarded():
            return self._doc_freqs(kind, unique)

    def _doc_freqs(self, kind: str, unique: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        # In slices: a caller may pass more terms than one statement takes.
        for start in range(0, len(unique), IDS_PER_SELECT):
            part = unique[start : start + IDS_PER_SELECT]
            marks = ",".join("?" * len(part))
            found.update(self._db.execute(f"SELECT term, docs FROM df_{kind} WHERE term IN ({marks})", part).fetchall())
        return {t: int(found.get(t, 0)) for t in unique}

    def term_sets(self, kind: str, record_ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The distinct terms of indexed records (what `term_set` makes of their texts), by id.

        Read from the index, so scoring a candidate never needs its text from Chroma.
        """
        unique = list(dict.fromkeys(record_ids))
        if not unique:
            return {}
        marks = ",".join("?" * len(unique))
        with self.file.guarded():
            rows = self._db.execute(
                f"SELECT i.record_id, f.body FROM ids_{kind} i JOIN fts_{kind} f ON f.rowid = i.rowid "
                f"WHERE i.record_id IN ({marks})",
                unique,
            ).fetchall()
        return {record_id: frozenset(body.split()) for record_id, body in rows}

    def get_meta(self, key: str) -> str | None:
        """A value kept in the index about the index itself, or None."""
        with self.file.guarded():
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Keep a value about the index."""
        with self.file.guarded():
            self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def id_groups(self, kind: str, prefix_length: int, glob: str) -> list[tuple[str, int, str]]:
        """Indexed ids matching `glob`, grouped by their first `prefix_length` characters:
        (prefix, how many, the smallest id). One indexed scan, no Chroma round trip."""
        with self.file.guarded():
            rows = self._db.execute(
                f"SELECT substr(record_id, 1, ?) AS head, count(*), min(record_id) FROM ids_{kind} "
                "WHERE record_id GLOB ? GROUP BY head",
                (prefix_length, glob),
            ).fetchall()
        return [(str(head), int(count), str(sample)) for head, count, sample in rows]

    def resolve_chunk(self, short: str) -> list[str]:
        """The document chunk ids `short` stands for in a chunk's short form, `doc-HEAD-N` (the
        start of its document's key and its index); at most two. [] when `short` is not of that form."""
        form = CHUNK_ID.match(short)
        if form is None:
            return []
        with self.file.guarded():
            rows = self._db.execute(
                "SELECT record_id FROM ids_document WHERE record_id GLOB ? LIMIT 2",
                (f"doc-{form.group(1)}*-{form.group(2)}",),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def resolve_prefix(self, kind: str, prefix: str) -> list[str]:
        """Ids starting with `prefix`; at most two, enough to tell unique from ambiguous."""
        with self.file.guarded():
            return [row[0] for row in self._db.execute(
                f"SELECT record_id FROM ids_{kind} WHERE record_id LIKE ? ESCAPE '\\' LIMIT 2", (like_prefix(prefix),)
            ).fetchall()]

    def close(self) -> None:
        """Close the database."""
        self.file.close()
