"""The derived files beside a store (the lexical index, the prompt vectors): checked when opened,
moved aside when damaged, rebuilt from the primary store.

Chroma holds what the user said and chose; these files hold what can be computed again from
it. So a damaged one is never a reason to fail: it is moved aside as `<name>.damaged-<UTC
time>` (with its -wal and -shm), a fresh one is built, and the user is told in one line.
"""

from __future__ import annotations

import atexit
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ocat.errors import StoreError
from ocat.config.locations import cache_dir

if TYPE_CHECKING:
    from ocat.memory.storage.location import StoreLocation

# The files SQLite keeps beside a database in WAL mode.
SIDE_FILES = ("-wal", "-shm")
# Errors that say a file is in use or out of reach (another process writes it, it belongs to
# another user or is immutable, the disk is full), not that it is damaged.
_NOT_DAMAGE = ("locked", "busy", "unable to open", "readonly", "read-only", "permission", "disk is full",
               "not authorized")


def is_damage(message: str) -> bool:
    """Whether an SQLite error says the file is damaged (rather than busy, read-only or out of reach)."""
    lowered = message.lower()
    return not any(word in lowered for word in _NOT_DAMAGE)


class DerivedFileError(StoreError):
    """A derived file failed to read or write: the search that met it goes on without that side.
    A damaged one is rebuilt; one that cannot be written (`damage` False: read-only, another
    user's, a full disk) is left as it is, and catches up with the store once it can be written."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path

    @property
    def damage(self) -> bool:
        """Whether the file itself is damaged (moving it aside and rebuilding it helps)."""
        return is_damage(str(self))


def sqlite_problem(path: Path) -> str | None:
    """What is wrong with the SQLite file at `path` (its header, its pages), or None when it
    is sound or absent. Read-only, and cheap: `PRAGMA quick_check` reads each page once."""
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        text = str(exc)
        # Busy (another process is writing) or not readable here: no sign of damage, and a
        # file in use must not be moved from under its writer.
        return text if is_damage(text) else None
    found = [str(row[0]) for row in rows]
    return None if found == ["ok"] else "; ".join(found[:3])


def move_aside(path: Path, *, why: str = "damaged") -> Path:
    """Move a derived file (and its -wal and -shm) out of the way: `<name>.<why>-<UTC time>`."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    for suffix in ("", *SIDE_FILES):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.replace(Path(f"{target}{suffix}"))
    return target


def checked(path: Path, what: str, notify: Callable[[str], None] | None) -> str | None:
    """Check a derived file before it is opened; a damaged one is moved aside (a fresh one is then
    made and filled from the store) and `notify` is told. Returns the damage found, or None."""
    problem = sqlite_problem(path)
    if problem is None:
        return None
    try:
        moved = move_aside(path)
    except OSError as exc:
        raise StoreError(f"the {what} {path} is damaged ({problem}) and cannot be moved aside: "
                         f"{exc.strerror or exc}; delete it, and ocat rebuilds it") from exc
    if notify is not None:
        notify(f"the {what} {path} was damaged ({problem}); moved aside to {moved.name} and rebuilt from the store")
    return problem


def lexical_index_path(location: StoreLocation, name: str) -> Path:
    """Where a store's lexical index lives: in the store's folder, or (server mode) in the cache."""
    if location.path is not None:
        location.path.mkdir(parents=True, exist_ok=True)
        return location.path / f"ocat-lexical-{name}.sqlite3"
    folder = cache_dir() / "ocat" / "lexical"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{location.cache_key()}-{name}.sqlite3"


def beside_index(index: Path | str, what: str) -> Path:
    """A file of derived data beside the lexical index: `ocat-<what>-<store>.sqlite3` next to
    `ocat-lexical-<store>.sqlite3` in the store's folder, `ocat-<what>-<host>-<port>-<store>.sqlite3`
    next to `<host>-<port>-<store>.sqlite3` in the cache for a server."""
    index = Path(index)
    if index.name.startswith("ocat-lexical-"):
        return index.with_name(index.name.replace("ocat-lexical-", f"ocat-{what}-", 1))
    # A server's index in the cache (`<host>-<port>-<store>.sqlite3`): a file of its own beside it
    # too, never the index's own file (whose `meta` table the prompt file would empty).
    return index.with_name(f"ocat-{what}-{index.name}")


# The derived files written in this process. ocat's commands end without Python's teardown
# (ocat.process_end), which closed their connections and so folded SQLite's write-ahead log
# back into each file; an exit handler does that instead (a checkpoint on a connection of its
# own, whatever other connections are still open), so a file holds all it has, as a copy of it
# or a check of it expects.
_OPEN: set[str] = set()
_OPEN_LOCK = threading.Lock()


def checkpoint_at_exit(path: str) -> None:
    """Fold `path`'s write-ahead log into it when the process exits (an exit handler registered
    with the first file: it runs before ocat.process_end's, which was registered first of all)."""
    if path == ":memory:":
        return
    with _OPEN_LOCK:
        if not _OPEN:
            atexit.register(_checkpoint_all)
        _OPEN.add(path)


def _checkpoint_all() -> None:
    with _OPEN_LOCK:
        paths = sorted(_OPEN)
        _OPEN.clear()
    for path in paths:
        try:
            # mode=rw: a file deleted meanwhile (by a repair, by the user) is not made again, empty.
            db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=rw", uri=True, timeout=1.0)
            try:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                db.close()
        except sqlite3.Error:  # busy, gone: the log in its -wal file is read back by the next open
            pass
