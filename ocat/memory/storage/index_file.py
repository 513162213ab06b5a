"""The lexical index's SQLite file, as the two that keep tables in it share it: one connection,
one lock, and batches of writes that are all or nothing (ocat.memory.storage.lexical_index, the
terms; ocat.memory.storage.thread_catalogue, the threads)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from typing import Iterator

from ocat.memory.storage.derived import DerivedFileError


class IndexFile:
    """One SQLite file shared between threads: use `connection` inside `guarded()` (and
    `transaction()` to write a batch). Opening it raises sqlite3.Error, for its owner to word."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)

    def transaction(self) -> _Transaction:
        """BEGIN IMMEDIATE ... COMMIT around a batch of writes, ROLLBACK if it fails."""
        return _Transaction(self.connection, self.path)

    @contextmanager
    def guarded(self) -> Iterator[None]:
        """Hold the lock; a failure of the file (damaged, gone) is a DerivedFileError naming it."""
        with self.lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise DerivedFileError(f"the lexical index {self.path} failed: {exc}", self.path) from exc

    def close(self) -> None:
        """Close the connection (after any statement running in another thread)."""
        with self.lock:
            self.connection.close()


class _Transaction:
    """BEGIN/COMMIT around a batch, ROLLBACK if it fails: an index batch is all or nothing."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self._db = db
        self._path = path

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        except sqlite3.Error as failed:
            raise DerivedFileError(f"cannot write the lexical index {self._path}: {failed}", self._path) from failed
        if isinstance(exc, sqlite3.Error):
            raise DerivedFileError(f"cannot write the lexical index {self._path}: {exc}", self._path) from exc
