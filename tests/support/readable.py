"""Waiting for a descriptor to turn readable, whatever its number.

`select.select()` refuses a descriptor numbered 1,024 or more, and a pytest-xdist worker that has
run many tests holds more than that: each store a test opens leaves Chroma's files and its
runtime's descriptors open for the process's life (~10 a store; one process running the quick loop
ended holding ~5,600). The warm server, started late in such a worker, died of "filedescriptor
out of range in select()". `poll` has no such limit.
"""

from __future__ import annotations

import select
from typing import Protocol


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


def readable(fd: int | _HasFileno, seconds: float | None) -> bool:
    """Whether `fd` turns readable (data, or its other end closed) within `seconds` (None: wait)."""
    watcher = select.poll()
    watcher.register(fd, select.POLLIN)
    return bool(watcher.poll(None if seconds is None else max(0, int(seconds * 1000))))
