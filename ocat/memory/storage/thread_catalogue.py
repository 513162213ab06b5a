"""The threads of a store, as the lexical index's file records them beside the terms: each
exchange's place in its thread (`thread_order`: its thread and time) and the titles the user
gave threads (`thread_titles`, a copy of those in Chroma, ocat.records.THREAD_TITLE_KEY).

Read for a hit's neighbours and times (retrieval), the recent threads (the wake block,
/threads), id prefixes of threads; written with every exchange by the lexical index, whose
file, lock and transactions it shares (`LexicalIndex.threads`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from ocat.memory.storage.index_file import IndexFile


def like_prefix(prefix: str) -> str:
    """A LIKE pattern (with ESCAPE '\\') matching what starts with `prefix`, taken literally."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class ThreadCatalogue:
    """Thread order and titles in the lexical index's file (its tables are made by the index)."""

    def __init__(self, file: IndexFile) -> None:
        self._file = file

    def neighbours(self, record_ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Each exchange's previous and next exchange in its thread (None at either end).

        One statement for all ids; each neighbour is an index seek on (thread_id, ts).
        """
        rows = self._rows_for(
            "SELECT t.record_id, "
            "(SELECT p.record_id FROM thread_order p WHERE p.thread_id = t.thread_id AND "
            " (p.ts < t.ts OR (p.ts = t.ts AND p.record_id < t.record_id)) "
            " ORDER BY p.ts DESC, p.record_id DESC LIMIT 1), "
            "(SELECT n.record_id FROM thread_order n WHERE n.thread_id = t.thread_id AND "
            " (n.ts > t.ts OR (n.ts = t.ts AND n.record_id > t.record_id)) ORDER BY n.ts, n.record_id LIMIT 1) "
            "FROM thread_order t WHERE t.record_id IN ({marks})",
            record_ids,
        )
        return {record_id: (before, after) for record_id, before, after in rows}

    def times(self, record_ids: Sequence[str]) -> dict[str, float]:
        """Each exchange's time, from the thread order (a time named in a prompt: read here, not
        with each candidate's whole metadata from Chroma, at a fifth of the cost)."""
        rows = self._rows_for("SELECT record_id, ts FROM thread_order WHERE record_id IN ({marks})", record_ids)
        return {record_id: float(ts) for record_id, ts in rows}

    def starting(self, prefix: str) -> list[str]:
        """Thread ids starting with `prefix`; at most two, enough to tell unique from ambiguous."""
        with self._file.guarded():
            return [row[0] for row in self._file.connection.execute(
                "SELECT DISTINCT thread_id FROM thread_order WHERE thread_id LIKE ? ESCAPE '\\' LIMIT 2",
                (like_prefix(prefix),),
            ).fetchall()]

    def recent(
        self, limit: int, only: Sequence[str] | None = None
    ) -> list[tuple[str, int, float, float, str]]:
        """The most recently active threads (of `only`, when given): (thread_id, exchanges, first ts,
        last ts, first exchange id)."""
        chosen = ""
        if only is not None:
            only = list(dict.fromkeys(only))[:limit]
            chosen = f"WHERE thread_id IN ({','.join('?' * len(only))}) " if only else "WHERE 0 "
        with self._file.guarded():
            rows = self._file.connection.execute(
                f"SELECT thread_id, count(*), min(ts), max(ts) FROM thread_order {chosen}GROUP BY thread_id "
                "ORDER BY max(ts) DESC LIMIT ?",
                (*(only or ()), limit),
            ).fetchall()
            found = []
            for thread_id, count, first, last in rows:
                head = self._file.connection.execute(
                    "SELECT record_id FROM thread_order WHERE thread_id = ? ORDER BY ts, record_id LIMIT 1",
                    (thread_id,),
                ).fetchone()
                found.append((thread_id, int(count), float(first), float(last), head[0] if head else ""))
        return found

    def heads(self) -> list[str]:
        """Each thread's first exchange id (its earliest; SQLite takes the bare column from the
        row of the minimum)."""
        with self._file.guarded():
            rows = self._file.connection.execute(
                "SELECT record_id, min(ts) FROM thread_order GROUP BY thread_id"
            ).fetchall()
        return [str(row[0]) for row in rows]

    def recent_exchanges(self, limit: int, since: float | None = None) -> list[str]:
        """The ids of the `limit` newest exchanges (not older than `since`, when given), newest first."""
        with self._file.guarded():
            rows = self._file.connection.execute(
                "SELECT record_id FROM thread_order WHERE ts >= ? ORDER BY ts DESC, record_id LIMIT ?",
                (since if since is not None else float("-inf"), limit),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def set_title(self, thread_id: str, title: str | None) -> None:
        """Name a thread (None: drop its name, so its first prompt names it again)."""
        with self._file.guarded():
            if title is None:
                self._file.connection.execute("DELETE FROM thread_titles WHERE thread_id = ?", (thread_id,))
            else:
                self._file.connection.execute(
                    "INSERT INTO thread_titles(thread_id, title) VALUES (?, ?) "
                    "ON CONFLICT(thread_id) DO UPDATE SET title = excluded.title",
                    (thread_id, title),
                )

    def titles(self, thread_ids: Sequence[str]) -> dict[str, str]:
        """The titles given to these threads (threads without one are left out)."""
        rows = self._rows_for("SELECT thread_id, title FROM thread_titles WHERE thread_id IN ({marks})", thread_ids)
        return {str(thread_id): str(title) for thread_id, title in rows}

    def all_titles(self) -> dict[str, str]:
        """Every thread title the index holds (for the upgrade that moves them into Chroma)."""
        with self._file.guarded():
            rows = self._file.connection.execute("SELECT thread_id, title FROM thread_titles").fetchall()
        return {str(thread_id): str(title) for thread_id, title in rows}

    def replace_titles(self, titles: Mapping[str, str]) -> None:
        """Make the titles table exactly `titles` (a rebuild from the primary store)."""
        with self._file.guarded(), self._file.transaction():
            self._file.connection.execute("DELETE FROM thread_titles")
            self._file.connection.executemany(
                "INSERT INTO thread_titles(thread_id, title) VALUES (?, ?)", titles.items()
            )

    def _rows_for(self, sql: str, ids: Sequence[str]) -> list[Any]:
        """The rows of `sql` for each distinct id (`{marks}` stands for their placeholders); [] for none."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        with self._file.guarded():
            return self._file.connection.execute(sql.format(marks=",".join("?" * len(unique))), unique).fetchall()
