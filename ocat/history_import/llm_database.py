"""Opening simonw/llm's `logs.db` read-only, even while llm has it open or is writing to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ocat.errors import InputFileError

LOCK_TIMEOUT = 1.0
"""Seconds to wait for a lock before reading the file as it is on disk instead."""


class LogsDatabase:
    """A read-only connection to an llm logs database.

    Opened with `mode=ro`, so nothing here can write to the user's logs. When llm holds a lock
    (a write in progress) or the database cannot be opened read-only (WAL mode in a read-only
    folder), it is reopened with `immutable=1`, which reads the file as it is on disk without
    locking: a write llm has not finished is not seen, which an import can live with.
    """

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self.immutable = False
        self.connection = self._connect()

    def _connect(self) -> sqlite3.Connection:
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro" + ("&immutable=1" if self.immutable else "")
        try:
            connection = sqlite3.connect(uri, uri=True, timeout=self.timeout)
        except sqlite3.Error as exc:
            raise InputFileError(f"cannot open {self.path}: {exc}") from None
        connection.row_factory = sqlite3.Row
        return connection

    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[sqlite3.Row]:
        """All rows of one query; InputFileError when the file is no readable SQLite database."""
        try:
            return self.connection.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            # Locked, busy, or unopenable read-only: read the file as it is instead, once.
            if self.immutable or "no such" in str(exc):
                raise InputFileError(f"cannot read {self.path}: {exc}") from None
            self.connection.close()
            self.immutable = True
            self.connection = self._connect()
            return self.query(sql, params)
        except sqlite3.DatabaseError as exc:
            raise InputFileError(f"{self.path} is not a readable SQLite database: {exc}") from None

    def tables(self) -> set[str]:
        """The names of the database's tables."""
        return {row[0] for row in self.query("select name from sqlite_master where type = 'table'")}

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()
